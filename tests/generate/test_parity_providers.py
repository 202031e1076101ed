"""The parity diff on every provider's wire layout, on hand-made bodies in each provider's own
spelling (the matrix in tests/providers/test_tools_policy_matrix.py runs it on logged ones).

One rule (sessiongen.parity.diff) reads each body through its provider's `wire_view`; these
cases pin what each view sets apart: Bedrock's `cachePoint` blocks, OpenAI's leading system
messages and `prompt_cache_key`, Gemini's `generationConfig`, and each output limit."""

from __future__ import annotations

from typing import Any

import pytest
from sessiongen.parity import WireRequest, diff


def _rows(step: WireRequest, generate: WireRequest) -> list[tuple[str, str, str]]:
    return [(d.path, d.verdict, d.reason) for d in diff(step, generate).differences]


# --- Bedrock Converse ---------------------------------------------------------------------

CACHE_POINT = {"cachePoint": {"type": "default"}}
TOOL = {"toolSpec": {"name": "read_file", "inputSchema": {"json": {"type": "object"}}}}


def _converse(*tail: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "messages": [
            {"role": "user", "content": [{"text": "What is in app.py?"}]},
            {
                "role": "assistant",
                "content": [
                    {"text": "Let me read it."},
                    {"toolUse": {"toolUseId": "t1", "name": "read_file", "input": {}}},
                ],
            },
            {
                "role": "user",
                "content": [{"toolResult": {"toolUseId": "t1", "content": [{"text": "ok"}]}}],
            },
            {"role": "assistant", "content": [{"text": "It defines add()."}, CACHE_POINT]},
            *tail,
        ],
        "system": [{"text": "You are Forge."}, CACHE_POINT],
        "inferenceConfig": {"maxTokens": 512},
        "toolConfig": {"tools": [TOOL, CACHE_POINT]},
        **extra,
    }


def _bedrock(body: dict[str, Any], path: str = "/model/m/converse-stream") -> WireRequest:
    return WireRequest(body, {}, None, "bedrock", path)


