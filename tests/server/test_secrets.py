"""The provider's API key never reaches a response body or a log line, whatever fails."""

from __future__ import annotations

import logging
from typing import Any

import httpx2
import pytest
from sessiongen.emulator import create_app as create_emulator_app
from sessiongen.lab import EmulatorLab
from sessiongen.llm.anthropic import AnthropicLLMClient
from sessiongen.server import create_app

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
                lab.fault(**fault)
                assert (
                    await call("POST", f"/api/session/{sid}/generate", json={"prompt": "Hi"}) >= 500
                )
            lab.fault(status=400, message=f"turn rejected for {FAKE_KEY}")
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
