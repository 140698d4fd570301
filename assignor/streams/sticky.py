"""Kafka's legacy StickyTaskAssignor, with the KIP-925 rack optimisation of its result.

Actives stay on their previous owner while it is under quota, then go to a
previous standby owner, then to the least-loaded client; standbys prefer
previous owners unless that overloads them.  Rack optimisation uses Kafka's
sticky weights (traffic 1, non-overlap 10: stickiness first).  Kafka's
task-pair co-location heuristic is not reproduced.  No warm-ups, no probing.
"""

from __future__ import annotations

import heapq

from ..model import STATELESS_COSTS, StreamsApp
from .ha import previous_owners
from .rack import optimise_active
from .standby import optimise_standbys
from .tasks import State, TaskModel


class _Sticky:
    """Kafka's client choice (least loaded, then previous owners), with the least loaded client in a heap.

    Kafka scans every client for each task; the heap gives the same client
    (ties as in that scan: an empty client first by order, else lowest load,
    then most threads, then order) in logarithmic time.
    """

    def __init__(self, model: TaskModel, state: State) -> None:
        self.model = model
        self.state = state
        self.prev_active: dict[int, int] = {}
        self.prev_standby: dict[int, list[int]] = {}
        for c, client in enumerate(model.clients):
            for tid in client.previous_active:
                if tid in model.index:
                    self.prev_active[model.index[tid]] = c
            for tid in client.previous_standby:
                if tid in model.index:
                    self.prev_standby.setdefault(model.index[tid], []).append(c)
        # (count << shift) // threads orders loads exactly (see key) without lcm(threads), which grows with
        # every distinct thread count: 16,000 distinct int32 counts made it and its quotients 677 MB
        self.shift = 2 * max(model.threads).bit_length()
        self.heap = [self.key(c) for c in range(model.num_clients)]
        heapq.heapify(self.heap)

    def count(self, c: int) -> int:
        s = self.state
        return len(s.active[c]) + len(s.standby[c])

    def key(self, c: int) -> tuple[int, int, int]:
        """(load, then more threads, then order): the load ``n / threads`` as ``(n << shift) // threads``.

        That floor orders loads exactly as the fractions do, equal ones equal:
        it never reverses an order, and two different loads ``a/x != b/y``
        differ by at least ``1 / (x * y) > 2**-shift`` (threads below
        ``2**(shift / 2)``), so their scaled values differ by more than one and
        their floors differ.  An integer of a few machine words, whatever the
        threads.
        """
        n = self.count(c)
        th = self.model.threads[c]
        return ((n << self.shift) // th, -th if n else 0, c)

    def add(self, c: int, t: int, standby: bool = False) -> None:
        (self.state.standby if standby else self.state.active)[c].add(t)
        heapq.heappush(self.heap, self.key(c))

    def _top(self) -> tuple[int, int, int]:
        heap = self.heap
        while heap[0] != self.key(heap[0][2]):
            heapq.heappop(heap)  # stale: the client's load changed since
        return heap[0]

    def least_loaded_except(self, t: int) -> int | None:
        """The least loaded of all clients that do not hold task ``t``."""
        popped = []
        chosen = None
        while self.heap:
            entry = self._top()
            if not self.state.holds(entry[2], t):
                chosen = entry[2]
                break
            popped.append(heapq.heappop(self.heap))
        for entry in popped:
            heapq.heappush(self.heap, entry)
        return chosen

    def more_capacity(self, a: int, b: int) -> bool:
        """Kafka's ``hasMoreAvailableCapacityThan``: lower load, then more threads."""
        th = self.model.threads
        la, lb = self.count(a) * th[b], self.count(b) * th[a]
        return la < lb or (la == lb and th[a] > th[b])

    def least_loaded(self, clients: list[int]) -> int | None:
        best = None
        for c in clients:
            if self.count(c) == 0:
                return c
            if best is None or self.more_capacity(c, best):
                best = c
        return best

    def should_balance(self, c: int) -> bool:
        if self.count(c) < self.model.threads[c]:
            return False
        top = self._top()[2]
        return top != c and self.more_capacity(top, c)

    def find(self, t: int) -> int:
        """Kafka's client for ``t`` among the clients not holding it: its previous owner unless overloaded."""

        def free(c: int) -> bool:
            return not self.state.holds(c, t)

        prev = self.prev_active.get(t)
        standby_prev = self.least_loaded([c for c in self.prev_standby.get(t, []) if free(c)])
        previous = prev if prev is not None and free(prev) else standby_prev
        if previous is None or (
            self.should_balance(previous) and (standby_prev is None or self.should_balance(standby_prev))
        ):
            best = self.least_loaded_except(t)
            assert best is not None  # callers leave at least one client free
            return best
        if self.should_balance(previous):
            return standby_prev  # type: ignore[return-value]  # not None: checked above
        return previous


def assign(model: TaskModel, app: StreamsApp, rack_aware: bool) -> tuple[State, bool]:
    state = State(model)
    sticky = _Sticky(model, state)
    n = model.num_clients
    per_thread = model.num_tasks // sum(model.threads)
    assigned: set[int] = set()
    for t, c in sorted(sticky.prev_active.items()):
        if len(state.active[c]) < model.threads[c] * per_thread:
            sticky.add(c, t)
            assigned.add(t)
    for t in range(model.num_tasks):
        if t in assigned:
            continue
        for c in sorted(sticky.prev_standby.get(t, [])):
            if len(state.active[c]) < model.threads[c] * per_thread:
                sticky.add(c, t)
                assigned.add(t)
                break
    for t in range(model.num_tasks):
        if t not in assigned:
            sticky.add(sticky.find(t), t)
    ra = app.rack_aware
    traffic, non_overlap = ra.costs("sticky")
    previous = previous_owners(model) if ra.sticky_to_previous else None
    if rack_aware:  # keeps every client's load, so the heap stays valid
        stateful = [t for t in range(model.num_tasks) if model.stateful[t]]
        stateless = [t for t in range(model.num_tasks) if not model.stateful[t]]
        optimise_active(model, state, stateful, ra.strategy, traffic, non_overlap, previous)
        optimise_active(model, state, stateless, ra.strategy, *STATELESS_COSTS, previous)
    for t in range(model.num_tasks):
        if not model.stateful[t]:
            continue
        for k in range(app.num_standby_replicas):
            if k + 1 >= n:
                break  # every client holds the task already
            sticky.add(sticky.find(t), t, standby=True)
    if rack_aware and app.num_standby_replicas > 0:
        optimise_standbys(model, state, traffic, non_overlap, [])
    return state, False