def _user(text: str, *marks: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": [{"text": text}, *marks]}


def test_bedrock_the_transient_message_and_its_cache_point_are_allowed() -> None:
    step = _bedrock(_converse(_user("Step prompt.", CACHE_POINT)))
    generate = _bedrock(_converse(_user("Generate prompt.", CACHE_POINT)))
    assert [v for _, v, _ in _rows(step, generate)] == ["allowed", "allowed"]


def test_bedrock_warming_moves_the_cache_point_onto_the_last_shared_block() -> None:
    """The warming shape: output limit 1 (Converse's minimum), unstreamed, and the last
    cachePoint on the last shared block instead of after the prompt."""
    step = _converse(_user("Next question?", CACHE_POINT))
    step["messages"][3]["content"] = [{"text": "It defines add()."}]
    generate = _converse(_user("Keep alive."), inferenceConfig={"maxTokens": 1})
    rows = _rows(_bedrock(step), _bedrock(generate, "/model/m/converse"))
    assert rows == [
        ("path", "allowed", "transport (warming is unstreamed)"),
        ("inferenceConfig.maxTokens", "allowed", "output limit (warming sends 0)"),
        ("messages[3].content[1]", "allowed", "warming breakpoint on the last shared block"),
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


def test_bedrock_a_cache_point_moved_inside_the_history_is_a_violation() -> None:
    step = _converse(_user("Prompt."))
    generate = _converse(_user("Prompt."))
    generate["messages"][1]["content"].insert(1, CACHE_POINT)
    rows = _rows(_bedrock(step), _bedrock(generate))
    assert ("violation", "cache breakpoint moved inside the shared history") in [
        (v, r) for _, v, r in rows
    ]


def test_bedrock_tools_removed_and_choice_are_named() -> None:
    step = _converse(_user("Prompt."))
    generate = _converse(_user("Prompt."), toolConfig={"tools": [], "toolChoice": {"any": {}}})
    rows = _rows(_bedrock(step), _bedrock(generate))
    assert rows == [
        ("toolConfig.tools", "violation", "changes the tool definitions"),
        ("toolConfig.toolChoice", "violation", "changes the tool choice"),
    ]


def test_bedrock_another_model_in_the_path_is_a_violation() -> None:
    body = _converse(_user("Prompt."))
    rows = _rows(_bedrock(body), _bedrock(body, "/model/other/converse-stream"))
    assert rows == [("path", "violation", "changes the endpoint")]


def test_bedrock_the_view_counts_tools_and_reads_the_choice() -> None:
    view = _bedrock(_converse()).view()
    assert (view.tools, view.tool_choice) == (1, "auto (omitted)")
    blocks = [(b.role, b.kind, b.mark is not None) for b in view.blocks]
    assert blocks == [
        ("user", "text", False),
        ("assistant", "text", False),
        ("assistant", "tool_call", False),
        ("user", "tool_result", False),
        ("assistant", "text", True),
    ]


# --- OpenAI Chat Completions --------------------------------------------------------------


def _chat(*tail: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "model": "gpt-4.1",
        "messages": [
            {"role": "system", "content": "You are Forge."},
            {"role": "user", "content": "What is in app.py?"},
            {
                "role": "assistant",
                "content": "Let me read it.",
                "tool_calls": [
                    {
                        "id": "t1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": "{}"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "t1", "content": "ok"},
            {"role": "assistant", "content": "It defines add()."},
            *tail,
        ],
        "max_completion_tokens": 512,
        "tools": [{"type": "function", "function": {"name": "read_file", "parameters": {}}}],
        "prompt_cache_key": "ses_1",
        "stream": True,
        **extra,
    }


def _openai(body: dict[str, Any]) -> WireRequest:
    return WireRequest(body, {"x-stainless-timeout": "600"}, "ses_1", "openai")


def test_openai_choice_none_keeps_tools_and_history_and_changes_only_the_choice() -> None:
    step = _chat({"role": "user", "content": "Recap."})
    generate = _chat({"role": "user", "content": "Recap."}, tool_choice="none")
    assert _rows(_openai(step), _openai(generate)) == [
        ("tool_choice", "violation", "changes the tool choice")
    ]
    view = _openai(generate).view()
    assert (view.tools, view.tool_choice) == (1, "none")


def test_openai_the_system_messages_are_the_system_prompt_and_the_key_a_setting() -> None:
    step = _chat({"role": "user", "content": "Recap."})
    generate = _chat({"role": "user", "content": "Recap."}, prompt_cache_key="other")
    generate["messages"][0] = {"role": "system", "content": "You are someone else."}
    assert _rows(_openai(step), _openai(generate)) == [
        ("prompt_cache_key", "violation", "changes the prompt-cache key"),
        ("messages[system]", "violation", "changes the system prompt"),
    ]


def test_openai_warming_differs_in_output_limit_streaming_and_transport_headers() -> None:
    step = _chat({"role": "user", "content": "Ping."})
    generate = _chat({"role": "user", "content": "Ping."}, max_completion_tokens=1)
    del generate["stream"]
    headers = WireRequest(generate, {"x-stainless-timeout": "5"}, "ses_1", "openai")
    assert _rows(_openai(step), headers) == [
        ("max_completion_tokens", "allowed", "output limit (warming sends 0)"),
        ("stream", "allowed", "transport (warming is unstreamed)"),
        ("headers.x-stainless-timeout", "allowed", "transport header"),
    ]


def test_openai_a_tool_message_is_history_not_a_transient_message() -> None:
    step = _chat({"role": "user", "content": "Recap."})
    generate = _chat({"role": "tool", "tool_call_id": "t1", "content": "again"})
    report = diff(_openai(step), _openai(generate))
    assert [(d.path, d.reason) for d in report.violations] == [
        ("messages[5]", "history differs (generate has a user tool_result block)")
    ]


# --- Gemini generateContent (REST JSON) ---------------------------------------------------


def _gemini_body(*tail: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "contents": [
            {"role": "user", "parts": [{"text": "What is in app.py?"}]},
            {
                "role": "model",
                "parts": [
                    {"text": "Let me read it."},
                    {"functionCall": {"id": "t1", "name": "read_file", "args": {}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "id": "t1",
                            "name": "read_file",
                            "response": {"output": "ok"},
                        }
                    }
                ],
            },
            *tail,
        ],
        "systemInstruction": {"parts": [{"text": "You are Forge."}]},
        "tools": [{"functionDeclarations": [{"name": "read_file"}]}],
        "generationConfig": {"maxOutputTokens": 512, "temperature": 0},
        **extra,
    }


def _gemini(body: dict[str, Any], path: str = "/v1beta/models/g:streamGenerateContent") -> Any:
    return WireRequest(body, {}, None, "gemini", path)


def test_gemini_none_keeps_declarations_and_history() -> None:
    prompt = {"role": "user", "parts": [{"text": "Recap."}]}
    none = {"functionCallingConfig": {"mode": "NONE"}}
    step, generate = _gemini_body(prompt), _gemini_body(prompt, toolConfig=none)
    assert _rows(_gemini(step), _gemini(generate)) == [
        ("toolConfig", "violation", "changes the tool choice")
    ]
    assert (_gemini(generate).view().tools, _gemini(generate).view().tool_choice) == (1, "NONE")


def test_gemini_the_output_limit_is_allowed_but_the_rest_of_the_config_is_not() -> None:
    prompt = {"role": "user", "parts": [{"text": "Ping."}]}
    step = _gemini_body(prompt)
    generate = _gemini_body(prompt, generationConfig={"maxOutputTokens": 1, "temperature": 1})
    rows = _rows(_gemini(step), _gemini(generate, "/v1beta/models/g:generateContent"))
    assert rows == [
        ("path", "allowed", "transport (warming is unstreamed)"),
        ("generationConfig", "violation", "changes the generation settings"),
        ("generationConfig.maxOutputTokens", "allowed", "output limit (warming sends 0)"),
    ]


def test_gemini_a_changed_function_response_is_a_history_violation() -> None:
    prompt = {"role": "user", "parts": [{"text": "Recap."}]}
    step, generate = _gemini_body(prompt), _gemini_body(prompt)
    generate["contents"][2]["parts"][0]["functionResponse"]["response"] = {"output": "changed"}
    rows = _rows(_gemini(step), _gemini(generate))
    assert [v for _, v, _ in rows].count("violation") >= 1
    assert rows[0][2] == "history differs (step has a user tool_result block)"


# --- across providers ---------------------------------------------------------------------


def test_two_providers_bodies_are_not_compared() -> None:
    with pytest.raises(ValueError, match="cannot compare a bedrock body with a openai one"):
        diff(_bedrock(_converse()), _openai(_chat()))


def test_an_unknown_provider_is_named() -> None:
    with pytest.raises(ValueError, match="provider must be one of .*, got 'mistral'"):
        WireRequest({}, {}, None, "mistral").view()


def test_gemini_a_thought_part_is_reasoning_not_text() -> None:
    """A model part with `thought: true` is a thought summary, read as reasoning: were it
    text, a trailing one would pass for the transient prompt's kind."""
    prompt = {"role": "user", "parts": [{"text": "Recap."}]}
    thought = {"role": "model", "parts": [{"text": "Thinking it over.", "thought": True}]}
    view = _gemini(_gemini_body(prompt, thought)).view()
    assert [(b.role, b.kind) for b in view.blocks][-2:] == [
        ("user", "text"),
        ("assistant", "reasoning"),
    ]


def test_gemini_the_query_of_a_streamed_path_is_transport() -> None:
    """The SDK streams from `:streamGenerateContent?alt=sse`; the unstreamed warming call's
    `:generateContent` is the same endpoint, and another model's is not."""
    prompt = {"role": "user", "parts": [{"text": "Ping."}]}
    streamed = _gemini(_gemini_body(prompt), "/v1beta/models/g:streamGenerateContent?alt=sse")
    assert _rows(streamed, _gemini(_gemini_body(prompt), "/v1beta/models/g:generateContent")) == [
        ("path", "allowed", "transport (warming is unstreamed)")
    ]
    other = _gemini(_gemini_body(prompt), "/v1beta/models/h:generateContent?alt=sse")
    assert _rows(streamed, other) == [("path", "violation", "changes the endpoint")]


def test_two_providers_bodies_are_not_compared_in_either_order() -> None:
    with pytest.raises(ValueError, match="cannot compare a openai body with a bedrock one"):
        diff(_openai(_chat()), _bedrock(_converse()))
