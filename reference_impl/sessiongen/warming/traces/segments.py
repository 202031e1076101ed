"""Prefix blocks built from token counts: each session's next prompt keeps the whole earlier
segments it shares with the session's previous prompt and adds one new segment.

Used by the loaders that know how many tokens a prompt shares, not which blocks (the events
token form, Claude Code and opencode transcripts) and by the generator.
"""

from __future__ import annotations


class SegmentChain:
    """The current prompt of every session as blocks, and the block ids handed out so far.

    Block ids are unique within one chain, so two sessions share a block only when one is set
    explicitly into both (the generator's agent prefix)."""

    def __init__(self) -> None:
        self._prompts: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {}
        self._next_id = 0

    def new_id(self) -> int:
        block = self._next_id
        self._next_id += 1
        return block

    def prompt(self, session: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The session's previous prompt as blocks and block tokens (empty before its
        first)."""
        return self._prompts.get(session, ((), ()))

    def prompt_tokens(self, session: str) -> int:
        """Tokens of the session's previous prompt (0 before its first)."""
        return sum(self._prompts.get(session, ((), ()))[1])

    def set(self, session: str, blocks: tuple[int, ...], tokens: tuple[int, ...]) -> None:
        """Record a prompt given as blocks, so the session's next prompt can extend it."""
        self._prompts[session] = (blocks, tokens)

    def extend(
        self, session: str, prefix_tokens: int, new_tokens: int
    ) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The blocks and block tokens of the session's next prompt: its first `prefix_tokens`
        are the previous prompt's, then `new_tokens` follow.

        Sharing is whole segments: when `prefix_tokens` ends inside an earlier segment, only the
        segments before it are kept and the rest of the prefix joins the new segment (a cache
        reuses whole blocks, so a cut block is a new one). Raises ValueError when the prefix is
        longer than the previous prompt or the prompt would be empty.
        """
        if prefix_tokens < 0 or new_tokens < 0:
            raise ValueError("token counts must be >= 0")
        if prefix_tokens + new_tokens == 0:
            raise ValueError("a prompt needs at least one token")
        blocks, tokens = self._prompts.get(session, ((), ()))
        if prefix_tokens > sum(tokens):
            raise ValueError(
                f"prefix_tokens {prefix_tokens} is longer than the session's previous prompt "
                f"({sum(tokens)} tokens)"
            )
        kept = shared = 0
        while kept < len(tokens) and shared + tokens[kept] <= prefix_tokens:
            shared += tokens[kept]
            kept += 1
        blocks, tokens = blocks[:kept], tokens[:kept]
        rest = prefix_tokens - shared + new_tokens
        if rest:
            blocks, tokens = (*blocks, self.new_id()), (*tokens, rest)
        self._prompts[session] = (blocks, tokens)
        return blocks, tokens

    def grow(
        self, session: str, prompt_tokens: int, keep: int = 0
    ) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The next prompt of a session known only by its total size: it shares the whole
        previous prompt when at least as long, else (a compaction, a cleared context) only its
        first `keep` tokens (a system prompt every prompt of the session starts with; whole
        segments only, as in `extend`), or nothing when the prompt is shorter than that.
        """
        previous = self.prompt_tokens(session)
        if prompt_tokens >= previous:
            prefix = previous
        else:
            prefix = keep if keep <= prompt_tokens else 0
        return self.extend(session, prefix, prompt_tokens - prefix)
