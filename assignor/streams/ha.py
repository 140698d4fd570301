"""Kafka's High-Availability task assignor (the default), rack-aware as in KIP-925.

Order, as in Kafka: stateful actives round-robin over sorted tasks and
clients, balanced by load; rack optimisation of those actives; standbys
(spread over tags, or racks when no tags are set), balanced, then placed
exactly: the fewest standby cross-rack partitions that keep every client's
standby count and the spread; movements to caught-up clients with warm-ups;
stateless actives to the least active-loaded clients, rack-optimised last.
"""

from __future__ import annotations

import heapq

from ..model import STATELESS_COSTS, StreamsApp
from .balance import balance
from .movement import Lags, move_tasks
from .rack import optimise_active
from .standby import allowed_movement, assign_standbys, optimise_standbys, spread_values
from .tasks import State, TaskModel


def previous_owners(model: TaskModel) -> list[list[int]]:
    """Clients that ran each task as active last time (for ``sticky_to_previous``)."""
    out: list[list[int]] = [[] for _ in model.tasks]
    for c, client in enumerate(model.clients):
        for tid in client.previous_active:
            t = model.index.get(tid)
            if t is not None:
                out[t].append(c)
    return out


def assign(model: TaskModel, app: StreamsApp, rack_aware: bool) -> tuple[State, bool]:
    """Run the assignor; returns the final state and whether a probing rebalance is needed."""
    state = State(model)
    ra = app.rack_aware
    traffic, non_overlap = ra.costs("high-availability")
    previous = previous_owners(model) if ra.sticky_to_previous else None
    stateful = [t for t in range(model.num_tasks) if model.stateful[t]]
    stateless = [t for t in range(model.num_tasks) if not model.stateful[t]]
    n = model.num_clients
    for k, t in enumerate(stateful):
        state.active[k % n].add(t)
    balance(state, "active")
    if rack_aware:
        optimise_active(model, state, stateful, ra.strategy, traffic, non_overlap, previous)
    values = spread_values(model, app)
    if app.num_standby_replicas > 0:
        assign_standbys(model, state, app.num_standby_replicas, values, stateful)
        tags = [c.tags for c in model.clients] if app.rack_aware_assignment_tags else None
        balance(state, "standby", lambda s, d: allowed_movement(values, s, d, tags))
        if rack_aware:
            optimise_standbys(model, state, traffic, non_overlap, values, cross_first=True)
    moves = move_tasks(model, state, Lags(model, app), app.max_warmup_replicas)
    heap = [(state.active_load(c), c) for c in range(n)]
    heapq.heapify(heap)
    for t in stateless:
        _, c = heapq.heappop(heap)
        state.active[c].add(t)
        heapq.heappush(heap, (state.active_load(c), c))
    if rack_aware:
        optimise_active(model, state, stateless, ra.strategy, *STATELESS_COSTS, previous)
    return state, moves > 0
