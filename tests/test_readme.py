"""The README's Python examples run as written, and leave nothing behind."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"


def _examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


@pytest.mark.parametrize("index", range(len(_examples())))
def test_readme_example_runs(
    index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cwd = tmp_path / "cwd"  # fresh and empty, as in a clean checkout's scratch directory
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    exec(
        compile(_examples()[index], f"README.md example {index}", "exec"), {"__name__": "__main__"}
    )
    assert capsys.readouterr().out.strip()
    assert list(cwd.iterdir()) == []
