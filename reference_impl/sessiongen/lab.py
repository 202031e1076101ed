"""The lab: an engine wired to an in-process emulator through the official SDK (Anthropic's,
or Bedrock's, OpenAI's or Gemini's with `provider=`), with the emulator's admin API at hand,
for notebooks, tests and benchmarks.

Everything runs on the emulator's virtual clock and deterministic responder, so a notebook
that drives a lab reproduces its outputs exactly.

The helpers that touch only the in-process emulator (`advance_by`, `requests`, `last_usage`,
`script`, `faults`) are plain methods, not coroutines: a forgotten `await` would otherwise
drop the call silently, and a TTL experiment would read a cache it should have missed.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, ExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2

from ._choices import PROVIDERS as PROVIDERS
from ._choices import Provider as Provider
from .emulator import EmulatorState, FaultSpec, ScriptedResponse, create_app
from .emulator.client import EMULATOR_BASE_URL, asgi_http, inprocess_llm
from .llm.client import LLMClient
from .llm.types import Usage
from .model import Agent, ModelRef
from .providers import PROVIDERS as REGISTRY
from .sample import SAMPLE_AGENT, SAMPLE_WORKSPACE
from .session.breakpoints import DEFAULT_CACHE_POLICY, CachePolicy
from .session.engine import SessionEngine
from .session.request import RequestHook
from .session.store import SessionStore
from .tools import ToolRegistry

BASE_URL = EMULATOR_BASE_URL
"""The emulator's base URL in a lab (the one every in-process client uses)."""


PROVIDER_MODELS: Mapping[str, str] = REGISTRY.column("lab_model")
"""The catalogued model each provider's lab points the sample agent at (a live view of the
provider table, `sessiongen.providers.PROVIDERS`)."""

SDKS: Mapping[str, str] = REGISTRY.column("sdk_label")
"""The official SDK each provider's lab talks through."""


def logged_usage(logged: Mapping[str, Any]) -> Usage:
    """One logged emulator request's usage, read in the shape of the provider it came in on
    (the log's `provider`; Anthropic when absent) as the one `Usage`. A failed request is
    logged without usage: it counts as no tokens at all."""
    return REGISTRY[logged.get("provider") or "anthropic"].usage(logged.get("usage") or {})


@dataclass
class EmulatorLab:
    """An engine on the emulator. `emulator` is the in-process emulator's state, which the
    helper methods read and change directly; `admin` talks to the same emulator's
    `/_emulator` HTTP endpoints for callers that want the admin API itself."""

    engine: SessionEngine
    admin: httpx2.AsyncClient
    llm: LLMClient
    workspace: Path
    emulator: EmulatorState
    provider: str = "anthropic"

    def requests(self) -> list[dict[str, Any]]:
        """Every request the emulator received, in order (copies)."""
        return self.emulator.requests()

    def last_usage(self) -> Usage:
        return logged_usage(self.requests()[-1])

    def script(self, *responses: dict[str, Any]) -> None:
        """Queue the next replies; validated as `POST /_emulator/script` validates them."""
        self.emulator.queue_responses([ScriptedResponse.model_validate(r) for r in responses])

    def faults(self, **fault: Any) -> None:
        """Queue a fault, as `POST /_emulator/faults` does (the same name, the same
        validation): `lab.faults(status=529)` fails the next request with an overload."""
        self.emulator.add_fault(FaultSpec.model_validate(fault))

    def advance_by(self, seconds: float) -> float:
        """A pause: move the virtual clock forward by `seconds` (>= 0); returns the new time."""
        return self.emulator.clock.advance(seconds)

    def rebuild(
        self,
        *,
        agents: Sequence[Agent] | None = None,
        llm: LLMClient | None = None,
        hooks: Sequence[RequestHook] = (),
        tools: ToolRegistry | None = None,
        cache_policy: CachePolicy = DEFAULT_CACHE_POLICY,
    ) -> SessionEngine:
        """Another engine over the same store, e.g. with hooks or a wrapped client."""
        return SessionEngine(
            self.engine.store,
            llm or self.llm,
            list(agents or self.engine.agents.values()),
            hooks=hooks,
            tools=tools,
            cache_policy=cache_policy,
        )


def write_workspace(root: Path, files: dict[str, str] = SAMPLE_WORKSPACE) -> Path:
    """Write `files` under `root`, replacing any file of the same name (see `emulator_lab`
    for the guarded version)."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def _claim_workspace(workspace: Path) -> Path:
    """Create `workspace` if missing; refuse one that holds anything, so the sample files
    never replace a file the lab did not create."""
    if workspace.exists() and (not workspace.is_dir() or any(workspace.iterdir())):
        raise FileExistsError(
            f"lab workspace {str(workspace)!r} already exists and is not an empty directory; "
            "the lab will not overwrite it (pass a new or empty directory, or none for a "
            "temporary one)"
        )
    workspace.mkdir(parents=True, exist_ok=True)
    return workspace


def _repoint(agents: Iterable[Agent], provider: str) -> list[Agent]:
    """`agents`, with each one on the sample agent's (Anthropic) model moved to the
    provider's catalogued model: that model id means nothing to another provider's API."""
    model = ModelRef(id=PROVIDER_MODELS[provider])
    return [
        a.model_copy(update={"model": model}) if a.model == SAMPLE_AGENT.model else a
        for a in agents
    ]


@asynccontextmanager
async def emulator_lab(
    workspace: str | Path | None = None,
    *,
    agents: Iterable[Agent] = (SAMPLE_AGENT,),
    database: str | Path = ":memory:",
    max_retries: int = 0,
    provider: str = "anthropic",
) -> AsyncIterator[EmulatorLab]:
    """A lab over a fresh in-process emulator and store, with the sample files in a workspace.

    Without `workspace`, the workspace is a temporary directory, removed on exit. With one,
    it must not exist yet or be an empty directory: the lab creates it, writes the sample
    files and leaves them there on exit. Anything else (a file, or a directory with
    anything in it) raises `FileExistsError` before anything is written, because the lab
    never overwrites files it did not create, and a directory without the sample files
    would make the sample agent's answers meaningless.

    `provider` picks the API and official SDK the engine talks through (`PROVIDERS`), all
    on the same emulator state: agents on the sample agent's model move to that provider's
    model in `PROVIDER_MODELS`. Bedrock's boto3 client is synchronous, so it reaches the
    emulator over a loopback `BackgroundServer`, stopped on exit (`inprocess_llm` builds
    each). `max_retries` is the adapter's, for every provider (`ProviderAdapter`).
    """
    REGISTRY[provider]  # an unknown one: `UnknownProvider`, before anything is made
    with ExitStack() as cleanup:
        if workspace is None:
            temporary = tempfile.TemporaryDirectory(prefix="sessiongen-lab-")
            root = Path(cleanup.enter_context(temporary))
        else:
            root = _claim_workspace(Path(workspace))
        write_workspace(root)
        state = EmulatorState()
        async with (
            asgi_http(create_app(state)) as admin,
            AsyncExitStack() as clients,
        ):
            llm = await clients.enter_async_context(
                inprocess_llm(provider, state, max_retries=max_retries, api_key="lab")
            )
            store = SessionStore(database)
            try:
                engine = SessionEngine(store, llm, _repoint(agents, provider))
                yield EmulatorLab(engine, admin, llm, root, state, provider)
            finally:
                store.close()
