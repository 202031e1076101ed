"""Loading plugins and hosting them over one engine.

`load_plugins()` builds a pluggy `PluginManager`: the built-ins first, each registered by
name through `pm.register` exactly as a third-party plugin is (simonw/llm's
`default_plugins` pattern, so a built-in has no side door into the host), then every
installed distribution's entry point in the `sessiongen` group.

`PluginHost(engine, pm, clock)` is what a host (the server, a script) keeps: the
`PluginContext` it hands to plugins, `startup()`, `turn_settled(...)`, and `request_hook`,
the `RequestHook` that runs the plugins' `sessiongen_request` chain inside the engine's
request preparation. The engine must be built with that hook, before the host exists:

    pm = load_plugins()
    engine = SessionEngine(store, llm, agents, hooks=[request_hook(pm)])
    host = PluginHost(engine, pm, clock)
    host.startup()
    engine.turn_listeners.append(host.turn_settled)  # told when each engine.run ends
    ...
    await engine.run(session_id, text)
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pluggy

from ..llm.types import LLMRequest
from ..session.engine import SessionEngine
from ..session.request import RequestInfo
from ..warming.keeper import Clock, MonotonicClock
from . import hookspecs
from .context import PluginContext, SessionAccess

__all__ = [
    "BUILTIN_PLUGINS",
    "PluginErrorHandler",
    "PluginHost",
    "PluginRequestHook",
    "load_plugins",
    "log_plugin_error",
    "request_hook",
]

logger = logging.getLogger("sessiongen.plugins")

BUILTIN_PLUGINS: Mapping[str, str] = {
    "warming": "sessiongen.plugins.warming:plugin",
    "recap": "sessiongen.plugins.recap:plugin",
}
"""Built-in plugin name -> `module:factory`. Unlike an entry point (loaded once per process)
a built-in is made fresh for each `PluginManager`, because it keeps per-host state (the
keeper, the recaps): two apps in one process must not share a keeper."""

PluginErrorHandler = Callable[[str, str, Exception], None]
"""Told (plugin name, hook name, exception) when a `sessiongen_turn_settled` fails."""


def load_plugins(*, entry_points: bool = True, builtins: bool = True) -> pluggy.PluginManager:
    """A plugin manager with the sessiongen hook specs, the built-ins (`BUILTIN_PLUGINS`)
    and, with `entry_points`, every installed plugin of the `sessiongen` entry-point group.

    A built-in's name wins over an entry point of the same name (pluggy skips a name that
    is already registered). An entry point that fails to import or register raises
    `PluginLoadError`. Unknown hooks (a misspelled `sessiongen_*`) raise
    `pluggy.PluginValidationError` here instead of silently never running.
    """
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    if builtins:
        for name, target in BUILTIN_PLUGINS.items():
            module_name, _, factory = target.partition(":")
            pm.register(getattr(importlib.import_module(module_name), factory)(), name=name)
    if entry_points:
        try:
            pm.load_setuptools_entrypoints(hookspecs.PROJECT)
        except Exception as exc:  # an installed plugin's import or registration failed
            raise PluginLoadError(
                f"an installed plugin of entry-point group {hookspecs.PROJECT!r} failed to "
                f"load: {type(exc).__name__}: {exc}"
            ) from exc
    pm.check_pending()
    return pm


class PluginLoadError(RuntimeError):
    """An installed plugin could not be imported or registered: named, so `sessiongen serve`
    can say so in one line instead of a traceback."""


@dataclass(frozen=True, eq=False)
class PluginRequestHook:
    """The engine's `RequestHook` for the `sessiongen_request` implementations of `pm`.

    It reads the implementations on every call, so a plugin registered later takes part
    from its next request. Each returns a replacement `LLMRequest` or None (keep it).
    """

    pm: pluggy.PluginManager

    def __call__(self, request: LLMRequest, info: RequestInfo) -> LLMRequest:
        for impl in _in_order(self.pm.hook.sessiongen_request):
            returned = _call(impl, {"request": request, "info": info})
            if returned is None:
                continue
            if not isinstance(returned, LLMRequest):
                raise TypeError(
                    f"plugin {impl.plugin_name!r}: sessiongen_request must return an "
                    f"LLMRequest or None, not {type(returned).__name__}"
                )
            request = returned
        return request

    def __eq__(self, other: object) -> bool:
        """Equal to any adapter of the same manager, so a host can find its hook among the
        engine's."""
        return isinstance(other, PluginRequestHook) and other.pm is self.pm

    def __hash__(self) -> int:
        return id(self.pm)


