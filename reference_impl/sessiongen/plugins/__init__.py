"""Plugins: request hooks, startup and turn hooks on pluggy, with a narrow engine context.

A plugin implements any of the hooks in `hookspecs` (`sessiongen_request`,
`sessiongen_startup`, `sessiongen_turn_settled`) with functions marked `@hookimpl`, and is
found through the `sessiongen` entry-point group of its distribution:

    [project.entry-points.sessiongen]
    my_plugin = "my_package.my_plugin"

`load_plugins()` registers the built-ins (`warming`: the warming keeper; `recap`:
one-sentence recaps) and the installed plugins; `PluginHost` runs them over one engine and
gives each a `PluginContext`: `ctx.session.generate(...)` and `ctx.session.get(...)`,
`ctx.clock`, never the store or a write path. Request hooks recognise a warming ping by
`info.warming`, never by its prompt text (SG-HOOK-1).
"""

from ..session.store import SessionRecord
from .context import PluginContext, SessionAccess
from .hookspecs import hookimpl, hookspec
from .manager import (
    BUILTIN_PLUGINS,
    PluginErrorHandler,
    PluginHost,
    PluginLoadError,
    PluginRequestHook,
    load_plugins,
    log_plugin_error,
    request_hook,
)
from .recap import RECAP_PROMPT, RECAP_TAG, Recap, RecapPlugin
from .warming import KeeperEngine, WarmingPlugin

__all__ = [
    "BUILTIN_PLUGINS",
    "RECAP_PROMPT",
    "RECAP_TAG",
    "KeeperEngine",
    "PluginContext",
    "PluginErrorHandler",
    "PluginHost",
    "PluginLoadError",
    "PluginRequestHook",
    "Recap",
    "RecapPlugin",
    "SessionAccess",
    "SessionRecord",
    "WarmingPlugin",
    "hookimpl",
    "hookspec",
    "load_plugins",
    "log_plugin_error",
    "request_hook",
]
