"""Standby placement with several tag keys, exactly: an integer program, solved within a counted budget.

With one key (a tag, or the rack) the spread rule is one covering constraint
and one min-cost flow solves the placement (:mod:`rackplan.assignor.streams.standby_flow`).
With several keys each key is its own covering constraint, and they interact
through the clients: a copy on client ``c`` covers ``c``'s value of *every*
key at once.  That is not a flow (brute force found placements the flow and
the swaps miss, docs/assignors.md), so here it is written out as it is:

* ``x[t, c]`` (binary): client ``c`` holds a standby of task ``t``; never the
  task's active client;
* every task keeps its number of standbys, every client its standby count
  (the baseline's: that is the whole balance promise for standbys);
* per task and key ``j``, the values the task's copies cover (its active's
  included, clients without a value covering none) are at least as many as
  the baseline's: ``z[t, j, v] <= sum of x[t, c]`` over clients with value
  ``v``, ``z <= 1``, and ``sum_v z[t, j, v]`` at least the baseline's count
  less the active's own value (``z`` needs no integrality: with ``x``
  integral its best value is 0 or 1);
* cost: ``a * cross + b * moved``, the same weights as the flow.

HiGHS starts from the heuristic's placement (always feasible), runs single
threaded with a fixed seed and no clock, and may explore
``NODE_WORK // nonzeros`` branch-and-bound nodes; models above
``MAX_NONZEROS`` are not run.  So the same input gives the same placement on
any machine, the result is never worse than the start, and it is proven
optimal when HiGHS says so within the budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..flow.highs import Program
from ..record import record
from .tasks import TaskModel

NODE_WORK = 1_000_000
"""The work budget: branch-and-bound nodes times the model's nonzeros (counted, never timed).

Ten nodes at the size limit, thousands for small apps.  On the bench's random
two-key apps (6-60 clients, 20-400 tasks) HiGHS proved every one optimal,
mostly at the root: its LP relaxation is nearly tight here, unlike the
big-M rows of the consumer balance program.
"""

MAX_NONZEROS = 100_000
"""Above this size the program is not run: the heuristic's placement stands, not proven.

The largest of those bench apps (55 clients x 286 tasks, about 60,000
nonzeros) took 1.3 s of CPU; docs/performance.md has the figures.
"""


@record(frozen=True)
class Placement:
    """Standbys per client (task ids), and whether the placement is proven optimal."""

    standby: list[set[int]]
    optimal: bool


def distinct_per_key(values: Sequence[tuple[str | None, ...]], clients: Sequence[int]) -> list[int]:
    """Per key, the distinct values ``clients`` have (clients without a value count for none)."""
    keys = len(values[0]) if values else 0
    return [len({values[c][j] for c in clients if values[c][j] is not None}) for j in range(keys)]


def place(
    model: TaskModel,
    owner: Sequence[int],
    baseline: Mapping[int, Sequence[int]],
    start: Sequence[set[int]],
    values: Sequence[tuple[str | None, ...]],
    a: int,
    b: int,
) -> Placement:
    """The cheapest placement keeping the counts and every key's coverage, or ``start`` if none is found cheaper.

    ``baseline[t]`` are the clients holding task ``t``'s standbys in the
    baseline (the counts and each key's coverage floor come from it);
    ``start`` is a placement meeting the rule (the heuristic's).
    """
    n = model.num_clients
    tasks = sorted(baseline)
    count = [0] * n
    for t in tasks:
        for c in baseline[t]:
            count[c] += 1
    # Every x column sits in two rows (its task's, its client's): refuse a program that is too large
    # before building it (a 10,000-task app would otherwise build millions of columns first).
    holding = [c for c in range(n) if count[c]]
    columns = len(tasks) * len(holding) - sum(1 for t in tasks if count[owner[t]])
    if 2 * columns > MAX_NONZEROS:
        return Placement([set(s) for s in start], False)
    prog = Program()
    x: dict[tuple[int, int], int] = {}
    for t in tasks:
        for c in range(n):
            if c != owner[t] and count[c]:
                cost = a * model.standby_cross[t][model.group_of[c]] + (0 if c in baseline[t] else b)
                x[(t, c)] = prog.column(cost, 0, 1, True)
    for t in tasks:
        k = len(baseline[t])
        prog.row(k, k, [(x[(t, c)], 1.0) for c in range(n) if (t, c) in x])
    for c in range(n):
        if count[c]:
            prog.row(count[c], count[c], [(x[(t, c)], 1.0) for t in tasks if (t, c) in x])
    keys = len(values[0]) if values else 0
    covers: list[tuple[int, list[int]]] = []  # (z column, its x columns): for the start vector
    for t in tasks:
        need = distinct_per_key(values, [owner[t], *baseline[t]])
        for j in range(keys):
            own = values[owner[t]][j]
            want = need[j] - (own is not None)
            if want <= 0:
                continue
            terms: list[tuple[int, float]] = []
            for v in sorted({values[c][j] for c in range(n) if values[c][j] not in (None, own)}, key=str):
                z = prog.column(0, 0, 1, False)
                on = [x[(t, c)] for c in range(n) if values[c][j] == v and (t, c) in x]
                covers.append((z, on))
                terms.append((z, 1.0))
                prog.row(-prog.inf, 0, [(z, 1.0)] + [(i, -1.0) for i in on])
            prog.row(want, prog.inf, terms)
    if prog.nonzeros > MAX_NONZEROS:
        return Placement([set(s) for s in start], False)
    first = [0.0] * len(prog.cost)
    for c, held in enumerate(start):
        for t in held:
            first[x[(t, c)]] = 1.0
    for z, on in covers:
        first[z] = min(1.0, sum(first[i] for i in on))
    found = prog.solve(first, NODE_WORK // max(prog.nonzeros, 1))
    out: list[set[int]] = [set() for _ in range(n)]
    for (t, c), j in x.items():
        if round(found.values[j]):
            out[c].add(t)
    _check(owner, baseline, values, count, out)
    return Placement(out, found.optimal)


def _check(
    owner: Sequence[int],
    baseline: Mapping[int, Sequence[int]],
    values: Sequence[tuple[str | None, ...]],
    count: Sequence[int],
    standby: Sequence[set[int]],
) -> None:
    """The solver's answer in integers: counts kept, off the active's client, every key's coverage kept."""
    if [len(s) for s in standby] != list(count):
        raise AssertionError("the standby program changed a client's standby count")
    holders: dict[int, list[int]] = {t: [] for t in baseline}
    for c, held in enumerate(standby):
        for t in held:
            if c == owner[t]:
                raise AssertionError("the standby program put a standby on its active's client")
            holders[t].append(c)
    for t, base in baseline.items():
        if len(holders[t]) != len(base):
            raise AssertionError("the standby program changed a task's number of standbys")
        now, then = (
            distinct_per_key(values, [owner[t], *holders[t]]),
            distinct_per_key(values, [owner[t], *base]),
        )
        if any(x < y for x, y in zip(now, then, strict=True)):
            raise AssertionError("the standby program covers fewer values of a key than the baseline")
