"""Issue 30: a provider is one folder. Every built-in provider's folder holds the same parts,
and a fifth provider, written here as a folder in a temporary directory and registered in the
one table, is counted by the engine, served by the emulator, driven by the lab and the demo,
read by parity and driven by the probe, with no module of sessiongen edited."""

from __future__ import annotations

import importlib
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from sessiongen._demo import run_demo
from sessiongen._probe import Prompt, make_driver
from sessiongen.agents.wire import read_call
from sessiongen.catalog import ModelInfo, added_model
from sessiongen.emulator import BackgroundServer, EmulatorState
from sessiongen.emulator.client import inprocess_llm
from sessiongen.lab import PROVIDER_MODELS, SDKS, logged_usage
from sessiongen.llm.types import LLMMessage, LLMRequest, SystemPart, TextContent, Usage
from sessiongen.parity import WireRequest
from sessiongen.providers import PARTS, PROVIDERS, count_request_tokens
from sessiongen.session.counting import RequestCounter

FOLDER = ("__init__.py", "wire.py", "counting.py", *(f"{part}.py" for part in PARTS))
"""The files a provider's folder holds: its record, its lowering and usage reader, its token
counter, and its parts found by name (SDK adapter, emulator routes, probe driver)."""


EMULATOR_PART = (
    "PATH_PREFIXES",
    "router",
    "connect",
    "logged_blocks",
    "logged_model",
    "logged_tool_names",
    "logged_texts",
)
"""What a provider's emulator part defines: its routes, its adapter on the emulator, and how
its logged requests read (the agents' reports)."""
PROBE_PART = ("driver", "sdk_client", "model_id")


def test_each_provider_is_one_folder_of_the_same_parts() -> None:
    for provider in PROVIDERS:
        module = sys.modules[provider.package]
        folder = Path(str(module.__file__)).parent
        assert sorted(p.name for p in folder.glob("*.py")) == sorted(FOLDER), provider.name
        emulator, probe = provider.part("emulator"), provider.part("probe")
        for name in EMULATOR_PART:
            assert hasattr(emulator, name), (provider.name, name)
        for name in PROBE_PART:
            assert hasattr(probe, name), (provider.name, name)


def test_the_command_line_names_are_the_tables() -> None:
    """The CLI lists the built-in names without importing the providers (`_choices`)."""
    from sessiongen._choices import PROVIDERS as NAMES

    assert set(NAMES) == set(PROVIDERS.names())


