"""Exact minimum-cost flow for the small aggregated graphs the rack assignors build.

Successive shortest paths with Johnson potentials (Dijkstra on reduced costs),
augmenting the bottleneck capacity of each path.  With non-negative integer
costs this is exact; the number of augmentations is bounded by the number of
distinct shortest-path lengths times the number of paths, which stays tiny
when members are aggregated by rack and partitions by rack set (tens of
nodes), however many units of flow cross the graph.

:func:`min_cost_flow_phases` solves the same problem for graphs with
thousands of nodes (one per task, say) by the primal-dual method: one
Dijkstra per distinct shortest-path length, then every shortest path at
once.  Both solvers build the same residual graph (:class:`_Residual`).  The
phases run compiled (``_flowcore.c``, :mod:`.compiled`) where the install built
them, returning the very same flows; the Python here is their oracle and fallback.

Every assignor builds its graph with :class:`FlowGraph` (nodes with supplies,
edges in the order added) and solves it with :meth:`FlowGraph.solve`; the
solvers take the same problem as plain lists.  The same graph always gives the
same flow: ties are broken by edge order.

Example: two units from node 0 to node 2, the cheap way full first::

    >>> g = FlowGraph()
    >>> s, a, t = g.add_node(2), g.add_node(), g.add_node(-2)
    >>> direct, via = g.add_edge(s, t, 1, 5), g.add_edge(s, a, 2, 1)
    >>> _ = g.add_edge(a, t, 2, 1)
    >>> r = g.solve()
    >>> r.cost, r.flow[direct], r.flow[via]
    (4, 0, 2)
"""

from __future__ import annotations

import heapq
from collections import namedtuple
from collections.abc import Sequence

from ..record import record
from .compiled import CORE

INF = float("inf")

#: One edge of a flow problem: ``(tail, head, capacity, cost)``, capacity and cost non-negative.
Edge = tuple[int, int, int, int]


#: The compiled phases (:mod:`.compiled`), None where this install has none.
_core = CORE
#: Whether this install solves flows with the compiled core (:func:`_phases`).
COMPILED = _core is not None


class InfeasibleFlow(ValueError):
    """The supplies cannot all be routed to the demands within the capacities."""


class PostconditionError(AssertionError):
    """A flow written back into an assignment broke what the write-back must keep: a bug, never bad input.

    Raised where an assignor turns a flow into task or partition owners and
    checks the result the way Kafka's ``RackAwareTaskAssignor`` does (every
    item placed once, every holder's load kept); the message names what failed.
    """


@record(frozen=True)
class FlowResult:
    """A minimum-cost flow: its total cost and the flow on each edge, in the order edges were added."""

    cost: int
    flow: list[int]


class FlowGraph:
    """A min-cost flow problem under construction: node supplies and edges, in the order added.

    The one graph builder of the assignors.  ``supply[v] > 0`` is what node
    ``v`` sends, ``< 0`` what it must receive; callers that number nodes
    arithmetically size the graph up front (``FlowGraph(n)``) and set
    ``supply`` entries, the others call :meth:`add_node`.  :meth:`add_edge`
    returns the edge's index into :attr:`FlowResult.flow`.
    """

    __slots__ = ("edges", "supply")

    def __init__(self, num_nodes: int = 0) -> None:
        self.supply: list[int] = [0] * num_nodes
        self.edges: list[Edge] = []

    @property
    def num_nodes(self) -> int:
        return len(self.supply)

    def add_node(self, supply: int = 0) -> int:
        """A new node with that supply; returns its number."""
        self.supply.append(supply)
        return len(self.supply) - 1

    def add_edge(self, tail: int, head: int, capacity: int, cost: int = 0) -> int:
        """An edge ``tail -> head``; returns its index (its flow is ``result.flow[index]``)."""
        self.edges.append((tail, head, capacity, cost))
        return len(self.edges) - 1

    def solve(self) -> FlowResult:
        """The minimum-cost flow meeting every supply (:func:`min_cost_flow_phases`).

        Raises :class:`InfeasibleFlow` when the supplies cannot all be routed,
        ``ValueError`` on a negative capacity or cost.
        """
        return min_cost_flow_phases(len(self.supply), self.edges, self.supply)

    def solve_below(self, cutoff: int) -> FlowResult | None:
        """The same flow as :meth:`solve` if it costs less than ``cutoff``, else None (:func:`min_cost_flow_below`)."""
        return min_cost_flow_below(len(self.supply), self.edges, self.supply, cutoff)

    def solve_by_paths(self) -> FlowResult:
        """The same flow problem solved by :func:`min_cost_flow` (one augmenting path at a time)."""
        return min_cost_flow(len(self.supply), self.edges, self.supply)


