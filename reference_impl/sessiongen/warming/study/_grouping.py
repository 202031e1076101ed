"""Requests grouped by what they share: the one union-find behind the optimum's independent
groups and the replay's shards (internal)."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence


def connected(keys: Sequence[Iterable[Hashable]]) -> list[list[int]]:
    """Indices of `keys` grouped so that two indices sharing a key (directly or through
    others) are in one group: groups in order of their first index, each ascending."""
    parent = list(range(len(keys)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    first: dict[Hashable, int] = {}
    for i, mine in enumerate(keys):
        for key in mine:
            owner = first.setdefault(key, i)
            if owner != i:
                parent[find(i)] = find(owner)
    groups: dict[int, list[int]] = {}
    for i in range(len(keys)):
        groups.setdefault(find(i), []).append(i)
    return list(groups.values())
