"""Kafka's legacy StickyTaskAssignor, with the KIP-925 rack optimisation of its result.

Actives stay on their previous owner while it is under quota, then go to a
previous standby owner, then to the least-loaded client; standbys prefer
previous owners unless that overloads them.  Rack optimisation uses Kafka's
sticky weights (traffic 1, non-overlap 10: stickiness first).  Kafka's
task-pair co-location heuristic is not reproduced.  No warm-ups, no probing.
"""

from __future__ import annotations

from .model import StreamsApp
from .streams_ha import STATELESS_COSTS, previous_owners
from .streams_rack import optimise_active
from .streams_standby import optimise_standbys
from .streams_tasks import State, TaskModel

STATEFUL_COSTS = (1, 10)


class _Sticky:
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

    def count(self, c: int) -> int:
        s = self.state
        return len(s.active[c]) + len(s.standby[c])

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
        return any(self.more_capacity(o, c) for o in range(self.model.num_clients))

    def find(self, t: int, within: list[int]) -> int:
        if len(within) == 1:
            return within[0]
        inside = set(within)
        prev = self.prev_active.get(t)
        standby_prev = self.least_loaded([c for c in self.prev_standby.get(t, []) if c in inside])
        previous = prev if prev in inside else standby_prev
        if previous is None:
            return self.least_loaded(within) or within[0]
        if self.should_balance(previous):
            if standby_prev is None or self.should_balance(standby_prev):
                return self.least_loaded(within) or within[0]
            return standby_prev
        return previous


def assign(model: TaskModel, app: StreamsApp, rack_aware: bool) -> tuple[State, bool]:
    state = State(model)
    sticky = _Sticky(model, state)
    n = model.num_clients
    per_thread = model.num_tasks // sum(model.threads)
    assigned: set[int] = set()
    for t, c in sorted(sticky.prev_active.items()):
        if len(state.active[c]) < model.threads[c] * per_thread:
            state.active[c].add(t)
            assigned.add(t)
    for t in range(model.num_tasks):
        if t in assigned:
            continue
        for c in sorted(sticky.prev_standby.get(t, [])):
            if len(state.active[c]) < model.threads[c] * per_thread:
                state.active[c].add(t)
                assigned.add(t)
                break
    everyone = list(range(n))
    for t in range(model.num_tasks):
        if t not in assigned:
            state.active[sticky.find(t, everyone)].add(t)
    ra = app.rack_aware
    traffic = ra.traffic_cost if ra.traffic_cost is not None else STATEFUL_COSTS[0]
    non_overlap = ra.non_overlap_cost if ra.non_overlap_cost is not None else STATEFUL_COSTS[1]
    previous = previous_owners(model) if ra.sticky_to_previous else None
    if rack_aware:
        stateful = [t for t in range(model.num_tasks) if model.stateful[t]]
        stateless = [t for t in range(model.num_tasks) if not model.stateful[t]]
        optimise_active(model, state, stateful, ra.strategy, traffic, non_overlap, previous)
        optimise_active(model, state, stateless, ra.strategy, *STATELESS_COSTS, previous)
    for t in range(model.num_tasks):
        if not model.stateful[t]:
            continue
        for _ in range(app.num_standby_replicas):
            free = [c for c in everyone if not state.holds(c, t)]
            if not free:
                break
            state.standby[sticky.find(t, free)].add(t)
    if rack_aware and app.num_standby_replicas > 0:
        optimise_standbys(model, state, traffic, non_overlap, [])
    return state, False
