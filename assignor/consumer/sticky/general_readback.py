"""The holder of every partition read back from a solved count-shift flow (:func:`~.general_flow.place`),
compiled where built.

Issue 29: with the flow and its pool edges compiled, reading the flow back was the largest Python
piece of a cliff group's CPU.  :func:`read_back` hands it to the compiled core (``_flowcore.read_back``,
``assignor/flow/_readback.c``), which gives the very holder :func:`read_back_py` gives, and answers
None for whatever it cannot take as the Python does; the Python is its oracle
(``tests/assignor/test_general_readback.py``) and the reader where no core was built.
"""

from __future__ import annotations

from itertools import compress

from ...flow import Edge
from ...flow.compiled import CORE
from .common import deal
from .general_edges import PoolEdges
from .general_pools import Pools


def read_back(
    holder: list[int],
    pools: Pools,
    pool_edges: PoolEdges,
    flow: list[int],
    edges: list[Edge],
    hub_edges: int,
    node_member: dict[int, int],
    num_nodes: int,
) -> list[int]:
    """:func:`read_back_py`, compiled where this install has the core (``num_nodes``, the graph's node
    count, bounds the hubs the core accepts)."""
    if CORE is not None:
        got = CORE.read_back(holder, pools, pool_edges, flow, edges, hub_edges, node_member, num_nodes)
        if got is not None:
            return got
    return read_back_py(holder, pools, pool_edges, flow, edges, hub_edges, node_member)


def read_back_py(
    holder: list[int],
    pools: Pools,
    pool_edges: PoolEdges,
    flow: list[int],
    edges: list[Edge],
    hub_edges: int,
    node_member: dict[int, int],
) -> list[int]:
    """The holder of each partition from the flow: the owner's own first, the rest dealt through the hubs
    to the members in the flow's proportions, lowest numbers first (deterministic).

    ``pool_edges`` is :func:`.general_edges.pool_edges`'s answer for ``pools``; the first ``hub_edges``
    edges are the member, spare-unit and hub edges, ``node_member`` the member of each member and
    spare-unit node.  A pool of one partition (most of them) goes where its one unit of flow goes,
    which is what the deal would give it, without the sorts.
    """
    incoming: dict[int, list[int]] = {}
    new_holder = list(holder)
    for ((o, _t, _k, _pinned), _lst), (lst, first, stays, hubs) in zip(pools, pool_edges, strict=True):
        out = first + stays
        pos = sum(flow[first:out]) if stays else 0
        if len(lst) == 1:
            gp = lst[0]
            if pos:
                new_holder[gp] = o
                continue
            try:  # its one unit left through one hub edge
                hub = hubs[flow.index(1, out, out + len(hubs)) - out]
            except ValueError:
                raise AssertionError("free slots and partitions to place differ") from None
            incoming.setdefault(hub, []).append(gp)
            continue
        # Stay with the owner: those it already holds first.
        order = sorted(lst, key=lambda gp: (holder[gp] != o, gp))
        for gp in order[:pos]:
            new_holder[gp] = o
        for hub, gp in deal(sorted(order[pos:]), [(hub, flow[out + j]) for j, hub in enumerate(hubs)]):
            incoming.setdefault(hub, []).append(gp)
    hub_out: dict[int, dict[int, int]] = {}
    for e in compress(range(hub_edges), flow):  # the edges with flow; pool edges leave no hub
        u, v, _cap, _cost = edges[e]
        if u in incoming and v in node_member:
            per = hub_out.setdefault(u, {})
            per[node_member[v]] = per.get(node_member[v], 0) + flow[e]
    for hub, lst in incoming.items():
        for i, gp in deal(sorted(lst), sorted(hub_out.get(hub, {}).items())):
            new_holder[gp] = i
    return new_holder
