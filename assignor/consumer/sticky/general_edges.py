"""The pool sources of a count-shift graph (:func:`~.general_flow.place`): most of its edges, compiled where built.

Issue 29: with the flow itself compiled, building these edges was the largest part of a cliff group's
CPU.  :func:`pool_edges` hands them to the compiled core (``_flowcore.pool_edges``), which appends
the very nodes and edges :func:`pool_edges_py` appends, in the same order, and answers None (having
appended nothing) for whatever it cannot take as the Python does; the Python is its oracle
(``tests/assignor/test_general_edges.py``) and the builder where no core was built.
"""

from __future__ import annotations

from ...flow import Edge
from ...flow.compiled import CORE
from .general_pools import Pools

#: Per pool, in pool order: its partitions, its first edge, how many of its edges go back to its owner (0-2,
#: first), and the hubs its next edges go to, in order.
PoolEdges = list[tuple[list[int], int, int, list[int]]]

#: Per tuple of a topic's hub classes: per (mask, moved), each hub edge's cost in class order (kept
#: between calls by the caller: a function of the key and ``crossk`` alone).
HubCosts = dict[tuple[int, ...], dict[tuple[int, int], list[int]]]


def pool_edges(
    pools: Pools,
    edges: list[Edge],
    supply: list[int],
    cnt: list[int],
    min_sub: list[int],
    member_node: dict[int, int],
    spare_of: dict[int, int],
    grows: dict[int, set[int]],
    room: int,
    hub_nodes: list[list[int]],
    crossk: list[dict[int, int]],
    cls: list[int],
    classes: list[tuple[int, ...]],
    big: int,
    known: HubCosts | None = None,
) -> PoolEdges:
    """:func:`pool_edges_py`, compiled where this install has the core."""
    args = (
        pools,
        edges,
        supply,
        cnt,
        min_sub,
        member_node,
        spare_of,
        grows,
        room,
        hub_nodes,
        crossk,
        cls,
        classes,
        big,
    )
    if CORE is not None:
        built = CORE.pool_edges(*args)
        if built is not None:
            return built
    return pool_edges_py(*args, known=known)


def pool_edges_py(
    pools: Pools,
    edges: list[Edge],
    supply: list[int],
    cnt: list[int],
    min_sub: list[int],
    member_node: dict[int, int],
    spare_of: dict[int, int],
    grows: dict[int, set[int]],
    room: int,
    hub_nodes: list[list[int]],
    crossk: list[dict[int, int]],
    cls: list[int],
    classes: list[tuple[int, ...]],
    big: int,
    known: HubCosts | None = None,
) -> PoolEdges:
    """One source per pool (its size its supply), appended to ``supply``; into ``edges``, from it: an
    edge to its owner's node while the owner may hold the topic at its count (``0 < cnt <= min_sub + 1``)
    and one to the owner's spare-unit node while it may grow in the topic (no move either way), then
    one to each hub of its topic in class order (a move when owned) unless pinned, each costing
    ``big`` per cross-rack partition (``crossk[class][mask]``).

    An owner that may hold its topic has a member node (every member with a count has one).
    """
    hub_costs = [(known if known is not None else {}).setdefault(gs, {}) for gs in classes]
    pool_edges: PoolEdges = []
    for (o, t, k, pinned), lst in pools:
        size = len(lst)
        src = len(supply)
        supply.append(size)
        first = len(edges)
        if o >= 0:
            own = big * crossk[cls[o]][k]
            if 0 < cnt[o] <= min_sub[t] + 1:
                edges.append((src, member_node[o], size, own))
            if o in spare_of and t in grows[o]:  # a growing member takes back its own partition: no move
                edges.append((src, spare_of[o], room, own))
        stays = len(edges) - first
        if pinned:
            pool_edges.append((lst, first, stays, []))
            continue
        moved = 1 if o >= 0 else 0
        costs = hub_costs[t].get((k, moved))
        if costs is None:
            costs = hub_costs[t][(k, moved)] = [big * crossk[g][k] + moved for g in classes[t]]
        edges.extend([(src, hub, size, cost) for hub, cost in zip(hub_nodes[t], costs, strict=True)])
        pool_edges.append((lst, first, stays, hub_nodes[t]))
    return pool_edges
