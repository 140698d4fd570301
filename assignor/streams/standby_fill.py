"""A group's arrivals placed on its clients: the last step of the exact standby placement.

:mod:`rackplan.assignor.streams.standby_flow` sends copies of tasks into a
group of interchangeable clients (one value and rack, or a rack's pool) and
fixes how many each client takes; here they are dealt so that no client takes
a task twice, nor its own active task, nor a task it is banned from: greedy
first, an exact max flow when the greedy falls short, None when no dealing
exists (the flow then expands the group).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

from ..flow import FlowGraph, InfeasibleFlow

#: the most (task, client) pairs the exact dealing's max flow may have; a larger group is dealt by swaps
MAX_PAIRS = 1_000_000
#: placed pairs a dealing's swaps may examine, per arrival and client of the group
SWAP_WORK = 16


def fill_group(
    arrivals: list[tuple[int, int]],
    quotas: list[tuple[int, int]],
    owner: Sequence[int],
    holds: list[set[int]],
    banned: dict[int, int] | None = None,
) -> list[tuple[int, int]] | None:
    """(task, client) pairs placing ``arrivals`` (task, copies) on clients with ``quotas`` (client, units).

    A client takes a task at most once, never its own active task, nor task
    ``t`` when it is ``banned[t]``.  Greedy first (largest copies first, each
    to the clients with most room left); when that falls short, an exact max
    flow decides, on at most :data:`MAX_PAIRS` pairs.  A pool's dealing
    (``banned`` given) repairs the greedy's shortfalls by swaps first
    (:func:`_swap_in`), as does a larger group's instead of the max flow:
    a pool may hold thousands of clients and tasks, and the max flow has an
    edge per pair.  None when no dealing is found (the caller expands the group).
    """
    allowed = _allowed(owner, holds, banned or {})
    out = _deal(arrivals, quotas, allowed, repair=banned is not None)
    if out is None and len(arrivals) * len(quotas) <= MAX_PAIRS:
        return fill_exactly(arrivals, quotas, owner, holds, banned)
    if out is None and banned is None:
        out = _deal(arrivals, quotas, allowed, repair=True)
    return out


def _allowed(
    owner: Sequence[int], holds: list[set[int]], banned: dict[int, int]
) -> Callable[[int, int], bool]:
    def allowed(t: int, c: int) -> bool:
        return c != owner[t] and t not in holds[c] and banned.get(t) != c

    return allowed


def _deal(
    arrivals: list[tuple[int, int]],
    quotas: list[tuple[int, int]],
    allowed: Callable[[int, int], bool],
    repair: bool,
) -> list[tuple[int, int]] | None:
    """The greedy dealing; a shortfall is repaired by swaps when ``repair``, else (or when that fails) None."""
    heap = [(-q, c) for c, q in quotas]
    heapq.heapify(heap)
    out: list[tuple[int, int]] = []
    on: dict[int, set[int]] = {}  # the clients each task was dealt here
    work = [SWAP_WORK * (len(arrivals) + len(quotas))]
    for t, copies in sorted(arrivals, key=lambda x: (-x[1], x[0])):
        skipped: list[tuple[int, int]] = []
        got = 0
        mine = on.setdefault(t, set())
        while got < copies and heap:
            neg, c = heapq.heappop(heap)
            if not allowed(t, c):
                skipped.append((neg, c))
                continue
            out.append((t, c))
            mine.add(c)
            got += 1
            if neg < -1:
                skipped.append((neg + 1, c))
        for item in skipped:
            heapq.heappush(heap, item)
        while got < copies and repair and _swap_in(t, heap, out, on, allowed, work):
            got += 1
        if got < copies:
            return None
    return out


def _swap_in(
    t: int,
    heap: list[tuple[int, int]],
    out: list[tuple[int, int]],
    on: dict[int, set[int]],
    allowed: Callable[[int, int], bool],
    work: list[int],
) -> bool:
    """One more copy of ``t``, which no client with room left may take: a dealt task makes way.

    Some ``(t2, c2)`` dealt already, with ``c2`` allowed for ``t`` and a client
    ``r`` with room allowed for ``t2``: ``t2`` moves to ``r`` and ``t`` takes
    ``c2`` (an augmenting path of length three).  Examines at most ``work[0]``
    pairs (and heap entries rebuilt) over the whole dealing; False when none
    is found within that.
    """
    if not out:
        return False
    for item in heap:
        r = item[1]
        for i in range(len(out) - 1, -1, -1):
            work[0] -= 1
            if work[0] < 0:
                return False
            t2, c2 = out[i]
            if t2 == t or c2 in on[t] or r in on[t2] or not allowed(t, c2) or not allowed(t2, r):
                continue
            out[i] = (t2, r)
            on[t2].discard(c2)
            on[t2].add(r)
            out.append((t, c2))
            on[t].add(c2)
            work[0] -= len(heap)  # the heap is rebuilt: that counts too
            heap.remove(item)
            if item[0] < -1:
                heap.append((item[0] + 1, r))
            heapq.heapify(heap)
            return True
    return False


def fill_exactly(
    arrivals: list[tuple[int, int]],
    quotas: list[tuple[int, int]],
    owner: Sequence[int],
    holds: list[set[int]],
    banned: dict[int, int] | None = None,
) -> list[tuple[int, int]] | None:
    """:func:`fill_group` by max flow (tasks x clients, capacity one); None when infeasible."""
    banned = banned or {}
    graph = FlowGraph()
    tasks = [graph.add_node(copies) for _t, copies in arrivals]
    clients = [graph.add_node(-q) for _c, q in quotas]
    for i, (t, _copies) in enumerate(arrivals):
        for j, (c, _q) in enumerate(quotas):
            if c != owner[t] and t not in holds[c] and banned.get(t) != c:
                graph.add_edge(tasks[i], clients[j], 1, 0)
    try:
        flow = graph.solve().flow
    except InfeasibleFlow:
        return None
    n_t = len(tasks)
    return [
        (arrivals[u][0], quotas[v - n_t][0])
        for (u, v, _cap, _w), f in zip(graph.edges, flow, strict=True)
        if f
    ]