class _Residual:
    """The residual graph both solvers work on: arcs in pairs (``e``, ``e ^ 1`` its reverse).

    Input edge ``i`` is arc ``2 * i``; then one arc from the super source ``s``
    to each supply node and one from each demand node to the super sink ``t``,
    in node order.  ``need`` is the total supply.
    """

    __slots__ = ("adj", "cap", "cost", "head", "n", "n_input", "need", "s", "t", "unreached")

    def __init__(self, num_nodes: int, edges: Sequence[Edge], supply: Sequence[int]) -> None:
        if len(supply) != num_nodes:
            raise ValueError("supply must have one entry per node")
        if sum(supply) != 0:
            raise InfeasibleFlow(f"supplies sum to {sum(supply)}, not 0")
        self.s, self.t = s, t = num_nodes, num_nodes + 1
        self.n = n = num_nodes + 2
        head: list[int] = []
        cap: list[int] = []
        cost: list[int] = []
        adj: list[list[int]] = [[] for _ in range(n)]
        for u, v, c, w in edges:
            if c < 0 or w < 0:
                raise ValueError(f"edge {u}->{v}: capacity and cost must be non-negative")
            e = len(head)
            head += (v, u)
            cap += (c, 0)
            cost += (w, -w)
            adj[u].append(e)
            adj[v].append(e + 1)
        self.n_input = len(head)
        need = 0
        for v, b in enumerate(supply):
            e = len(head)
            if b > 0:
                head += (v, s)
                adj[s].append(e)
                adj[v].append(e + 1)
                need += b
            elif b < 0:
                head += (t, v)
                adj[v].append(e)
                adj[t].append(e + 1)
            else:
                continue
            cap += (abs(b), 0)
            cost += (0, 0)
        self.head, self.cap, self.cost, self.adj, self.need = head, cap, cost, adj, need
        # Above every reduced distance (at most twice the sum of the costs): 2**62 unless costs are
        # exact-scaled bytes/s (Python integers of any size, rackplan.assignor.traffic.exact_integers).
        self.unreached = 1 << max(62, sum(cost[0 : self.n_input : 2]).bit_length() + 2)

    def result(self, total: int | None = None) -> FlowResult:
        """The flow on each input edge, and its cost (``total`` when the solver kept the tally)."""
        cap, cost = self.cap, self.cost
        flow = cap[1 : self.n_input : 2]
        if total is None:
            total = sum(f * w for f, w in zip(flow, cost[0 : self.n_input : 2], strict=True))
        return FlowResult(cost=total, flow=flow)


def min_cost_flow(num_nodes: int, edges: Sequence[Edge], supply: Sequence[int]) -> FlowResult:
    """Route every supply to the demands at minimum total cost.

    ``edges`` are ``(tail, head, capacity, cost)`` with ``capacity >= 0`` and
    ``cost >= 0``; ``supply[v] > 0`` is what node ``v`` sends, ``< 0`` what it
    must receive, and the supplies sum to zero.  Raises :class:`InfeasibleFlow`
    when no flow satisfies them.
    """
    g = _Residual(num_nodes, edges, supply)
    n, s, t, head, cap, cost, adj, need = g.n, g.s, g.t, g.head, g.cap, g.cost, g.adj, g.need
    potential = [0] * n  # valid: all costs non-negative at start
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
            v = head[e ^ 1]
        sent += push
    return g.result()


