"""The provider's API key never reaches a response body or a log line, whatever fails; and
masking it never mangles text (issue 28, part 7: a key of "x" turned "unexpected" into
"une[redacted]pected")."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx2
import pytest
from sessiongen.emulator import create_app as create_emulator_app
from sessiongen.lab import EmulatorLab
from sessiongen.providers.anthropic.adapter import AnthropicLLMClient
from sessiongen.server import create_app
from sessiongen.server.problems import ANYWHERE_CHARS, MIN_SECRET_CHARS, REDACTED, Redactor

from ..reliability._figures import record
from .conftest import TOOL_TURN, asgi_client

FAKE_KEY = "sk-ant-api03-FAKEKEY-7c1d0e5b9a2f4e6d8c0b1a3f5e7d9c1b"


@pytest.mark.clause("SG-HTTP-3")
async def test_the_api_key_appears_in_no_response_and_no_log(
    lab: EmulatorLab, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    transport = httpx2.ASGITransport(app=create_emulator_app(lab.emulator))

    def leaky_hook(request: Any, info: Any) -> Any:
        if info.tag == "explode":
            raise RuntimeError(f"a bug that formats the key: {FAKE_KEY}")
        return request

    async with AnthropicLLMClient(
        api_key=FAKE_KEY,
        http_client=httpx2.AsyncClient(transport=transport, base_url="http://emulator"),
        max_retries=0,
    ) as llm:
        app = create_app(lab.rebuild(llm=llm, hooks=[leaky_hook]), workspace=lab.workspace)
        bodies: list[str] = []
        async with asgi_client(app) as client:

            async def call(method: str, path: str, **kwargs: Any) -> int:
                response = await client.request(method, path, **kwargs)
                bodies.append(response.text)
                bodies.extend(f"{k}: {v}" for k, v in response.headers.items())
                return response.status_code

            assert await call("POST", "/api/session") == 201
            sid = "ses_000001"
            lab.script(*TOOL_TURN)
            assert await call("POST", f"/api/session/{sid}/prompt", json={"prompt": "Look"}) == 200
            assert await call("POST", f"/api/session/{sid}/generate", json={"prompt": "Hi"}) == 200
            # Provider failures, one of them echoing the key in its message.
            for fault in (
                {"status": 401},
                {"status": 529},
                {"status": 400, "message": f"invalid x-api-key: {FAKE_KEY}"},
                {"cut_after_events": 2},
            ):
                lab.faults(**fault)
                assert (
                    await call("POST", f"/api/session/{sid}/generate", json={"prompt": "Hi"}) >= 500
                )
            lab.faults(status=400, message=f"turn rejected for {FAKE_KEY}")
            assert await call("POST", f"/api/session/{sid}/prompt", json={"prompt": "x"}) == 502
            generate = {"prompt": "Hi", "tag": "explode"}
            assert await call("POST", f"/api/session/{sid}/generate", json=generate) == 500
            for path in ("", "/messages", "/warming"):
                assert await call("GET", f"/api/session/{sid}{path}") == 200
            assert await call("GET", "/openapi.json") == 200
            assert await call("POST", f"/api/session/{sid}/generate", content=b"{") == 422
    assert any("[redacted]" in body for body in bodies)  # the echo was there, scrubbed
    assert all(FAKE_KEY not in body for body in bodies)
    assert "a bug that formats the key" in caplog.text  # logged, scrubbed
    assert FAKE_KEY not in caplog.text
    assert all(FAKE_KEY not in str(entry) for entry in lab.requests())


# --- the redactor: whole secrets of a meaningful length ----------------------------------------

KEY_FORMS = {
    "alone": FAKE_KEY,
    "URL query": f"https://api.example.test/v1/messages?key={FAKE_KEY}&beta=1",
    "URL path": f"https://api.example.test/keys/{FAKE_KEY}/usage",
    "JSON": json.dumps({"api_key": FAKE_KEY, "n": 1}),
    "header": f"x-api-key: {FAKE_KEY}",
    "bearer": f"Authorization: Bearer {FAKE_KEY}",
    "percent-encoded space before": f"Bearer%20{FAKE_KEY}",
    "twice, glued": f"{FAKE_KEY}{FAKE_KEY}",
    "inside a word": f"prefix{FAKE_KEY}suffix",
    "quoted repr": repr({"key": FAKE_KEY}),
    "line of a traceback": f'  File "x.py", line 1\nValueError: bad key {FAKE_KEY}\n',
}
ORDINARY = (
    "an unexpected error; the server log has the details",
    "exit code 0x1 after 2 retries: connection reset by peer",
    "the prompt is empty",
)


@pytest.mark.parametrize("form", KEY_FORMS)
def test_a_real_key_is_masked_wherever_it_appears(form: str) -> None:
    text = KEY_FORMS[form]
    masked = Redactor([FAKE_KEY]).text(text)
    assert FAKE_KEY not in masked and REDACTED in masked
    assert masked.count(REDACTED) == text.count(FAKE_KEY)
    nested = Redactor([FAKE_KEY]).value({"detail": [text, {"deep": (text,)}]})
    assert FAKE_KEY not in json.dumps(nested)


def test_a_secret_shorter_than_the_minimum_is_never_masked() -> None:
    """Masking "x" mangles every word with an x in it and spells the secret out in the
    gaps; below `MIN_SECRET_CHARS` nothing is masked."""
    short = ["x", "e", "ab", "s3cret", "1234567"]
    assert all(len(s) < MIN_SECRET_CHARS for s in short)
    redactor = Redactor(short)
    for text in (*ORDINARY, "s3cret", "x=1234567"):
        assert redactor.text(text) == text


def test_a_shorter_secret_is_masked_only_as_a_whole_token() -> None:
    secret = "hunter22"  # the minimum length, below ANYWHERE_CHARS
    assert MIN_SECRET_CHARS <= len(secret) < ANYWHERE_CHARS
    redactor = Redactor([secret])
    assert redactor.text("password=hunter22&next=1") == "password=[redacted]&next=1"
    assert redactor.text('{"token": "hunter22"}') == '{"token": "[redacted]"}'
    assert redactor.text("Bearer hunter22") == "Bearer [redacted]"
    assert redactor.text("hunter22") == "[redacted]"
    for word in ("hunter221", "xhunter22", "Ahunter22B"):
        assert redactor.text(word) == word


def test_a_secret_containing_another_is_masked_whole_once() -> None:
    inner = "abcdefgh"
    outer = f"{FAKE_KEY}-{inner}"
    redactor = Redactor([inner, outer])
    assert redactor.text(f"key {outer} and {inner}") == "key [redacted] and [redacted]"


async def test_a_one_letter_api_key_leaves_the_servers_answers_intact(
    lab: EmulatorLab, caplog: pytest.LogCaptureFixture
) -> None:
    """`ANTHROPIC_API_KEY=x`: a 500's detail reads as written, the log line too."""
    caplog.set_level(logging.ERROR)
    transport = httpx2.ASGITransport(app=create_emulator_app(lab.emulator))

    def failing_hook(request: Any, info: Any) -> Any:
        if info.tag == "explode":
            raise RuntimeError("an unexpected exit")
        return request

    async with AnthropicLLMClient(
        api_key="x",
        http_client=httpx2.AsyncClient(transport=transport, base_url="http://emulator"),
        max_retries=0,
    ) as llm:
        app = create_app(lab.rebuild(llm=llm, hooks=[failing_hook]), workspace=lab.workspace)
        async with asgi_client(app) as client:
            assert (await client.post("/api/session")).status_code == 201
            answer = await client.post(
                "/api/session/ses_000001/generate", json={"prompt": "Hi", "tag": "explode"}
            )
    assert answer.status_code == 500
    assert answer.json()["detail"] == "an unexpected error; the server log has the details"
    assert "RuntimeError: an unexpected exit" in caplog.text
    assert REDACTED not in caplog.text
    record(
        "hostile",
        {
            "redactor": {
                "shortest secret masked (chars)": MIN_SECRET_CHARS,
                "masked anywhere from (chars)": ANYWHERE_CHARS,
                "forms of a real key masked": len(KEY_FORMS),
                "key bytes left in them": 0,
                "answers mangled by a 1-character key": 0,
            }
        },
    )