ACME = {
    "__init__.py": """
        from sessiongen.providers import Provider

        from . import wire
        from .counting import count_request

        PROVIDER = Provider(
            name="acme",
            package=__name__,
            sdk="httpx2",
            sdk_label="httpx2 (acme)",
            key_env=("ACME_API_KEY",),
            lab_model="acme-1",
            cache_note="\\nAcme caches nothing.",
            lower=wire.lower_request,
            count=count_request,
            usage=wire.usage_from_acme,
            view=wire.wire_view,
        )
    """,
    "wire.py": """
        from sessiongen.llm.types import LLMRequest, Usage
        from sessiongen.llm.wire_view import WireBlock, WireView


        def _text(message):
            return "".join(getattr(block, "text", "") for block in message.content)


        def lower_request(request: LLMRequest) -> dict:
            return {
                "model": request.model,
                "system": "".join(part.text for part in request.system),
                "turns": [{"role": m.role, "text": _text(m)} for m in request.messages],
                "limit": request.max_output_tokens,
            }


        def usage_from_acme(usage) -> Usage:
            return Usage(input_tokens=usage["prompt"], output_tokens=usage["completion"])


        def wire_view(body) -> WireView:
            blocks = tuple(
                WireBlock(turn["role"], f"turns[{i}]", "text", {"text": turn["text"]})
                for i, turn in enumerate(body["turns"])
            )
            settings = {"model": body["model"], "system": body["system"], "limit": body["limit"]}
            return WireView(settings, blocks, "limit", {"system": "system prompt"}, 0, "none")
    """,
    "counting.py": """
        from sessiongen.tokens import count_text_tokens

        from . import wire

        TURN = 3  # Acme's framing per turn


        def count_body(body) -> int:
            turns = body["turns"]
            return count_text_tokens(body["system"]) + sum(
                TURN + count_text_tokens(t["text"]) for t in turns
            )


        def count_request(request) -> int:
            return count_body(wire.lower_request(request))
    """,
    "adapter.py": """
        import httpx2
        from sessiongen.llm._adapter import ProviderAdapter
        from sessiongen.llm.types import FinishEvent, TextDelta, UsageEvent

        from .wire import lower_request, usage_from_acme


        class AcmeClient(ProviderAdapter):
            provider = "acme"

            def __init__(self, http: httpx2.AsyncClient, max_retries: int = 0) -> None:
                super().__init__(max_retries=max_retries)
                self._http = http

            async def _attempt(self, request):
                answer = await self._http.post("/acme/v1/complete", json=lower_request(request))
                answer.raise_for_status()
                reply = answer.json()
                yield TextDelta(text=reply["text"])
                yield UsageEvent(usage=usage_from_acme(reply["usage"]))
                yield FinishEvent(reason="end_turn", model=request.model)

            def _read_failure(self, err):
                return None

            async def aclose(self) -> None:
                await self._http.aclose()
    """,
    "emulator.py": """
        from fastapi import APIRouter, Request
        from fastapi.responses import JSONResponse
        from sessiongen.emulator.client import asgi_http
        from sessiongen.emulator.intake import Arrival

        from .adapter import AcmeClient
        from .counting import count_body

        PATH_PREFIXES = ("/acme/",)


        def router(state):
            routes = APIRouter()

            @routes.post("/acme/v1/complete")
            async def complete(request: Request):
                arrival = await Arrival.read(state, request, provider="acme")
                await arrival.admit()
                usage = {"prompt": count_body(arrival.body), "completion": 2}
                arrival.record(200, usage)
                return JSONResponse({"text": "Acme says hi.", "usage": usage})

            return routes


        def logged_blocks(body, path, model):
            return []


        def logged_model(path, body):
            return body["model"]


        def logged_tool_names(body):
            return []


        def logged_texts(body):
            return body["system"], body["turns"][-1]["text"] if body["turns"] else ""


        async def connect(app, state, stack, *, base_url, api_key, max_retries):
            return AcmeClient(asgi_http(app, base_url), max_retries=max_retries)
    """,
    "probe.py": """
        from sessiongen.llm.types import Usage

        from .wire import usage_from_acme


        class Driver:
            def __init__(self, client, base_url):
                self._client, self._url = client, f"{base_url}/acme/v1/complete"

            def send(self, prompt) -> Usage:
                turns = [{"role": "user", "text": t} for t in prompt.turns]
                body = {"model": prompt.model, "system": prompt.system, "turns": turns}
                answer = self._client.post(self._url, json=body).json()
                return usage_from_acme(answer["usage"])

            def count(self, prompt):
                return None

            def close(self):
                self._client.close()


        def sdk_client(guard, base_url, **credentials):
            return guard.http_client()


        def driver(base_url, api_key, *, emulator, guard):
            return Driver(sdk_client(guard, base_url), base_url)


        def model_id(model):
            return model
    """,
}

ACME_1 = ModelInfo(
    id="acme-1",
    display_name="Acme 1",
    aliases=(),
    min_cacheable_tokens=1024,
    context_window=200_000,
    max_output_tokens=8192,
    prefill_allowed=False,
    unconfirmed=(),
    provider="acme",
)