def min_cost_flow_phases(num_nodes: int, edges: Sequence[Edge], supply: Sequence[int]) -> FlowResult:
    """Same problem and contract as :func:`min_cost_flow`, solved by the primal-dual method.

    Each phase runs one Dijkstra (stopping at the sink) to raise the node
    potentials, then saturates *every* shortest path at once with a blocking
    flow (Dinic) on the zero-reduced-cost arcs.  The number of phases is the
    number of distinct shortest-path lengths, which is small when costs are
    small integers (rack traffic weights), so graphs with tens of thousands of
    unit edges solve in a handful of phases instead of one Dijkstra per unit.
    Exact for non-negative integer costs; deterministic (arc order breaks ties).
    """
    result = _phases(_Problem(num_nodes, edges, supply), None)
    assert result is not None  # no cut-off
    return result


def min_cost_flow_below(
    num_nodes: int, edges: Sequence[Edge], supply: Sequence[int], cutoff: int
) -> FlowResult | None:
    """:func:`min_cost_flow_phases`'s flow if it costs less than ``cutoff``, else None, often found early.

    Shortest-path lengths never decrease from one phase to the next, so once a phase's length
    is known, what is routed so far plus every unit still to route at that length is a lower
    bound on the final cost (after a phase, the next length is at least one more: costs are
    integers); when it reaches ``cutoff`` the solve stops (issue 29: the
    cooperative-sticky count-shift search asks for many flows it keeps only if strictly
    cheaper than the assignment it has).  A flow below ``cutoff`` is exactly
    :func:`min_cost_flow_phases`'s, phase for phase.  An infeasible problem raises
    :class:`InfeasibleFlow` unless the bound reaches ``cutoff`` first (then None: it has no flow
    below ``cutoff`` either).
    """
    return _phases(_Problem(num_nodes, edges, supply), cutoff)


TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up (issue 29)

if TYPE_CHECKING:
    from typing import NamedTuple

    class _Problem(NamedTuple):
        """A flow problem as the solvers' callers give it (:func:`min_cost_flow_phases`'s arguments)."""

        num_nodes: int
        edges: Sequence[Edge]
        supply: Sequence[int]

else:  # the same tuple, from collections (typing's NamedTuple is typing's: imported only to type-check)
    _Problem = namedtuple("_Problem", "num_nodes edges supply")


def _phases(problem: _Problem, cutoff: int | None) -> FlowResult | None:
    """The primal-dual phases of :func:`min_cost_flow_phases`, stopped (None) once ``cutoff`` is out of reach.

    Solved by the compiled core when it is installed (issue 29: the same algorithm, arc for arc, so
    the same flow on every edge, about 16 times faster a flow), else by :func:`_phases_in_python`.  The
    core answers only problems of plain ints within its 64-bit bound (capacities, supplies and the
    costs' sum below 2**60, see ``_flowcore.c``) and hands back the rest, so exact-scaled traffic
    costs and every input the Python rejects (with its own error) are solved or refused here, in
    Python.  When a caller has replaced :func:`_dijkstra` or :func:`_blocking_flows` (a test that
    counts their calls), the Python runs, so the replacement sees every call.
    """
    if _core is not None and _dijkstra is _DIJKSTRA and _blocking_flows is _BLOCKING_FLOWS:
        status, a, b = _core.solve(problem.num_nodes, problem.edges, problem.supply, cutoff)
        if status == _core.SOLVED:
            assert isinstance(a, int) and isinstance(b, list)
            return FlowResult(cost=a, flow=b)
        if status == _core.CUT_OFF:
            return None
        if status == _core.INFEASIBLE:
            raise InfeasibleFlow(f"only {a} of {b} units can be routed")
    return _phases_in_python(_Residual(*problem), cutoff)


