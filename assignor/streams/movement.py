"""High-availability task movements: keep tasks on caught-up clients and warm up their targets.

As Kafka's ``TaskMovement``: an active (then a standby) whose desired client
is not caught up, while another client is more caught up, moves to a
caught-up client (one holding a standby first), and the desired client gets a
warm-up replica while ``max_warmup_replicas`` allow.  Any movement asks for a
probing rebalance.
"""

from __future__ import annotations

from collections.abc import Container

from ..model import StreamsApp
from .tasks import State, TaskModel

UNKNOWN = float("inf")


class Lags:
    """Per-task lag views: caught-up clients and the clients ordered by lag.

    Every question costs about the clients that report a lag for the task
    (and the few that hold it), never all clients: Kafka's movements ask one
    per task and client moved, so a scan of every client each time made the
    movements quadratic (20,000 tasks, 5,000 clients: 47 s).
    """

    def __init__(self, model: TaskModel, app: StreamsApp) -> None:
        self.lag: dict[tuple[int, int], int] = {}
        self.caught_up: dict[int, list[int]] = {}
        self.ranked: dict[int, list[tuple[int, int]]] = {}  # per task: (lag, client), smallest first
        self.acceptable = app.acceptable_recovery_lag
        for c, client in enumerate(model.clients):
            for tid, lag in client.task_lags.items():
                t = model.index.get(tid)
                if t is None or not model.stateful[t]:
                    continue
                self.lag[(c, t)] = lag
                self.ranked.setdefault(t, []).append((lag, c))
                if lag <= app.acceptable_recovery_lag:
                    self.caught_up.setdefault(t, []).append(c)
        for ranked in self.ranked.values():
            ranked.sort()

    def of(self, c: int, t: int) -> float:
        return self.lag.get((c, t), UNKNOWN)

    def should_move(self, c: int, t: int) -> bool:
        """Kafka's "not caught up here, and another client is more caught up"."""
        lag = self.of(c, t)
        if lag <= self.acceptable:
            return False  # caught up here (an unknown lag is infinite: never caught up)
        ranked = self.ranked.get(t)
        return ranked is not None and ranked[0][0] < lag

    def more_caught_up(self, t: int, dest: int, holders: Container[int]) -> int | None:
        """Kafka's ``mostCaughtUpEligibleClient``: the first client not in ``holders`` ordered ahead of ``dest``.

        Clients are ordered by (lag, client), unknown lags last; one ordered
        ahead may be no more caught up than ``dest`` (equal lags), as in Kafka.
        The clients with a lag come first, in ``ranked`` order; when ``dest``'s
        own lag is unknown, the clients without one that precede it follow, by
        number, and the first that qualifies ends the search.
        """
        limit = (self.of(dest, t), dest)
        for entry in self.ranked.get(t, ()):
            if entry >= limit:
                return None  # so is every later one, and every client of unknown lag
            if entry[1] not in holders:
                return entry[1]
        if limit[0] != UNKNOWN:
            return None
        lag = self.lag
        return next((c for c in range(dest) if (c, t) not in lag and c not in holders), None)

    def most_caught_up(self, t: int, exclude: int) -> int | None:
        """The client of smallest (lag, client) for ``t`` other than ``exclude``, of those with a lag."""
        return next((c for _lag, c in self.ranked.get(t, ()) if c != exclude), None)


class _Holding:
    """The clients holding task ``t`` (active, standby or warm-up), asked one client at a time."""

    __slots__ = ("state", "t")

    def __init__(self, state: State, t: int) -> None:
        self.state = state
        self.t = t

    def __contains__(self, c: object) -> bool:
        return isinstance(c, int) and self.state.holds(c, self.t)


def java_poll_order(items: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """``items`` (caught-up count, task, client) in the order Kafka's movement queue hands them out.

    Kafka offers its movements, client by client and task by task, to a
    ``java.util.PriorityQueue`` ordered by (caught-up count, task) only, so two
    movements of one task to different clients tie, and the queue's binary heap
    decides which comes first: not the order they were offered in, nor the
    clients' order.  Which one comes first decides who gets the last warm-up
    (found by the Streams oracle test: a standby's warm-up on another client
    than Kafka's).  This is that heap: a sift up stops at a parent that is not
    greater; a sift down takes the right child only when it is strictly smaller
    than the left, and stops when the moved item is not greater than it.
    """
    heap: list[tuple[int, int, int]] = []
    for item in items:  # offer: sift up
        k = len(heap)
        heap.append(item)
        while k > 0:
            parent = (k - 1) >> 1
            if item[:2] >= heap[parent][:2]:
                break
            heap[k] = heap[parent]
            k = parent
        heap[k] = item
    out = []
    while heap:  # poll: the root, then the last item sifted down from the root
        out.append(heap[0])
        last = heap.pop()
        n = len(heap)
        if not n:
            break
        k = 0
        while k < n >> 1:
            child = 2 * k + 1
            if child + 1 < n and heap[child][:2] > heap[child + 1][:2]:
                child += 1
            if last[:2] <= heap[child][:2]:
                break
            heap[k] = heap[child]
            k = child
        heap[k] = last
    return out


def _least_loaded(state: State, clients: list[int]) -> int | None:
    return min(clients, key=lambda c: (state.load(c), c)) if clients else None


def move_tasks(model: TaskModel, state: State, lags: Lags, max_warmups: int) -> int:
    """Apply active then standby movements; returns how many were needed."""
    remaining = max_warmups
    active_moves = java_poll_order(
        [
            (len(lags.caught_up.get(t, ())), t, c)
            for c in range(model.num_clients)
            for t in sorted(state.active[c])
            if model.stateful[t] and lags.should_move(c, t)
        ]
    )
    for _n, t, dest in active_moves:
        caught = lags.caught_up.get(t, [])
        src = _least_loaded(state, [c for c in caught if t in state.standby[c]])
        if src is not None:
            _swap(state, t, src, dest)
            continue
        src = _least_loaded(state, [c for c in caught if not state.holds(c, t)])
        if src is None:
            src = lags.most_caught_up(t, dest)
            if src is None:
                continue
            if t in state.standby[src]:
                _swap(state, t, src, dest)
                continue
        state.active[dest].discard(t)
        state.active[src].add(t)
        state.warmup[src].discard(t)
        if remaining > 0:
            remaining -= 1
            state.warmup[dest].add(t)
    standby_moves = java_poll_order(
        [
            (len(lags.caught_up.get(t, ())), t, c)
            for c in range(model.num_clients)
            for t in sorted(state.standby[c])
            if lags.should_move(c, t)
        ]
    )
    needed = 0
    for _n, t, dest in standby_moves:
        src = _least_loaded(state, [c for c in lags.caught_up.get(t, []) if not state.holds(c, t)])
        if src is None:
            src = lags.more_caught_up(t, dest, _Holding(state, t))
        if src is None:
            continue  # no client more caught up can take it
        state.standby[dest].discard(t)
        state.standby[src].add(t)
        if remaining > 0:
            remaining -= 1
            state.warmup[dest].add(t)
        needed += 1
    return len(active_moves) + needed


def _swap(state: State, t: int, src: int, dest: int) -> None:
    """The caught-up standby on ``src`` becomes the active; ``dest`` keeps a standby."""
    state.standby[src].discard(t)
    state.active[src].add(t)
    state.active[dest].discard(t)
    state.standby[dest].add(t)
