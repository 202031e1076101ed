"""Request traces: what the replay engine and the policies read.

A trace is a time-ordered list of provider requests. Each request is a prompt made of prefix
blocks: equal block ids at equal positions mean two requests share that prefix, which is what
a prompt cache can reuse. Every importer and the generator produce this one shape.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One provider request of a trace.

    `blocks` are the prompt's prefix block ids in order and `block_tokens` the tokens of each
    (the same length); their sum is the prompt's input tokens. `session` names the
    conversation the request belongs to (importers that have no session ids infer it from the
    prefix chain). `at` is seconds from the start of the trace.
    """

    session: str
    at: float
    blocks: tuple[int, ...]
    block_tokens: tuple[int, ...]
    output_tokens: int

    @property
    def input_tokens(self) -> int:
        return sum(self.block_tokens)


@dataclass(frozen=True, slots=True)
class Trace:
    """A named, time-ordered sequence of requests."""

    name: str
    requests: tuple[TraceRequest, ...]
