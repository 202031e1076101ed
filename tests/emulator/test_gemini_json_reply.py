"""An unscripted Gemini request that asks for JSON gets JSON its schema accepts (Gemini CLI's
model router parses that reply; an echo made it retry five times per prompt), over HTTP."""

from __future__ import annotations

import json

import httpx
from sessiongen.emulator import BackgroundServer
from sessiongen.emulator.responder import schema_instance

ROUTER_SCHEMA = {  # as Gemini CLI 0.61.0 sends it (a recorded request, 2026-12-05)
    "type": "OBJECT",
    "properties": {
        "complexity_reasoning": {"type": "STRING", "description": "Brief explanation."},
        "complexity_score": {"type": "INTEGER", "description": "Complexity score from 1-100."},
    },
    "required": ["complexity_reasoning", "complexity_score"],
}


def test_a_json_request_gets_the_smallest_conforming_json() -> None:
    body = {
        "contents": [{"role": "user", "parts": [{"text": "route this prompt"}]}],
        "generationConfig": {
            "responseMimeType": "application/json",
            "responseJsonSchema": ROUTER_SCHEMA,
        },
    }
    with BackgroundServer() as server:
        answer = httpx.post(
            f"{server.url}/v1beta/models/gemini-3.5-flash-lite:generateContent",
            json=body,
            headers={"x-goog-api-key": "k"},
            timeout=30,
        )
        plain = httpx.post(
            f"{server.url}/v1beta/models/gemini-3.5-flash-lite:generateContent",
            json={"contents": body["contents"]},
            headers={"x-goog-api-key": "k"},
            timeout=30,
        )
    assert answer.status_code == 200, answer.text
    text = answer.json()["candidates"][0]["content"]["parts"][0]["text"]
    assert json.loads(text) == {"complexity_reasoning": "", "complexity_score": 0}
    echo = plain.json()["candidates"][0]["content"]["parts"][0]["text"]
    assert echo.startswith("Emulated reply to:")


def test_the_instance_takes_enums_minimums_and_first_branches() -> None:
    schema = {
        "type": "object",
        "properties": {
            "verdict": {"enum": ["allow", "deny"]},
            "score": {"type": "integer", "minimum": 1},
            "tags": {"type": "array", "items": {"type": "string", "minLength": 2}, "minItems": 1},
            "either": {"anyOf": [{"type": "boolean"}, {"type": "string"}]},
            "optional": {"type": "string"},
        },
        "required": ["verdict", "score", "tags", "either"],
    }
    assert schema_instance(schema) == {
        "verdict": "allow",
        "score": 1,
        "tags": ["xx"],
        "either": False,
    }
