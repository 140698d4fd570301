"""The partitions of a count-shift flow pooled, and what :func:`~.general_flow.place` keeps between calls.

A pool is the partitions of equal (owner, topic, replica mask, pinned), interchangeable for the flow:
one source node each.  The count-shift search (issue 29) calls ``place`` hundreds of times per run,
most of them at one holder and over a handful of hub-class sets, so the pools and the hub costs are
worked out once and kept on the state (:class:`FlowCache`), each entry a function of its key and the
state's fixed data: a kept answer is the one a new pass would give, the graphs stay the same.
"""

from __future__ import annotations

from ...record import field, record

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up (issue 29)

#: A pool's key: (owner or -1, topic, replica mask, pinned); pinned means with its owner in a keep-first run.
PoolKey = tuple[int, int, int, bool]
#: Partitions of equal key, interchangeable for the flow: every pool in key order, with its partitions.
Pools = list[tuple[PoolKey, list[int]]]


@record(frozen=True)
class Pooled:
    """The pools of one holder (a copy of it) and its ``BIG * cross + moves``; per topic, its pools not
    pinned, and per (owner, topic) with an owner, its pools: what a graph's size is counted from."""

    holder: list[int]
    pools: Pools
    current: int
    unpinned: list[int]
    owned: list[tuple[int, int, int]]


@record()
class FlowCache:
    """What :func:`~.general_flow.place` would otherwise work out again at every call from one state (issue 29: the
    count-shift search calls it hundreds of times, mostly at one holder), kept on the state.

    Each entry is a function of the state's fixed data and its key alone, so a kept answer is the one
    a new pass would give: ``pooled`` the last holder's pools; per tuple of a topic's hub classes
    (ascending), ``fewest`` the fewest cross-rack partitions of a mask through one of them and
    ``hub_costs`` each hub edge's cost, in class order, per (mask, moved).
    """

    pooled: Pooled | None = None
    fewest: dict[tuple[int, ...], dict[int, int]] = field(default_factory=dict)
    hub_costs: dict[tuple[int, ...], dict[tuple[int, int], list[int]]] = field(
        default_factory=dict
    )  # general_edges.HubCosts


if TYPE_CHECKING:
    from typing import Protocol

    class Pooling(Protocol):
        """What pooling reads of the state (:class:`~.general_state.GeneralState`, which imports this module)."""

        holder: list[int]
        owner: list[int]
        masks: list[int]
        ptopic: list[int]
        cls: list[int]
        crossk: list[dict[int, int]]
        keep_owned: bool
        n_parts: int
        n_topics: int
        flow_cache: FlowCache


def pools_of(state: Pooling, big: int) -> Pooled:
    """The partitions pooled by (owner, topic, mask, pinned), and the current ``BIG * cross + moves``.

    Built once per holder: the state keeps the last (:class:`Pooled`), compared by value with the
    holder (which balancing moves in place), so an answer kept is the one a new pass would give.
    """
    memo = state.flow_cache
    kept = memo.pooled
    if kept is not None and kept.holder == state.holder:
        return kept
    holder, owner, masks, ptopic, cls, crossk = (
        state.holder,
        state.owner,
        state.masks,
        state.ptopic,
        state.cls,
        state.crossk,
    )
    pools: dict[PoolKey, list[int]] = {}
    keep = state.keep_owned
    current = 0
    for gp in range(state.n_parts):
        h, o, k = holder[gp], owner[gp], masks[gp]
        pools.setdefault((o, ptopic[gp], k, keep and o == h), []).append(gp)
        current += big * crossk[cls[h]][k] + (1 if o >= 0 and o != h else 0)
    ordered = sorted(pools.items())
    unpinned = [0] * state.n_topics
    owned: dict[tuple[int, int], int] = {}
    for o, t, _k, pinned in pools:
        unpinned[t] += not pinned
        if o >= 0:
            owned[(o, t)] = owned.get((o, t), 0) + 1
    memo.pooled = Pooled(list(holder), ordered, current, unpinned, [(o, t, m) for (o, t), m in owned.items()])
    return memo.pooled
