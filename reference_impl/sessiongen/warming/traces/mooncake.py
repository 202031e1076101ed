"""Mooncake request traces (JSON Lines of timestamp, lengths and prefix-block ids) as a Trace,
with the conversations inferred from the prefix chain.

Format (kvcache-ai/Mooncake, FAST'25 trace release), one request a line: `timestamp` (ms from
the trace start), `input_length`, `output_length` (tokens) and `hash_ids`, the prompt's
prefix blocks of 512 tokens (equal ids at equal positions are a shared prefix). The format has
no session ids; `infer_sessions` says how they are recovered.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from . import Trace, TraceFormatError, TraceRequest, trace_lines

BLOCK_TOKENS = 512


class _Line(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    timestamp: float = Field(ge=0)
    input_length: int = Field(ge=0)
    output_length: int = Field(ge=0)
    hash_ids: list[int] = Field(min_length=1)


def shared_mooncake_dir() -> Path:
    """Where the project's copy of the Mooncake traces lives when present: `../shared/data/
    mooncake` beside the repository (never committed into it)."""
    package = next(p for p in Path(__file__).resolve().parents if p.name == "sessiongen")
    repo_root = package.parents[1]  # the package sits in <repo>/reference_impl/
    return repo_root.parent / "shared" / "data" / "mooncake"


def block_tokens(n_blocks: int, input_length: int) -> tuple[int, ...]:
    """512 tokens a block, the last gets the remainder. An inconsistent line (input_length at
    most 512*(n-1)) would leave the last block empty or negative: it is clamped to 1 token, so
    that request's tokens exceed its input_length; a longer input_length than n blocks hold
    goes to the last block, so the sum stays input_length."""
    last = max(1, input_length - BLOCK_TOKENS * (n_blocks - 1))
    return (BLOCK_TOKENS,) * (n_blocks - 1) + (last,)


def infer_sessions(chains: Sequence[Sequence[int]]) -> list[int]:
    """The conversation of each request (time-ordered prefix-block chains), numbered in order
    of first appearance.

    A request continues the conversation of the most recent earlier request whose blocks, all
    but that request's last (usually partial: it changes as the conversation grows), are a
    prefix of this request's blocks, choosing the longest such match; otherwise it starts a
    new conversation. Retries and edits of the last message (same full blocks, another last
    block) therefore continue too.

    One exception keeps a shared system prompt from gluing conversations together: a match
    ending at a prefix that two different full blocks have already followed (in any earlier
    requests) does not count. Such a prefix is shared context (a system prompt, a common
    document), so matching it says nothing about which conversation this is. A longer match
    past it still counts.

    A trie over the full-block prefixes (one dict keyed by (node, block id)) makes this linear
    in the total number of blocks.
    """
    child: dict[tuple[int, int], int] = {}
    n_children = [0]  # per node: distinct full blocks seen after it; node 0 is the root
    last_ending: dict[int, int] = {}  # node -> most recent request whose full blocks end there
    sessions: list[int] = []
    n_sessions = 0
    for index, chain in enumerate(chains):
        node, match = 0, None
        for block in chain:
            next_node = child.get((node, block))
            if next_node is None:
                break
            node = next_node
            earlier = last_ending.get(node)
            if earlier is not None and n_children[node] < 2:
                match = earlier
        if match is None:
            sessions.append(n_sessions)
            n_sessions += 1
        else:
            sessions.append(sessions[match])
        if len(chain) >= 2:  # a one-block request has no full block to be continued from
            node = 0
            for block in chain[:-1]:
                next_node = child.get((node, block))
                if next_node is None:
                    next_node = len(n_children)
                    child[(node, block)] = next_node
                    n_children.append(0)
                    n_children[node] += 1
                node = next_node
            last_ending[node] = index
    return sessions


def load_mooncake(path: Path, name: str | None = None, *, aligned: bool = True) -> Trace:
    """A Mooncake JSONL file as a Trace: `at` is the timestamp in seconds (as given, from the
    trace start), sessions are `s0`, `s1`, ... in order of first request (`infer_sessions`),
    and (unless `aligned` is False) blocks are split where a prompt ends inside a chunk
    (`align_to_prompts`), so a breakpoint on a prompt's last block is what the next turn
    reads. Raises TraceFormatError
    naming the line of a malformed line."""
    lines: list[_Line] = []
    for number, raw in trace_lines(path):
        try:
            lines.append(_Line.model_validate_json(raw))
        except ValidationError as error:
            raise TraceFormatError.invalid(path, error, number) from None
    lines.sort(key=lambda line: line.timestamp)  # stable: equal times keep file order
    sessions = infer_sessions([line.hash_ids for line in lines])
    requests = tuple(
        TraceRequest(
            session=f"s{session}",
            at=line.timestamp / 1000,
            blocks=tuple(line.hash_ids),
            block_tokens=block_tokens(len(line.hash_ids), line.input_length),
            output_tokens=line.output_length,
        )
        for line, session in zip(lines, sessions, strict=True)
    )
    trace = Trace(name or path.stem, requests)
    return align_to_prompts(trace) if aligned else trace


def align_to_prompts(trace: Trace) -> Trace:
    """The trace with blocks split so that a request continuing its session's previous one
    contains that prompt's last block whole.

    Traces of fixed-size chunks (Mooncake: 512 tokens) end most prompts inside a chunk, and
    the next turn's chunk at that position has another id because it holds more tokens. A
    breakpoint on the prompt's last block then writes an entry no later prompt contains, so
    nothing is ever read back, while the real conversation resends that prompt verbatim. When
    a request shares all but the previous prompt's last chunk and its own chunk there is at
    least as long, that chunk is split into the previous prompt's last block plus a new block
    for the rest (ids above every id in the trace, one per (chunk id, offset)); a request
    sharing only a shorter prefix reuses the previous request's blocks up to there. Tokens,
    times, sessions and outputs are unchanged.
    """
    fresh = 1 + max((b for r in trace.requests for b in r.blocks), default=0)
    pieces: dict[tuple[int, int], int] = {}
    last: dict[str, int] = {}
    # Per request: its new block ids and tokens, and where each original chunk starts in them.
    aligned: list[tuple[list[int], list[int], list[int]]] = []
    out: list[TraceRequest] = []
    for i, request in enumerate(trace.requests):
        raw, raw_tokens = request.blocks, request.block_tokens
        ids: list[int] = []
        tokens: list[int] = []
        starts: list[int] = []
        start = 0
        p = last.get(request.session)
        if p is not None:
            before = trace.requests[p]
            p_ids, p_tokens, p_starts = aligned[p]
            k = 0
            while k < min(len(raw), len(before.blocks)) and raw[k] == before.blocks[k]:
                k += 1
            end = len(before.blocks) - 1
            if k == len(before.blocks):
                ids, tokens, starts, start = list(p_ids), list(p_tokens), list(p_starts), k
            elif k == end and k < len(raw) and raw_tokens[k] >= before.block_tokens[k]:
                ids, tokens, starts, start = list(p_ids), list(p_tokens), list(p_starts), k + 1
                rest = raw_tokens[k] - before.block_tokens[k]
                if rest:
                    key = (raw[k], before.block_tokens[k])
                    if key not in pieces:
                        pieces[key] = fresh + len(pieces)
                    ids.append(pieces[key])
                    tokens.append(rest)
            else:
                cut = p_starts[k] if k < len(p_starts) else len(p_ids)
                ids, tokens, starts, start = p_ids[:cut], p_tokens[:cut], p_starts[:k], k
        for j in range(start, len(raw)):
            starts.append(len(ids))
            ids.append(raw[j])
            tokens.append(raw_tokens[j])
        aligned.append((ids, tokens, starts))
        last[request.session] = i
        out.append(
            TraceRequest(
                request.session, request.at, tuple(ids), tuple(tokens), request.output_tokens
            )
        )
    return Trace(trace.name, tuple(out))
