"""`sessiongen_request`: the plugins' request hooks run as one chain inside preparation, in
registration order, each seeing what the previous returned; their edits reach the wire; a
warming ping is recognised by `info.warming`, never by its prompt text."""

from __future__ import annotations

import pluggy
import pytest
from sessiongen import LLMRequest, RequestInfo
from sessiongen.lab import EmulatorLab
from sessiongen.plugins import PluginHost, WarmingPlugin, hookimpl, load_plugins, request_hook
from sessiongen.warming.keeper import KEEPALIVE_PROMPT

from .conftest import ANSWER, host_on


class Chain:
    """Appends its letter to the `x-chain` header (or only logs, with `keep`)."""

    def __init__(self, letter: str, log: list[str], *, keep: bool = False) -> None:
        self.letter = letter
        self.log = log
        self.keep = keep

    def edit(self, request: LLMRequest, info: RequestInfo) -> LLMRequest | None:
        self.log.append(f"{self.letter}:{info.operation}")
        if self.keep:
            return None
        chain = request.headers.get("x-chain", "")
        headers = {**request.headers, "x-chain": chain + self.letter}
        return request.model_copy(update={"headers": headers})


def _chain(
    letter: str,
    log: list[str],
    *,
    keep: bool = False,
    tryfirst: bool = False,
    trylast: bool = False,
) -> object:
    """A plugin whose request hook is `Chain.edit`, marked with pluggy's `tryfirst` and
    `trylast`."""
    chain = Chain(letter, log, keep=keep)

    class Plugin:
        @hookimpl(tryfirst=tryfirst, trylast=trylast)
        def sessiongen_request(self, request: LLMRequest, info: RequestInfo) -> LLMRequest | None:
            return chain.edit(request, info)

    return Plugin()


@pytest.mark.clause("SG-HOOK-1")
@pytest.mark.clause("SG-PLUG-1")
async def test_hooks_chain_in_registration_order_and_their_edits_reach_the_wire(
    lab: EmulatorLab,
) -> None:
    """Registered e(trylast), a, b(keeps the request), c, d(tryfirst), f(trylast): the chain
    is d, a, b, c, e, f for the Step and for generate, and the wire carries every edit but
    b's, in that order."""
    log: list[str] = []
    engine, _ = host_on(
        lab,
        ("e", _chain("e", log, trylast=True)),
        ("a", _chain("a", log)),
        ("b", _chain("b", log, keep=True)),
        ("c", _chain("c", log)),
        ("d", _chain("d", log, tryfirst=True)),
        ("f", _chain("f", log, trylast=True)),
    )
    sid = engine.create_session("forge", workspace=lab.workspace).id
    lab.script(ANSWER)
    await engine.run(sid, "What is in src/app.py?")
    await engine.generate(sid, "Recap?", tag="recap")
    order = ["d", "a", "b", "c", "e", "f"]
    assert log == [f"{x}:step" for x in order] + [f"{x}:generate" for x in order]
    assert [r["headers"]["x-chain"] for r in lab.requests()] == ["dacef", "dacef"]


async def test_a_hook_that_returns_neither_a_request_nor_none_is_named(
    lab: EmulatorLab,
) -> None:
    class Broken:
        @hookimpl
        def sessiongen_request(self, request: LLMRequest) -> object:
            return request.model_dump()

    engine, _ = host_on(lab, ("broken", Broken()))
    sid = engine.create_session("forge", workspace=lab.workspace).id
    with pytest.raises(TypeError, match=r"plugin 'broken': sessiongen_request must return"):
        await engine.generate(sid, "Recap?")
    assert lab.requests() == []  # refused before anything was sent


def test_a_host_refuses_an_engine_built_without_the_plugins_hook(lab: EmulatorLab) -> None:
    """A request hook that would never run is an error when the host is made, not silence."""
    pm = load_plugins(entry_points=False, builtins=False)
    pm.register(_chain("a", []), name="a")
    with pytest.raises(ValueError, match=r"plugins a implement sessiongen_request"):
        PluginHost(lab.engine, pm)
    other = load_plugins(entry_points=False, builtins=False)
    with pytest.raises(ValueError, match="sessiongen_request"):
        PluginHost(lab.rebuild(hooks=[request_hook(other)]), pm)  # another manager's hook
    assert PluginHost(lab.rebuild(hooks=[request_hook(pm)]), pm).request_hook == request_hook(pm)


def test_a_misspelled_hook_and_a_wrapper_are_refused(lab: EmulatorLab) -> None:
    class Misspelled:
        @hookimpl
        def sessiongen_reqeust(self, request: LLMRequest) -> None: ...

    pm = load_plugins(entry_points=False, builtins=False)
    pm.register(Misspelled(), name="typo")
    with pytest.raises(pluggy.PluginValidationError, match="sessiongen_reqeust"):
        PluginHost(lab.rebuild(hooks=[request_hook(pm)]), pm)

    class Wrapper:
        @hookimpl(wrapper=True)
        def sessiongen_turn_settled(self, session_id: str) -> object:
            return (yield)

    engine, host = host_on(lab, ("wrapper", Wrapper()))
    sid = engine.create_session("forge").id
    with pytest.raises(TypeError, match="does not support wrappers"):
        host.turn_settled(sid)


class WarmingCounter:
    """Counts warming requests the only supported way: by `info.warming`."""

    def __init__(self) -> None:
        self.warming: list[RequestInfo] = []
        self.other: list[RequestInfo] = []

    @hookimpl
    def sessiongen_request(self, request: LLMRequest, info: RequestInfo) -> None:
        (self.warming if info.warming else self.other).append(info)


@pytest.mark.clause("SG-HOOK-1")
@pytest.mark.clause("SG-PLUG-1")
async def test_warming_is_recognised_by_metadata_never_by_prompt_text(lab: EmulatorLab) -> None:
    """A generate whose prompt is the keep-alive text but which is not a warming call is
    not counted; a warming call with any other prompt is, and so is the warming plugin's
    own ping."""
    counter = WarmingCounter()
    engine, host = host_on(lab, ("counter", counter), builtins=True)
    sid = engine.create_session("forge", workspace=lab.workspace).id
    lab.script(ANSWER)
    await engine.run(sid, "What is in src/app.py?")

    await engine.generate(sid, KEEPALIVE_PROMPT)
    sent = lab.requests()[-1]["body"]["messages"][-1]["content"]
    assert KEEPALIVE_PROMPT in str(sent)  # the keep-alive text went out...
    assert counter.warming == []  # ...and it was not a warming call

    await engine.generate(sid, "Anything at all.", warming=True, tag="mine")
    assert [(i.warming, i.tag) for i in counter.warming] == [(True, "mine")]

    warming = host.plugin("warming")
    assert isinstance(warming, WarmingPlugin)
    warming.watch(sid)
    pings = await warming.keeper.advance_to(3600)
    assert len(pings) >= 1
    assert [(i.operation, i.warming, i.tag) for i in counter.warming[1:]] == [
        ("generate", True, "warming")
    ] * len(pings)
    assert [(i.operation, i.tag) for i in counter.other] == [("step", None), ("generate", None)]
