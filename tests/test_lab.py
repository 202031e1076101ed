"""The lab: its workspace never overwrites anything, and its emulator helpers are plain calls
that act at once (a forgotten `await` cannot silently skip a clock advance)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pydantic
import pytest
from sessiongen import ProviderOverloaded
from sessiongen.lab import EmulatorLab, emulator_lab
from sessiongen.sample import SAMPLE_WORKSPACE

HELPERS = ("advance_by", "requests", "last_usage", "script", "faults")


@pytest.mark.parametrize("name", HELPERS)
def test_emulator_helpers_are_not_coroutine_functions(name: str) -> None:
    assert not inspect.iscoroutinefunction(getattr(EmulatorLab, name))


def test_the_helpers_that_mirror_an_admin_route_carry_its_name() -> None:
    """`lab.requests()`, `lab.script(...)` and `lab.faults(...)` do what `/_emulator/requests`,
    `/_emulator/script` and `/_emulator/faults` do: one name for each, in Python and HTTP."""
    from sessiongen.emulator import create_app

    routes = {getattr(r, "path", "") for r in create_app().routes}
    mirrored = [name for name in HELPERS if f"/_emulator/{name}" in routes]
    assert mirrored == ["requests", "script", "faults"]
    assert not hasattr(EmulatorLab, "fault")  # one name, not two


async def test_advance_without_await_moves_the_clock_past_the_cache_ttl() -> None:
    async with emulator_lab() as lab:
        session = lab.engine.create_session("forge", workspace=lab.workspace)
        await lab.engine.run(session.id, "Hello.")
        assert lab.last_usage().cache_write_5m_tokens > 0
        lab.advance_by(400)  # deliberately no await: the 5-minute entries must expire anyway
        await lab.engine.run(session.id, "Hello again.")
        assert lab.requests()[-1]["started_at"] == 400.0
        assert lab.last_usage().cache_read_tokens == 0  # a miss: the prefix is written again


async def test_the_helpers_and_the_admin_api_see_the_same_emulator() -> None:
    async with emulator_lab() as lab:
        assert lab.advance_by(5) == 5.0
        assert (await lab.admin.get("/_emulator/clock")).json() == {"now": 5.0}


async def test_script_and_fault_act_at_once_and_validate_like_the_admin_api() -> None:
    async with emulator_lab() as lab:
        session = lab.engine.create_session("forge", workspace=lab.workspace)
        lab.faults(status=529)
        with pytest.raises(ProviderOverloaded):
            await lab.engine.generate(session.id, "Title?")
        lab.script({"text": "Scripted."})
        assert (await lab.engine.generate(session.id, "Title?")).text == "Scripted."
        assert [r["status"] for r in lab.requests()] == [529, 200]
        with pytest.raises(pydantic.ValidationError):
            lab.script({"text": "ok", "unknown": 1})
        with pytest.raises(pydantic.ValidationError):
            lab.faults(status=700)
        with pytest.raises(ValueError):
            lab.advance_by(-1)


async def test_without_a_path_the_workspace_is_temporary() -> None:
    async with emulator_lab() as lab:
        workspace = lab.workspace
        files = {p.relative_to(workspace).as_posix() for p in workspace.rglob("*") if p.is_file()}
        assert files == set(SAMPLE_WORKSPACE)
    assert not workspace.exists()


@pytest.mark.parametrize("existing", [False, True], ids=["new", "empty"])
async def test_a_new_or_empty_directory_gets_the_sample_files_and_keeps_them(
    tmp_path: Path, existing: bool
) -> None:
    workspace = tmp_path / "nested" / "workspace"
    if existing:
        workspace.mkdir(parents=True)
    async with emulator_lab(workspace) as lab:
        assert lab.workspace == workspace
    for name, text in SAMPLE_WORKSPACE.items():
        assert (workspace / name).read_text(encoding="utf-8") == text


async def test_a_non_empty_directory_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    (tmp_path / "AGENTS.md").write_text("mine\n", encoding="utf-8")
    with pytest.raises(FileExistsError, match="will not overwrite") as raised:
        async with emulator_lab(tmp_path):
            pytest.fail("the lab started in a non-empty directory")
    assert str(tmp_path) in str(raised.value)
    assert [p.name for p in tmp_path.iterdir()] == ["AGENTS.md"]
    assert (tmp_path / "AGENTS.md").read_text(encoding="utf-8") == "mine\n"


async def test_a_file_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "workspace"
    target.write_text("not a directory\n", encoding="utf-8")
    with pytest.raises(FileExistsError):
        async with emulator_lab(target):
            pass
    assert target.read_text(encoding="utf-8") == "not a directory\n"