def _phases_in_python(g: _Residual, cutoff: int | None) -> FlowResult | None:
    """:func:`_phases` in Python: the oracle of the compiled core, and the solver where it is absent."""
    pot = [0] * g.n
    need, t = g.need, g.t
    sent = spent = 0
    while sent < need:
        dist, dt = _dijkstra(g, pot)
        if dt < 0:
            raise InfeasibleFlow(f"only {sent} of {need} units can be routed")
        # Settled nodes (closer than the sink) move by their distance, the rest by the sink's:
        # every residual arc keeps a non-negative reduced cost, shortest paths get zero.
        pot = [p + (d if d < dt else dt) for p, d in zip(pot, dist, strict=True)]
        # The source's potential stays 0, so every unit of this phase costs pot[t], and later ones no less.
        if cutoff is not None and spent + (need - sent) * pot[t] >= cutoff:
            return None
        pushed = _blocking_flows(g, pot, need - sent)
        sent += pushed
        spent += pushed * pot[t]
        # No path of this length is left and lengths are integers: the next phase's units cost one more.
        if cutoff is not None and sent < need and spent + (need - sent) * (pot[t] + 1) >= cutoff:
            return None
    return None if cutoff is not None and spent >= cutoff else g.result(spent)  # nothing to route: cost 0


def _dijkstra(g: _Residual, pot: list[int]) -> tuple[list[int], int]:
    """Reduced distances from the source, stopped once the sink is settled; the sink's is -1 if unreachable.

    Reduced costs are small non-negative integers, so nodes wait in one list
    per distance (a bucket queue) and the heap holds only distinct distances.
    """
    head, cap, cost, adj, t = g.head, g.cap, g.cost, g.adj, g.t
    unreached = g.unreached
    dist = [unreached] * g.n
    dist[g.s] = 0
    buckets = {0: [g.s]}
    keys = [0]
    heappush, heappop = heapq.heappush, heapq.heappop
    while keys:
        d = heappop(keys)
        for u in buckets.pop(d):
            if dist[u] != d:
                continue  # reached again at a shorter distance
            if u == t:
                return dist, d
            pu = pot[u] + d
            for e in adj[u]:
                if cap[e]:
                    v = head[e]
                    nd = pu + cost[e] - pot[v]
                    if nd < dist[v]:
                        dist[v] = nd
                        bucket = buckets.get(nd)
                        if bucket is None:
                            buckets[nd] = [v]
                            heappush(keys, nd)
                        else:
                            bucket.append(v)
    return dist, -1


def _blocking_flows(g: _Residual, pot: list[int], limit: int) -> int:
    """Dinic max flow from source to sink on the residual arcs of zero reduced cost, up to ``limit``.

    Levels count arcs *to the sink* (a backward BFS), so the depth-first search
    only enters nodes that lie on a shortest path and meets dead ends only
    where this round saturated an arc.  It still takes, in arc order, the
    same paths as a search with levels counted from the source.
    """
    n, s, t, head, cap, cost, adj = g.n, g.s, g.t, g.head, g.cap, g.cost, g.adj
    total = 0
    while total < limit:
        level = [-1] * n
        level[t] = 0
        queue = [t]
        for v in queue:
            if level[s] >= 0:
                break
            lv = level[v] + 1
            pv = pot[v]
            for e in adj[v]:
                if cap[e ^ 1]:  # the arc head[e] -> v has room
                    u = head[e]
                    if level[u] < 0 and pot[u] - cost[e] == pv:
                        level[u] = lv
                        queue.append(u)
        if level[s] < 0:
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
                u = head[path[-1]] if path else s
                continue
            arcs = adj[u]
            i = it[u]
            m = len(arcs)
            lu = level[u] - 1
            pu = pot[u]
            while i < m:
                e = arcs[i]
                if cap[e]:
                    v = head[e]
                    if level[v] == lu and cost[e] + pu == pot[v]:
                        break
                i += 1
            it[u] = i
            if i < m:
                path.append(arcs[i])
                u = head[arcs[i]]
                continue
            level[u] = -1  # dead end: retreat
            if not path:
                break
            e = path.pop()
            u = head[e ^ 1]
            it[u] += 1
    return total


# The pieces :func:`_phases` runs in C, as defined here (a replaced one sends it to the Python).
_DIJKSTRA, _BLOCKING_FLOWS = _dijkstra, _blocking_flows
