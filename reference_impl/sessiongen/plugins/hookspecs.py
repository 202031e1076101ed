"""The hook specifications of a sessiongen plugin (pluggy project name `sessiongen`).

A plugin is any object (a module, an instance) with functions marked `@hookimpl` and named
after a spec below; it may take any subset of the spec's arguments, by name. Three hooks:

- `sessiongen_request`: the request hook. It runs inside request preparation for every
  Step, generate and compaction (SG-HOOK-1), so it must be quick and must not block;
- `sessiongen_startup`: once, when the host starts the plugins; keep `ctx` to call
  `ctx.session.generate(...)` later;
- `sessiongen_turn_settled`: after each durable turn of the host's engine. The engine calls
  each of its `turn_listeners` when `engine.run(...)` ends; `create_app` adds the host's
  `turn_settled`, and code that drives `SessionEngine` itself adds it once:
  `engine.turn_listeners.append(host.turn_settled)`.

Wrappers (`@hookimpl(wrapper=True)`) are not supported on these hooks: the host calls the
request hooks as a chain and the turn hooks one by one (see `manager`), not through
pluggy's own multicall.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

from ..llm.types import LLMRequest
from ..session.request import RequestInfo

if TYPE_CHECKING:
    from .context import PluginContext

PROJECT = "sessiongen"
"""The pluggy project name, and the entry-point group third-party plugins register under."""

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def sessiongen_request(request: LLMRequest, info: RequestInfo) -> LLMRequest | None:
    """Transform the request about to be sent, or return None to leave it as it is.

    `request` is the final request (tools policy and warming shape applied; cache
    breakpoints are placed after the hooks), and `info` says which one it is: its
    `operation` (`step`, `generate`, `compaction`), the caller's `tag`, and `warming` for a
    keep-alive ping. Recognise a ping by `info.warming`, never by the prompt text: a caller
    may send the keep-alive text as an ordinary generate.

    The implementations run as a chain in registration order (`tryfirst` ones first,
    `trylast` ones last): each sees the request the previous one returned, and the last
    one's reaches the wire.
    """


@hookspec(historic=True)
def sessiongen_startup(ctx: PluginContext) -> None:
    """The host started: `ctx` is this host's narrow view of the engine (`ctx.session`,
    `ctx.clock`). Historic: a plugin registered after the start is called at once."""


@hookspec
def sessiongen_turn_settled(ctx: PluginContext, session_id: str, revision: int) -> None:
    """A durable turn of `session_id` ended (settled, or failed and left as the store has
    it) and the session is at `revision`. A failing implementation is reported and skipped;
    the turn, already durable, is not failed by it."""
