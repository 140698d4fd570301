"""Kafka's ``balanceTasksOverThreads``, in Kafka's order: the same balanced baseline as Kafka.

Kafka sweeps every (source, destination) pair of clients in process order
and, while a move lowers the skew, moves the source's tasks in task order
(skipping those the destination holds), until a sweep moves nothing. A move
from ``s`` to ``d`` lowers the skew exactly when ``(n_s - 1)/c_s >= (n_d +
1)/c_d`` (n: assigned tasks, active and standby; c: threads). Which fixed
point is reached depends on that order, and the rack optimisation starts
from it (its non-overlap cost counts moves away from it), so the order is
kept: on apps where rack awareness is on in both, rackplan's baseline is
Kafka's (checked against Kafka's own assignor, ``tests/assignor/test_streams_vs_kafka_java.py``).

Cost: clients are kept sorted by destination key ``(n_d + 1)/c_d``. A sweep
visits each source once and skips it at once when the lightest other client
cannot take from it; otherwise it walks, in process order, only the clients
light enough at the start of its turn (no other can become light enough
while the source only loses tasks), and stops when the lightest can no
longer take. Each move lowers sum(n^2/c), so this terminates.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from .tasks import State


def balance(state: State, kind: str, allowed: Callable[[int, int], bool] | None = None) -> int:
    """Balance ``kind`` ("active" or "standby") tasks by total assigned load; returns the moves made."""
    threads = state.model.threads
    n = len(threads)
    pool = state.active if kind == "active" else state.standby
    count = [len(state.active[c]) + len(state.standby[c]) + len(state.warmup[c]) for c in range(n)]
    # Every client by destination key (n_d + 1) / c_d: the lighter, the earlier.
    order = sorted(((count[c] + 1) / threads[c], c) for c in range(n))

    def rekey(c: int, delta: int) -> None:
        del order[bisect.bisect_left(order, ((count[c] + 1) / threads[c], c))]
        count[c] += delta
        bisect.insort(order, ((count[c] + 1) / threads[c], c))

    def should_move(s: int, d: int) -> bool:
        return (count[s] - 1) * threads[d] >= (count[d] + 1) * threads[s]

    def any_taker(s: int) -> bool:
        """Some client can take a task from ``s``: the lightest one other than ``s`` can."""
        d = order[0][1] if order[0][1] != s else (order[1][1] if n > 1 else s)
        return d != s and should_move(s, d)

    moves = 0
    keep = True
    while keep:
        keep = False
        for s in range(n):
            if not any_taker(s):
                continue
            # Only clients light enough now can take from s during its turn (s only gets lighter).
            limit = bisect.bisect_right(order, ((count[s] - 1) / threads[s], n))
            for d in sorted(c for _, c in order[:limit]):
                if not any_taker(s):
                    break
                if d == s or not should_move(s, d) or (allowed is not None and not allowed(s, d)):
                    continue
                for t in sorted(pool[s]):
                    if not should_move(s, d):
                        break
                    if state.holds(d, t):
                        continue
                    pool[s].discard(t)
                    pool[d].add(t)
                    rekey(s, -1)
                    rekey(d, +1)
                    moves += 1
                    keep = True
    return moves
