"""Exact minimum-cost flow for the small aggregated graphs the rack assignors build.

Successive shortest paths with Johnson potentials (Dijkstra on reduced costs),
augmenting the bottleneck capacity of each path.  With non-negative integer
costs this is exact; the number of augmentations is bounded by the number of
distinct shortest-path lengths times the number of paths, which stays tiny
when members are aggregated by rack and partitions by rack set (tens of
nodes), however many units of flow cross the graph.

Graphs are given as plain edge lists, so callers build them with integers and
lists, and the same input always gives the same flow (ties are broken by edge
order).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

INF = float("inf")


class InfeasibleFlow(ValueError):
    """The supplies cannot all be routed to the demands within the capacities."""


@dataclass(frozen=True, slots=True)
class FlowResult:
    cost: int
    flow: list[int]  # per input edge, in input order


def min_cost_flow(
    num_nodes: int, edges: Sequence[tuple[int, int, int, int]], supply: Sequence[int]
) -> FlowResult:
    """Route every supply to the demands at minimum total cost.

    ``edges`` are ``(tail, head, capacity, cost)`` with ``capacity >= 0`` and
    ``cost >= 0``; ``supply[v] > 0`` is what node ``v`` sends, ``< 0`` what it
    must receive, and the supplies sum to zero.  Raises :class:`InfeasibleFlow`
    when no flow satisfies them.
    """
    if len(supply) != num_nodes:
        raise ValueError("supply must have one entry per node")
    if sum(supply) != 0:
        raise InfeasibleFlow(f"supplies sum to {sum(supply)}, not 0")
    # Super source S and sink T turn supplies into one s-t flow problem.
    s, t = num_nodes, num_nodes + 1
    n = num_nodes + 2
    head: list[int] = []
    cap: list[int] = []
    cost: list[int] = []
    adj: list[list[int]] = [[] for _ in range(n)]

    def add(u: int, v: int, c: int, w: int) -> int:
        if c < 0 or w < 0:
            raise ValueError(f"edge {u}->{v}: capacity and cost must be non-negative")
        e = len(head)
        head.extend((v, u))
        cap.extend((c, 0))
        cost.extend((w, -w))
        adj[u].append(e)
        adj[v].append(e + 1)
        return e

    ids = [add(u, v, c, w) for u, v, c, w in edges]
    need = 0
    for v, b in enumerate(supply):
        if b > 0:
            add(s, v, b, 0)
            need += b
        elif b < 0:
            add(v, t, -b, 0)

    potential = [0] * n  # valid: all costs non-negative at start
    total_cost = 0
    sent = 0
    while sent < need:
        dist = [INF] * n
        via = [-1] * n
        dist[s] = 0
        heap: list[tuple[float, int]] = [(0, s)]
        while heap:
            d, u = heapq.heappop(heap)
            if d > dist[u]:
                continue
            pu = potential[u]
            for e in adj[u]:
                if cap[e] > 0:
                    v = head[e]
                    nd = d + cost[e] + pu - potential[v]
                    if nd < dist[v]:
                        dist[v] = nd
                        via[v] = e
                        heapq.heappush(heap, (nd, v))
        if dist[t] == INF:
            raise InfeasibleFlow(f"only {sent} of {need} units can be routed")
        for v in range(n):
            if dist[v] < INF:
                potential[v] += int(dist[v])
        push = need - sent
        v = t
        while v != s:
            e = via[v]
            push = min(push, cap[e])
            v = head[e ^ 1]
        v = t
        while v != s:
            e = via[v]
            cap[e] -= push
            cap[e ^ 1] += push
            total_cost += push * cost[e]
            v = head[e ^ 1]
        sent += push
    return FlowResult(cost=total_cost, flow=[cap[e + 1] for e in ids])
