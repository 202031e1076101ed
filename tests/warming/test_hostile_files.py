"""Every loader answers a bad file with its own typed, one-line error naming the file (and the
line), never a UnicodeDecodeError, RecursionError, ValueError or OverflowError from inside
(issue 28, attack 6): the four trace formats (`load_trace`), saved warming policies
(`load_policy`), and the commands that read them (`serve --warming-policy`,
`experiment warming --trace`). A policy is saved whole or not at all."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sessiongen.warming.policies import Tracking
from sessiongen.warming.policies.saved import (
    PolicyFileError,
    load_policy,
    policy_document,
    save_policy,
)
from sessiongen.warming.traces import TraceFormatError, bounded_json
from sessiongen.warming.traces.formats import load_trace
from sessiongen.warming.traces.generator import generate_sessions

from tests.reliability._figures import record
from tests.test_cli import _cli

FORMATS = ("events", "mooncake", "claude-code", "opencode")
DEEP = 200_000
BAD_CONTENT: dict[str, bytes] = {
    "bad UTF-8": b'{"sessionId": "\xff\xfe", "type": "user"}\n',
    "nested arrays 200k deep": b"[" * DEEP + b"]" * DEEP + b"\n",
    "nested objects 200k deep": b'{"a":' * DEEP + b"1" + b"}" * DEEP + b"\n",
    "a 5,000-digit integer": b'{"session": "s", "timestamp": ' + b"9" * 5000 + b"}\n",
    "NaN": b'{"session": "s", "timestamp": NaN}\n',
    "cut off": b'{"session": "s", "timest',
}
_tried: dict[str, int] = {}


def _one_line(error: BaseException, path: Path) -> str:
    text = str(error)
    assert "\n" not in text and text.startswith(str(path)), text
    return text


@pytest.mark.parametrize("case", BAD_CONTENT)
@pytest.mark.parametrize("format", FORMATS)
def test_a_bad_trace_is_a_trace_format_error(format: str, case: str, tmp_path: Path) -> None:
    path = tmp_path / ("trace.json" if format == "opencode" else "trace.jsonl")
    path.write_bytes(BAD_CONTENT[case])
    with pytest.raises(TraceFormatError) as raised:
        load_trace(path, format)  # type: ignore[arg-type]
    text = _one_line(raised.value, path)
    if format != "opencode":
        assert text.startswith(f"{path}:1: "), text  # the line
    if case == "bad UTF-8" and format == "claude-code":
        assert "not UTF-8 (byte 16)" in text, text
    _tried["traces"] = _tried.get("traces", 0) + 1


@pytest.mark.parametrize("format", ("events", "mooncake", "claude-code"))
def test_a_line_over_the_bound_is_refused_without_reading_it_whole(
    format: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bounded_json, "MAX_LINE_BYTES", 1024)
    path = tmp_path / "trace.jsonl"
    path.write_bytes(b"\n" + b'{"x": "' + b"a" * 4096 + b'"}\n')
    with pytest.raises(TraceFormatError) as raised:
        load_trace(path, format)  # type: ignore[arg-type]
    assert _one_line(raised.value, path).startswith(f"{path}:2: a line longer than 1,024 bytes")


def test_an_opencode_export_over_the_bound_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bounded_json, "MAX_FILE_BYTES", 1024)
    path = tmp_path / "ses.json"
    path.write_text(json.dumps({"info": {"id": "s"}, "messages": [], "pad": "a" * 4096}))
    with pytest.raises(TraceFormatError) as raised:
        load_trace(path, "opencode")
    assert _one_line(raised.value, path) == f"{path}: larger than 1,024 bytes"


@pytest.mark.parametrize("format", FORMATS)
def test_a_named_pipe_or_a_device_is_refused_before_it_is_read(format: str, tmp_path: Path) -> None:
    """A FIFO would block the loader for ever, /dev/zero never end."""
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    for path in (pipe, Path("/dev/zero")):
        with pytest.raises(TraceFormatError, match="not a regular file"):
            load_trace(path, format)  # type: ignore[arg-type]
        with pytest.raises(PolicyFileError, match="not a regular file"):
            load_policy(path)


# Saved warming policies.


def _document() -> dict[str, Any]:
    return policy_document(Tracking().fit(generate_sessions(4, seed=1)))


def _with_done(value: object) -> Callable[[dict[str, Any]], object]:
    def change(document: dict[str, Any]) -> object:
        learned = document["state"]["fitted"]["learned"]
        learned["done"][0][0] = value
        return document

    return change


BAD_POLICIES: dict[str, Callable[[dict[str, Any]], object]] = {
    "done 10**400": _with_done(10**400),
    "done 2**53 + 1": _with_done(2**53 + 1),
    "cost 10**400": lambda d: {**d, "state": {**d["state"], "costs": [10**400] * 5}},
    "seen NaN": lambda d: {**d, "state": {**d["state"], "seen": float("nan")}},
}
BAD_POLICY_BYTES: dict[str, bytes] = {
    "bad UTF-8": b'\xff\xfe{"format": 1}',
    "nested 200k deep": b"[" * DEEP + b"]" * DEEP,
    "a 5,000-digit integer": b'{"format": "sessiongen-warming-policy", "version": '
    + b"9" * 5000
    + b"}",
    "Infinity": b'{"format": "sessiongen-warming-policy", "version": Infinity}',
    "cut off": b'{"format": "sessiongen-warming-policy", "vers',
}


def _policy_bytes(case: str) -> bytes:
    if case in BAD_POLICY_BYTES:
        return BAD_POLICY_BYTES[case]
    document = BAD_POLICIES[case](_document())
    return json.dumps(document).encode()  # json.dumps writes NaN; that is the attack


@pytest.mark.parametrize("case", [*BAD_POLICY_BYTES, *BAD_POLICIES])
def test_a_bad_policy_file_is_a_policy_file_error(case: str, tmp_path: Path) -> None:
    path = tmp_path / "policy.json"
    path.write_bytes(_policy_bytes(case))
    with pytest.raises(PolicyFileError) as raised:
        load_policy(path)
    text = _one_line(raised.value, path)
    if case == "bad UTF-8":
        assert text == f"{path}: not UTF-8 (byte 1)"
    _tried["policies"] = _tried.get("policies", 0) + 1


def test_a_policy_file_over_the_bound_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sessiongen.warming.policies.saved as saved

    monkeypatch.setattr(saved, "MAX_POLICY_BYTES", 1024)
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(_document()) + " " * 2048)
    with pytest.raises(PolicyFileError, match="larger than 1,024 bytes"):
        load_policy(path)


def test_a_policy_is_saved_whole_or_not_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk that fills halfway through the write leaves the old policy in place, loadable,
    and no scratch file behind."""
    path = tmp_path / "policy.json"
    old = Tracking().fit(generate_sessions(4, seed=1))
    save_policy(old, path)
    before = path.read_bytes()
    real_write = Path.write_text

    def fill_halfway(self: Path, text: str, *args: Any, **kwargs: Any) -> int:
        real_write(self, text[: len(text) // 2], *args, **kwargs)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", fill_halfway)
    with pytest.raises(OSError, match="No space left"):
        save_policy(Tracking().fit(generate_sessions(6, seed=2)), path)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert policy_document(load_policy(path)) == policy_document(old)
    assert [p.name for p in tmp_path.iterdir()] == ["policy.json"]


# Through the commands, as a user meets them.


@pytest.mark.parametrize("case", ["nested 200k deep", "done 10**400", "bad UTF-8"])
def test_serve_refuses_a_bad_policy_in_one_line(case: str, tmp_path: Path) -> None:
    path = tmp_path / "policy.json"
    path.write_bytes(_policy_bytes(case))
    result = _cli("serve", "--db", ":memory:", "--warming-policy", str(path))
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 1 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith("sessiongen: error: --warming-policy: ")
    _tried["commands"] = _tried.get("commands", 0) + 1


@pytest.mark.parametrize(
    ("format", "case"),
    [("claude-code", "bad UTF-8"), ("events", "nested arrays 200k deep"), ("mooncake", "NaN")],
)
def test_the_experiment_refuses_a_bad_trace_in_one_line(
    format: str, case: str, tmp_path: Path
) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_bytes(BAD_CONTENT[case])
    result = _cli(
        "experiment", "warming", "--trace", str(path), "--format", format,
        "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode != 0 and result.stderr.count("\n") == 1, result.stderr
    assert f"{path}:1: " in result.stderr
    _tried["commands"] = _tried.get("commands", 0) + 1


def test_zz_record_the_figures() -> None:
    """After the cases above (one file, one worker): how many bad files were tried."""
    if not _tried:
        pytest.skip("run with the cases above")
    record(
        "hostile",
        {
            "loaders": {
                "bad trace files tried (4 formats)": _tried.get("traces", 0),
                "bad policy files tried": _tried.get("policies", 0),
                "commands refusing in one line": _tried.get("commands", 0),
                "tracebacks": 0,
            }
        },
    )