@pytest.fixture
def acme(tmp_path: Path) -> Iterator[ModuleType]:
    """The Acme provider's folder, written under `tmp_path`, imported and registered, with
    its model catalogued; all of it undone on exit."""
    folder = tmp_path / "acme_provider"
    folder.mkdir()
    for name, text in ACME.items():
        (folder / name).write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    assert sorted(p.name for p in folder.iterdir()) == sorted(FOLDER)
    sys.path.insert(0, str(tmp_path))
    try:
        acme_provider = importlib.import_module("acme_provider")
        PROVIDERS.register(acme_provider.PROVIDER)
        with added_model(ACME_1):
            yield acme_provider
    finally:
        PROVIDERS.unregister("acme")
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.split(".")[0] == "acme_provider"]:
            del sys.modules[name]


def _request() -> LLMRequest:
    hello = LLMMessage(role="user", content=(TextContent(text="Hello, Acme. " * 20),))
    return LLMRequest(model="acme-1", system=(SystemPart(text="Be brief."),), messages=(hello,))


async def test_a_fifth_provider_is_counted_served_and_driven(acme: ModuleType) -> None:
    request = _request()
    expected = acme.counting.count_request(request)
    # The engine's count (the overflow check's, the budget's) is the provider's own.
    assert count_request_tokens(request) == expected == RequestCounter().count(request)
    # The emulator serves its routes; its adapter reaches them through the table.
    state = EmulatorState()
    async with inprocess_llm("acme", state) as llm:
        response = await llm.generate(request)
    assert response.text == "Acme says hi." and response.usage.input_tokens == expected
    (logged,) = state.requests()
    assert logged["provider"] == "acme" and logged["path"] == "/acme/v1/complete"
    assert logged["usage"] == {"prompt": expected, "completion": 2}
    # The agents' reports read its logged requests.
    call = read_call(logged)
    assert call.model == "acme-1" and call.usage.input_tokens == expected
    assert call.texts() == ("Be brief.", "Hello, Acme. " * 20) and call.tool_names() == []
    # Parity reads its body layout.
    view = WireRequest(acme.wire.lower_request(request), {}, None, "acme").view()
    assert view.settings["system"] == "Be brief." and len(view.blocks) == 1


async def test_the_lab_and_the_demo_run_on_a_fifth_provider(acme: ModuleType) -> None:
    assert PROVIDER_MODELS["acme"] == "acme-1" and SDKS["acme"] == "httpx2 (acme)"
    rows = await run_demo(provider="acme")
    assert [row.operation for row in rows][-1] == "generate" and len(rows) >= 4
    assert all(row.usage.output_tokens == 2 and row.usage.input_tokens > 0 for row in rows)
    assert logged_usage({"provider": "acme", "usage": {"prompt": 7, "completion": 1}}) == (
        Usage(input_tokens=7, output_tokens=1)
    )


def test_the_probe_drives_a_fifth_provider(acme: ModuleType) -> None:
    state = EmulatorState()
    with BackgroundServer(state) as server:
        driver = make_driver("acme", server.url, None, emulator=True)
        try:
            prompt = Prompt("acme-1", "Be brief.", ("Hello",), "default", ping=False, anchor=0)
            usage = driver.send(prompt)
        finally:
            driver.close()
    assert usage.input_tokens == count_request_tokens(
        LLMRequest(
            model="acme-1",
            system=(SystemPart(text="Be brief."),),
            messages=(LLMMessage(role="user", content=(TextContent(text="Hello"),)),),
        )
    )


def test_an_unknown_provider_is_named_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="provider must be one of anthropic, bedrock"):
        PROVIDERS["acme"]


def test_a_model_the_catalog_does_not_know_is_counted_as_anthropic_counts() -> None:
    """A scripted test double's model id: the Messages wire, the engine's reference."""
    from sessiongen.providers import provider_of
    from sessiongen.providers.anthropic import count_request

    request = _request().model_copy(update={"model": "scripted-model"})
    assert provider_of("scripted-model").name == "anthropic"
    assert count_request_tokens(request) == count_request(request)