def request_hook(pm: pluggy.PluginManager) -> PluginRequestHook:
    """The hook to build the engine with (`SessionEngine(..., hooks=[request_hook(pm)])`)."""
    return PluginRequestHook(pm)


class PluginHost:
    """The plugins of `pm` over `engine`, on `clock` (monotonic time when None).

    Raises `ValueError` when a plugin implements `sessiongen_request` but the engine was not
    built with `request_hook(pm)`: that plugin would otherwise never see a request.
    `on_error` is told about a failing `sessiongen_turn_settled`; the default,
    `log_plugin_error`, logs it with its traceback, and a host whose logs must be scrubbed
    (the server) replaces it.
    """

    def __init__(
        self,
        engine: SessionEngine,
        pm: pluggy.PluginManager,
        clock: Clock | None = None,
        *,
        on_error: PluginErrorHandler | None = None,
    ) -> None:
        pm.check_pending()
        self.engine = engine
        self.pm = pm
        self.clock: Clock = clock if clock is not None else MonotonicClock()
        self.context = PluginContext(session=SessionAccess(engine), clock=self.clock)
        self._request_hook = PluginRequestHook(pm)
        self.on_error: PluginErrorHandler = on_error or log_plugin_error
        self._started = False
        implemented = [i.plugin_name for i in pm.hook.sessiongen_request.get_hookimpls()]
        if implemented and self._request_hook not in engine.preparation.hooks:
            raise ValueError(
                f"plugins {', '.join(implemented)} implement sessiongen_request, but the "
                "engine was not built with this manager's hook: build it with "
                "SessionEngine(..., hooks=[request_hook(pm)])"
            )

    @property
    def request_hook(self) -> PluginRequestHook:
        """The `RequestHook` that runs this manager's `sessiongen_request` chain."""
        return self._request_hook

    @property
    def started(self) -> bool:
        return self._started

    def startup(self) -> None:
        """Call `sessiongen_startup(ctx)` once (later calls do nothing); plugins registered
        afterwards get it when they are registered. A failing plugin fails the start."""
        if self._started:
            return
        self._started = True
        self.pm.hook.sessiongen_startup.call_historic(kwargs={"ctx": self.context})

    def turn_settled(self, session_id: str, revision: int | None = None) -> None:
        """Tell every plugin that a durable turn of `session_id` ended at `revision` (the
        session's current revision when None), in registration order. Each is called even
        if one before it failed: the turn is durable already, so a plugin's failure is
        reported to `on_error`, never raised."""
        if revision is None:
            revision = self.context.session.revision(session_id)
        caller = self.pm.hook.sessiongen_turn_settled
        kwargs = {"ctx": self.context, "session_id": session_id, "revision": revision}
        for impl in _in_order(caller):
            try:
                _call(impl, kwargs)
            except Exception as exc:
                self.on_error(impl.plugin_name, caller.name, exc)

    def plugin(self, name: str) -> object | None:
        """The plugin registered under `name` (a built-in's is `"warming"`, `"recap"`)."""
        return self.pm.get_plugin(name)

    def names(self) -> list[str]:
        """The registered plugins' names, in registration order."""
        return [name for name, _ in self.pm.list_name_plugin() if name is not None]


def _in_order(caller: pluggy.HookCaller) -> list[pluggy.HookImpl]:
    """The implementations in registration order, `tryfirst` ones first and `trylast` ones
    last (pluggy itself calls them last-registered first, which suits a broadcast but not a
    chain that should read like `SessionEngine(hooks=[...])`)."""
    impls = caller.get_hookimpls()
    wrappers = [i.plugin_name for i in impls if i.wrapper or i.hookwrapper]
    if wrappers:
        raise TypeError(f"{caller.name} does not support wrappers (plugins {wrappers})")
    # pluggy keeps [trylast (newest first), plain (oldest first), tryfirst (oldest first)].
    first = [i for i in impls if i.tryfirst]
    plain = [i for i in impls if not (i.tryfirst or i.trylast)]
    last = [i for i in reversed(impls) if i.trylast]
    return [*first, *plain, *last]


def _call(impl: pluggy.HookImpl, kwargs: Mapping[str, object]) -> object:
    """One implementation with the arguments it asks for, as pluggy passes them."""
    args = [kwargs[name] for name in impl.argnames]
    extra = {name: kwargs[name] for name in impl.kwargnames if name in kwargs}
    return impl.function(*args, **extra)


def log_plugin_error(plugin: str, hook: str, exc: Exception) -> None:
    """The default `PluginHost.on_error`: log the failure with its traceback."""
    logger.error("plugin %r failed in %s", plugin, hook, exc_info=exc)
