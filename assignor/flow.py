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


def min_cost_flow_phases(
    num_nodes: int, edges: Sequence[tuple[int, int, int, int]], supply: Sequence[int]
) -> FlowResult:
    """Same problem and contract as :func:`min_cost_flow`, solved by the primal-dual method.

    Each phase runs one Dijkstra (stopping at the sink) to raise the node
    potentials, then saturates *every* shortest path at once with a blocking
    flow (Dinic) on the zero-reduced-cost edges.  The number of phases is the
    number of distinct shortest-path lengths, which is small when costs are
    small integers (rack traffic weights), so graphs with tens of thousands of
    unit edges solve in a handful of phases instead of one Dijkstra per unit.
    Exact for non-negative integer costs; deterministic (edge order breaks ties).
    """
    if len(supply) != num_nodes:
        raise ValueError("supply must have one entry per node")
    if sum(supply) != 0:
        raise InfeasibleFlow(f"supplies sum to {sum(supply)}, not 0")
    s, t = num_nodes, num_nodes + 1
    n = num_nodes + 2
    head: list[int] = []
    cap: list[int] = []
    cost: list[int] = []
    adj: list[list[int]] = [[] for _ in range(n)]
    for u, v, c, w in edges:
        if c < 0 or w < 0:
            raise ValueError(f"edge {u}->{v}: capacity and cost must be non-negative")
        e = len(head)
        head.extend((v, u))
        cap.extend((c, 0))
        cost.extend((w, -w))
        adj[u].append(e)
        adj[v].append(e + 1)
    n_input = len(head)
    need = 0
    for v, b in enumerate(supply):
        e = len(head)
        if b > 0:
            head.extend((v, s))
            cap.extend((b, 0))
            cost.extend((0, 0))
            adj[s].append(e)
            adj[v].append(e + 1)
            need += b
        elif b < 0:
            head.extend((t, v))
            cap.extend((-b, 0))
            cost.extend((0, 0))
            adj[v].append(e)
            adj[t].append(e + 1)
    pot = [0] * n
    sent = 0
    heappush, heappop = heapq.heappush, heapq.heappop
    while sent < need:
        # Dijkstra on reduced costs, stopped once the sink is settled.
        dist: list[float] = [INF] * n
        dist[s] = 0
        done = [False] * n
        heap: list[tuple[float, int]] = [(0, s)]
        dt = INF
        while heap:
            d, u = heappop(heap)
            if done[u]:
                continue
            done[u] = True
            if u == t:
                dt = d
                break
            pu = pot[u] + d
            for e in adj[u]:
                if cap[e] > 0:
                    v = head[e]
                    if not done[v]:
                        nd = pu + cost[e] - pot[v]
                        if nd < dist[v]:
                            dist[v] = nd
                            heappush(heap, (nd, v))
        if dt == INF:
            raise InfeasibleFlow(f"only {sent} of {need} units can be routed")
        idt = int(dt)
        for v in range(n):
            dv = dist[v]
            pot[v] += int(dv) if done[v] else idt
        sent += _blocking_flows(n, s, t, head, cap, cost, adj, pot, need - sent)
    return FlowResult(
        cost=sum(cap[e + 1] * cost[e] for e in range(0, n_input, 2)),
        flow=[cap[e + 1] for e in range(0, n_input, 2)],
    )


def _blocking_flows(
    n: int,
    s: int,
    t: int,
    head: list[int],
    cap: list[int],
    cost: list[int],
    adj: list[list[int]],
    pot: list[int],
    limit: int,
) -> int:
    """Dinic max flow from ``s`` to ``t`` on the residual edges of zero reduced cost, up to ``limit``."""
    total = 0
    while total < limit:
        level = [-1] * n
        level[s] = 0
        queue = [s]
        for u in queue:
            lu = level[u] + 1
            if level[t] >= 0 and lu > level[t]:
                break  # nodes at the sink's level or beyond cannot lie on a shortest path
            pu = pot[u]
            for e in adj[u]:
                if cap[e] > 0:
                    v = head[e]
                    if level[v] < 0 and cost[e] + pu - pot[v] == 0:
                        level[v] = lu
                        queue.append(v)
        if level[t] < 0:
            return total
        it = [0] * n
        path: list[int] = []
        u = s
        while total < limit:
            if u == t:
                push = limit - total
                for e in path:
                    if cap[e] < push:
                        push = cap[e]
                cut = -1
                for i, e in enumerate(path):
                    cap[e] -= push
                    cap[e ^ 1] += push
                    if cut < 0 and cap[e] == 0:
                        cut = i
                total += push
                del path[cut:]
                u = s if not path else head[path[-1]]
                continue
            edges_u = adj[u]
            i = it[u]
            lu = level[u] + 1
            pu = pot[u]
            advanced = False
            while i < len(edges_u):
                e = edges_u[i]
                if cap[e] > 0:
                    v = head[e]
                    if level[v] == lu and cost[e] + pu - pot[v] == 0:
                        path.append(e)
                        u = v
                        advanced = True
                        break
                i += 1
            it[u if not advanced else head[path[-1] ^ 1]] = i
            if advanced:
                continue
            # dead end: retreat
            level[u] = -1
            if not path:
                break
            e = path.pop()
            u = head[e ^ 1]
            it[u] += 1
    return total
