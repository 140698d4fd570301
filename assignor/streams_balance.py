"""Kafka's ``balanceTasksOverThreads``: move tasks from loaded to light clients while it lowers the skew.

Kafka tries every client pair repeatedly (quadratic in clients per sweep).
The fixed point it seeks is "no move from s to d leaves (n_s - 1)/c_s at
least (n_d + 1)/c_d", with n the assigned tasks and c the threads; two heaps
reach it directly, moving each time from the most to the least loaded pair.
Each move lowers sum(n^2/c), so this terminates; at the fixed point the
per-thread loads of any two clients differ by at most one.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from .streams_tasks import State


def balance(
    state: State, kind: str, allowed: Callable[[int, int], bool] | None = None, max_passes: int = 8
) -> int:
    """Balance ``kind`` ("active" or "standby") tasks by total assigned load; returns the moves made."""
    threads = state.model.threads
    n_clients = len(threads)
    pool = state.active if kind == "active" else state.standby
    moves = 0
    for _ in range(max_passes):
        made = 0
        count = [
            len(state.active[c]) + len(state.standby[c]) + len(state.warmup[c]) for c in range(n_clients)
        ]
        src = [(-(count[c] - 1) / threads[c], c) for c in range(n_clients)]
        dst = [((count[c] + 1) / threads[c], c) for c in range(n_clients)]
        heapq.heapify(src)
        heapq.heapify(dst)
        while src:
            key, s = heapq.heappop(src)
            if key != -(count[s] - 1) / threads[s]:
                continue
            popped: list[tuple[float, int]] = []
            moved = False
            while dst:
                dkey, d = heapq.heappop(dst)
                if dkey != (count[d] + 1) / threads[d]:
                    continue
                popped.append((dkey, d))
                if d == s:
                    continue
                if (count[s] - 1) * threads[d] < (count[d] + 1) * threads[s]:
                    break  # no lighter destination left for this source
                if allowed is not None and not allowed(s, d):
                    continue
                task = _movable(state, pool[s], d)
                if task is None:
                    continue
                pool[s].discard(task)
                pool[d].add(task)
                count[s] -= 1
                count[d] += 1
                made += 1
                moved = True
                popped.pop()
                heapq.heappush(dst, ((count[d] + 1) / threads[d], d))
                heapq.heappush(src, (-(count[d] - 1) / threads[d], d))
                break
            for item in popped:
                if item[0] == (count[item[1]] + 1) / threads[item[1]]:
                    heapq.heappush(dst, item)
            if moved:
                heapq.heappush(src, (-(count[s] - 1) / threads[s], s))
                heapq.heappush(dst, ((count[s] + 1) / threads[s], s))
        moves += made
        if not made:
            break
    return moves


def _movable(state: State, tasks: set[int], d: int) -> int | None:
    """The smallest task of the source that the destination does not hold (Kafka walks them in order)."""
    for t in sorted(tasks):
        if not state.holds(d, t):
            return t
    return None
