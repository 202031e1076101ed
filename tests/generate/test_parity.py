"""The parity diff as a pure function: every kind of difference, its path, verdict and reason,
on hand-made wire requests (the laws exercise it on real ones from the emulator's log)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from sessiongen.parity import Difference, Verdict, WireRequest, diff

MARK = {"type": "ephemeral"}


def _text(text: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": text, **extra}


def _body(*messages: tuple[str, list[dict[str, Any]] | str], **keys: Any) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-6",
        "max_tokens": 512,
        **keys,
        "messages": [{"role": role, "content": content} for role, content in messages],
    }


HISTORY: list[tuple[str, list[dict[str, Any]] | str]] = [
    ("user", [_text("What is in app.py?")]),
    (
        "assistant",
        [_text("add() and mean()."), {"type": "tool_use", "id": "t1", "name": "x", "input": {}}],
    ),
    ("user", [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]),
    ("assistant", [_text("Done.")]),
]


def _wire(
    body: dict[str, Any], headers: dict[str, str] | None = None, key: str | None = "s"
) -> WireRequest:
    return WireRequest(body, headers if headers is not None else {"x-session-id": "s"}, key)


def _rows(report: Any) -> list[tuple[str, str, str]]:
    return [(d.path, d.verdict, d.reason) for d in report.differences]


def test_identical_requests_have_no_differences() -> None:
    body = _body(*HISTORY, ("user", [_text("Next?")]))
    report = diff(_wire(body), _wire(dict(body)))
    assert report.differences == report.violations == report.allowed == ()
    assert report.rows() == []


def test_the_transient_message_replaces_the_steps_own() -> None:
    step = _body(*HISTORY, ("user", [_text("Step prompt.")]))
    generate = _body(*HISTORY, ("user", [_text("Generate prompt.")]))
    report = diff(_wire(step), _wire(generate))
    assert _rows(report) == [
        (
            "messages[4].content[0]",
            "allowed",
            "step's own trailing user text (the transient message)",
        ),
        (
            "messages[4].content[0]",
            "allowed",
            "generate's own trailing user text (the transient message)",
        ),
    ]
    assert report.differences[0].step == _text("Step prompt.")
    assert report.differences[0].generate is None
    assert report.differences[1].step is None
    assert report.differences[1].generate == _text("Generate prompt.")
    assert report.violations == () and len(report.allowed) == 2


def test_an_extra_trailing_block_on_either_side_is_a_violation() -> None:
    step = _body(*HISTORY, ("user", [_text("Prompt.")]))
    generate = _body(*HISTORY, ("user", [_text("Injected."), _text("Other prompt.")]))
    report = diff(_wire(step), _wire(generate))
    assert _rows(report) == [
        (
            "messages[4].content[0]",
            "violation",
            "step appends 1 trailing blocks where the other side appends 2",
        ),
        (
            "messages[4].content[0]",
            "violation",
            "generate appends 2 trailing blocks where the other side appends 1",
        ),
        (
            "messages[4].content[1]",
            "violation",
            "generate appends 2 trailing blocks where the other side appends 1",
        ),
    ]
    assert len(report.violations) == 3 and report.allowed == ()


def test_history_that_differs_is_a_violation_naming_the_block() -> None:
    step = _body(*HISTORY, ("user", [_text("Prompt.")]))
    generate = _body(
        *HISTORY[:3], ("assistant", [_text("Other answer.")]), ("user", [_text("Prompt.")])
    )
    report = diff(_wire(step), _wire(generate))
    assert _rows(report)[0] == (
        "messages[3].content[0]",
        "violation",
        "history differs (step has a assistant text block)",
    )
    assert (
        "messages[3].content[0]",
        "violation",
        "history differs (generate has a assistant text block)",
    ) in _rows(report)


def test_a_role_change_with_the_same_text_is_not_shared() -> None:
    step = _body(("user", [_text("Same.")]))
    generate = _body(("assistant", [_text("Same.")]))
    report = diff(_wire(step), _wire(generate))
    assert [(d.verdict, d.reason) for d in report.differences] == [
        ("allowed", "step's own trailing user text (the transient message)"),
        ("violation", "history differs (generate has a assistant text block)"),
    ]


def test_plain_string_content_is_one_text_block() -> None:
    step = _body(("user", "Hello."), ("assistant", "Hi."), ("user", [_text("A.")]))
    generate = _body(("user", [_text("Hello.")]), ("assistant", [_text("Hi.")]), ("user", "B."))
    report = diff(_wire(step), _wire(generate))
    assert [d.path for d in report.differences] == ["messages[2].content[0]"] * 2
    assert report.violations == ()


def test_the_warming_breakpoint_on_the_last_shared_block_is_allowed() -> None:
    shared = [("user", [_text("Q1")]), ("assistant", [_text("A1")])]
    step = _body(*shared, ("user", [_text("Prompt.", cache_control=MARK)]))
    warming_history = [("user", [_text("Q1")]), ("assistant", [_text("A1", cache_control=MARK)])]
    generate = _body(*warming_history, ("user", [_text("Keep-alive.")]))
    report = diff(_wire(step), _wire(generate))
    assert _rows(report)[0] == (
        "messages[1].content[0].cache_control",
        "allowed",
        "warming breakpoint on the last shared block",
    )
    assert report.differences[0].step is None and report.differences[0].generate == MARK
    assert report.violations == ()


@pytest.mark.parametrize(
    ("step_marks", "generate_marks"),
    [((MARK, None), (None, MARK)), ((None, MARK), (None, None)), ((MARK, None), (None, None))],
    ids=["moved-inside-history", "removed-from-last-shared", "removed-inside-history"],
)
def test_a_breakpoint_moved_or_dropped_in_the_shared_history_is_a_violation(
    step_marks: tuple[dict[str, str] | None, dict[str, str] | None],
    generate_marks: tuple[dict[str, str] | None, dict[str, str] | None],
) -> None:
    def history(marks: tuple[dict[str, str] | None, ...]) -> list[tuple[str, list[dict[str, Any]]]]:
        texts = ("Q1", "A1")
        return [
            (role, [_text(t, **({"cache_control": m} if m else {}))])
            for role, t, m in zip(("user", "assistant"), texts, marks, strict=True)
        ]

    step = _body(*history(step_marks), ("user", [_text("P")]))
    generate = _body(*history(generate_marks), ("user", [_text("P")]))
    report = diff(_wire(step), _wire(generate))
    assert report.violations
    assert all(
        d.reason == "cache breakpoint moved inside the shared history" for d in report.violations
    )
    assert all(d.path.endswith(".cache_control") for d in report.violations)
    assert report.allowed == ()


@pytest.mark.parametrize(
    ("key", "step_value", "generate_value", "verdict", "reason"),
    [
        ("max_tokens", 512, 0, "allowed", "output limit (warming sends 0)"),
        ("model", "claude-sonnet-4-6", "claude-opus-4-6", "violation", "changes the model"),
        ("tools", [{"name": "x"}], None, "violation", "changes the tool definitions"),
        ("tool_choice", None, {"type": "none"}, "violation", "changes the tool choice"),
        ("system", "A", "B", "violation", "changes the system prompt"),
        ("thinking", None, {"type": "enabled"}, "violation", "changes the thinking settings"),
        ("output_config", None, {"effort": "low"}, "violation", "changes the effort settings"),
        (
            "metadata",
            {"user_id": "a"},
            {"user_id": "b"},
            "violation",
            "changes the provider options",
        ),
    ],
)
def test_every_top_level_key_is_compared(
    key: str, step_value: Any, generate_value: Any, verdict: Verdict, reason: str
) -> None:
    step = {k: v for k, v in {**_body(*HISTORY), key: step_value}.items() if v is not None}
    generate = {k: v for k, v in {**_body(*HISTORY), key: generate_value}.items() if v is not None}
    report = diff(_wire(step), _wire(generate))
    assert report.differences == (Difference(key, step_value, generate_value, verdict, reason),)


def test_headers_and_the_cache_key_are_compared() -> None:
    body = _body(*HISTORY)
    step = _wire(body, {"x-session-id": "s", "x-a": "1"}, "root")
    generate = _wire(body, {"x-session-id": "t", "x-b": "2"}, "other")
    report = diff(step, generate)
    assert _rows(report) == [
        ("headers.x-a", "violation", "changes the headers"),
        ("headers.x-b", "violation", "changes the headers"),
        ("headers.x-session-id", "violation", "changes the headers"),
        ("prompt_cache_key", "violation", "changes the prompt-cache key"),
    ]
    assert report.differences[0].step == "1" and report.differences[0].generate is None
    assert report.differences[3].step == "root" and report.differences[3].generate == "other"
    assert diff(_wire(body), _wire(body)).differences == ()


def test_rows_shorten_long_values_for_tables() -> None:
    long = "x" * 100
    step = _body(("user", [_text(long)]))
    generate = _body(("user", [_text("short")]))
    rows = diff(_wire(step), _wire(generate)).rows()
    assert rows[0]["path"] == "messages[0].content[0]" and rows[0]["verdict"] == "allowed"
    assert rows[0]["generate"] == "—"
    assert len(rows[0]["step"]) == 60 and rows[0]["step"].endswith("…")
    assert rows[0]["step"] == repr(_text(long))[:59] + "…"
    assert rows[1]["generate"] == repr(_text("short"))
    exactly = "y" * (60 - len(repr(_text(""))))
    row = diff(
        _wire(_body(("user", [_text(exactly)]))), _wire(_body(("user", [_text("z")])))
    ).rows()[0]
    assert row["step"] == repr(_text(exactly)) and len(row["step"]) == 60


def test_a_history_block_is_named_by_its_kind() -> None:
    step = _body(*HISTORY, ("user", [_text("Prompt.")]))
    generate = _body(
        *HISTORY,
        ("assistant", [{"type": "tool_use", "id": "t2", "name": "x", "input": {}}]),
        ("user", [_text("Prompt.")]),
    )
    reasons = [d.reason for d in diff(_wire(step), _wire(generate)).violations]
    assert "history differs (generate has a assistant tool_call block)" in reasons


def test_an_assistant_block_on_the_step_side_is_not_shared_with_a_user_one() -> None:
    step = _body(("assistant", [_text("Same.")]))
    generate = _body(("user", [_text("Same.")]))
    report = diff(_wire(step), _wire(generate))
    assert [(d.verdict, d.reason) for d in report.differences] == [
        ("violation", "history differs (step has a assistant text block)"),
        ("allowed", "generate's own trailing user text (the transient message)"),
    ]


def test_a_longer_trailing_run_on_the_step_side_is_a_violation() -> None:
    step = _body(*HISTORY, ("user", [_text("Update."), _text("Step prompt.")]))
    generate = _body(*HISTORY, ("user", [_text("Generate prompt.")]))
    report = diff(_wire(step), _wire(generate))
    assert report.allowed == () and len(report.violations) == 3
    assert report.violations[0].reason == (
        "step appends 2 trailing blocks where the other side appends 1"
    )


@pytest.mark.parametrize(
    "block",
    [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}},
        {"type": "tool_result", "tool_use_id": "t1", "content": "other"},
    ],
    ids=["image", "tool_result"],
)
def test_a_trailing_user_block_that_is_not_text_is_a_violation(block: dict[str, Any]) -> None:
    """Kinds that sort before and after 'text': neither is the transient message."""
    step = _body(*HISTORY, ("user", [_text("Step prompt.")]))
    generate = _body(*HISTORY, ("user", [block]))
    report = diff(_wire(step), _wire(generate))
    assert [d.verdict for d in report.differences] == ["allowed", "violation"]
    assert report.violations[0].reason.startswith("history differs (generate has a user ")


def test_equal_header_values_that_are_distinct_strings_do_not_differ() -> None:
    body = _body(*HISTORY)
    value = "".join(["s", "e", "s", "_1"])  # built at run time: equal to, not the same as
    report = diff(_wire(body, {"x-session-id": "ses_1"}), _wire(body, {"x-session-id": value}))
    assert report.differences == ()


def test_the_report_and_its_parts_are_read_only() -> None:
    body = _body(*HISTORY, ("user", [_text("Prompt.")]))
    wire = _wire(body)
    report = diff(wire, _wire(_body(*HISTORY, ("user", [_text("Other.")]))))
    for value, field in ((wire, "body"), (report, "differences"), (report.differences[0], "path")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(value, field, None)


def test_a_long_session_diffs_like_a_short_one() -> None:
    """More than 256 blocks: positions and lengths are compared by value (CPython shares the
    int objects up to 256 only)."""
    turns = 150
    history: list[tuple[str, list[dict[str, Any]] | str]] = []
    for i in range(turns):
        history += [("user", [_text(f"Q{i}")]), ("assistant", [_text(f"A{i}")])]
    marked = [*history[:-1], ("assistant", [_text(f"A{turns - 1}", cache_control=MARK)])]
    step = _body(*history, ("user", [_text("Step prompt.")]))
    warming = _body(*marked, ("user", [_text("Keep-alive.")]))
    report = diff(_wire(step), _wire(warming))
    assert [d.reason for d in report.differences] == [
        "warming breakpoint on the last shared block",
        "step's own trailing user text (the transient message)",
        "generate's own trailing user text (the transient message)",
    ]
    # Histories that differ from their first block on, in tails of 300 user text blocks.
    a = _body(("user", [_text(f"a{i}") for i in range(2 * turns)]))
    b = _body(("user", [_text(f"b{i}") for i in range(2 * turns)]))
    assert diff(_wire(a), _wire(b)).violations == ()
    # One side the other's prefix: the shared run ends at the shorter side's end.
    longer = diff(_wire(_body(*history)), _wire(_body(*history, ("user", [_text("More.")]))))
    assert [d.path for d in longer.differences] == [f"messages[{2 * turns}].content[0]"]


def test_equal_values_that_are_distinct_strings_are_equal_everywhere() -> None:
    """Provider, path and cache key read from a log are equal to, not the same objects as,
    the other side's: they must compare by value."""
    body = _body(*HISTORY)

    def built(text: str) -> str:
        return "".join(list(text))  # built at run time: equal to, not the same as

    step = WireRequest(body, {"x-session-id": "s"}, "root_key", "anthropic", "/v1/messages")
    generate = WireRequest(
        body, {"x-session-id": "s"}, built("root_key"), built("anthropic"), built("/v1/messages")
    )
    assert diff(step, generate).differences == ()


def test_a_header_after_an_equal_one_is_still_compared() -> None:
    body = _body(*HISTORY)
    step = _wire(body, {"a-same": "1", "x-session-id": "s"})
    generate = _wire(body, {"a-same": "1", "x-session-id": "t"})
    assert _rows(diff(step, generate)) == [
        ("headers.x-session-id", "violation", "changes the headers")
    ]
