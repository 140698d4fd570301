"""A count-shift flow's floor: the least it could cost, worked out before the graph is built, compiled where built.

Issue 29: :func:`~.general_flow.place` asks for the floor before every count-shift flow it may refuse
(a pass over the pools per flow), and with the flow, its pool edges, nodes and read-back compiled that
pass was among the largest Python pieces of a cliff group's CPU.  :func:`floor_cost` hands it to the
compiled core (``_flowcore.floor_cost``, ``assignor/flow/_shift.c``), which gives the very int
:func:`floor_cost_py` gives, or None for whatever it cannot take as the Python does; the Python is its
oracle (``tests/assignor/test_general_floor.py``) and the one that answers where no core was built.
"""

from __future__ import annotations

from ...flow.compiled import CORE
from .general_pools import Pools

#: Per tuple of a topic's hub classes (ascending): per replica mask, the fewest cross-rack partitions of
#: that mask through one of them (kept between calls by the caller: a function of the key and ``crossk``).
Fewest = dict[tuple[int, ...], dict[int, int]]


def floor_cost(
    pools: Pools,
    cnt: list[int],
    min_sub: list[int],
    spare_of: dict[int, int],
    grows: dict[int, set[int]],
    crossk: list[dict[int, int]],
    cls: list[int],
    classes: list[tuple[int, ...]],
    big: int,
    fewest: Fewest | None = None,
) -> int:
    """:func:`floor_cost_py`, compiled where this install has the core."""
    if CORE is not None:
        got = CORE.floor_cost(pools, cnt, min_sub, spare_of, grows, crossk, cls, classes, big)
        if got is not None:
            return got
    return floor_cost_py(pools, cnt, min_sub, spare_of, grows, crossk, cls, classes, big, fewest)


def floor_cost_py(
    pools: Pools,
    cnt: list[int],
    min_sub: list[int],
    spare_of: dict[int, int],
    grows: dict[int, set[int]],
    crossk: list[dict[int, int]],
    cls: list[int],
    classes: list[tuple[int, ...]],
    big: int,
    fewest: Fewest | None = None,
) -> int:
    """A lower bound on the flow's cost: every partition at the cheapest edge its pool will have, as if
    no member's count limited it (infeasible pools add nothing).  A pool's edges: back to its owner while
    the owner may hold the topic at its count (``0 < cnt <= min_sub + 1``) or grow in it (its spare-unit
    node), ``big`` per cross-rack partition; unless pinned, to each hub of its topic (``classes``), ``big``
    per cross-rack partition plus one move when owned.

    Each unit of flow crosses exactly one pool edge and every other edge costs 0, so the flow can be
    no cheaper.  When the bound already reaches the current cost, the flow could not be strictly
    cheaper and :func:`~.general_flow.place` returns False without building it (issue 29: about a third
    of the count-shift flows of small unequal groups are refused this way, for the price of one pass
    over the pools instead of a graph and a solve).
    """
    kept = fewest if fewest is not None else {}
    hub_cross = [kept.setdefault(gs, {}) for gs in classes]  # per topic: mask -> fewest cross-rack via a hub
    floor = 0
    for (o, t, k, pinned), lst in pools:
        best = -1
        if o >= 0 and (0 < cnt[o] <= min_sub[t] + 1 or (o in spare_of and t in grows[o])):
            best = big * crossk[cls[o]][k]
        if not pinned and classes[t]:
            c = hub_cross[t].get(k)
            if c is None:
                c = hub_cross[t][k] = min(crossk[g][k] for g in classes[t])
            c = big * c + (1 if o >= 0 else 0)
            if best < 0 or c < best:
                best = c
        if best > 0:
            floor += best * len(lst)
    return floor
