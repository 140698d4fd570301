"""The contract's balance rule as a mixed-integer program: one component of a group, solved exactly by HiGHS.

Why a MILP.  With unequal subscriptions the contract calls an assignment
balanced when no partition can move to a member subscribed to it that holds
at least two fewer.  Written per topic group ``g`` (topics with the same
subscribers) with ``mu_g`` the smallest count among its subscribers, that is

    member ``m`` holds some partition of ``g``  =>  ``count(m) <= mu_g + 1``.

Which arcs a member may use depends on the counts being chosen, so it is an
either/or condition, not a flow constraint: the balanced assignments are the
*local* optima of the fair objective (no single improving move), and optimising
over them is not known to be polynomial.  Here the condition is exact, with one
binary ``y[m, g]`` ("``m`` holds part of ``g``") per subscription:

* ``sum_k x[m, k] <= |g| * y[m, g]`` over the partition classes ``k`` of ``g``;
* ``mu_g <= count(m)`` for every subscriber ``m`` of ``g``;
* ``count(m) - mu_g <= 1 + M_m * (1 - y[m, g])`` with ``M_m`` one less than the
  most ``m`` could ever hold (so the row is void when ``y = 0``).

``x[m, k]`` (integer) is how many partitions of class ``k`` (same topic group,
same replica-rack mask: interchangeable) member ``m`` gets, ``keep[m, k]`` how
many of its own owned partitions of that class it keeps (``keep <= x``,
``keep <= owned``; at an optimum ``keep = min(x, owned)``, so it needs no
integrality).  The objective is ``W * cross-rack - kept`` with ``W`` larger than
every possible number of kept partitions: the fewest cross-rack partitions
first, then the most kept.  Integer data and a gap below one make HiGHS's
answer the exact optimum; the caller re-checks it in integers.

HiGHS runs single-threaded with a fixed seed and no time limit, within a
work budget counted in branch-and-bound nodes and model size (``NODE_WORK``,
``MAX_NONZEROS``), so the same input gives the same
answer on any machine.  Without it the cost is exponential in the worst case:
the LP relaxation of big-M rows is weak (it lets ``y`` be a fraction), so
HiGHS mostly enumerates; the valid rows below (members of one subscription
hold ``lo`` or ``lo + 1``, bounds from them) help most when many members share
a subscription.  When the budget runs out, :func:`solve` returns the best plan
found (the start if nothing better) and HiGHS's dual bound, not proven
optimal.  docs/performance.md measures both.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from ...record import record

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up (issue 29)

if TYPE_CHECKING:
    from ...flow.highs import Program


@record(frozen=True)
class Component:
    """One connected piece of a group: members linked by shared topics, in sorted member order.

    ``class_size[k]`` partitions in class ``k``, all of topic group
    ``class_group[k]``; ``group_members[g]`` subscribe to group ``g``;
    ``cross[m][k]`` is 1 when class ``k`` is cross-rack for member ``m``
    (only for classes of groups ``m`` subscribes to); ``owned[m][k]`` how
    many partitions of class ``k`` member ``m`` owns and may keep.
    """

    class_size: Sequence[int]
    class_group: Sequence[int]
    group_members: Sequence[Sequence[int]]
    cross: Sequence[dict[int, int]]
    owned: Sequence[dict[int, int]]
    #: per member, the fewest partitions it may end with (empty: none).  A part of a component
    #: (:mod:`rackplan.assignor.consumer.rack_optimal.neighbourhood`) gets them from the members
    #: outside it: one holding ``c`` partitions of a topic ``m`` subscribes to needs ``count(m) >= c - 1``.
    floor: Sequence[int] = ()
    #: per group, the smallest count among its subscribers outside the part (``None``: all inside;
    #: empty: a whole component): a member of the part holding some of ``g`` needs ``count <= cap + 1``
    cap: Sequence[int | None] = ()


@record(frozen=True)
class Solution:
    """What HiGHS found: the best plan, whether it is proven optimal, and a proven bound.

    ``counts[m]`` per member, how many partitions of each class it gets (the
    start when nothing better was found).  ``bound`` is a lower bound on the
    objective ``W * cross-rack - kept`` (the optimum when ``optimal``), or
    ``None`` when HiGHS has none.  ``ran`` is False when the program was over
    its size limit and HiGHS did not run.
    """

    counts: list[dict[int, int]]
    optimal: bool
    bound: float | None
    ran: bool = True


def plan_value(comp: Component, counts: Sequence[dict[int, int]], weight: int) -> int:
    """``W * cross-rack + moves`` of an assignment given as counts per member and class."""
    total = 0
    for i, mine in enumerate(counts):
        for k, v in mine.items():
            total += weight * comp.cross[i][k] * v
        for k, own in comp.owned[i].items():
            total += own - min(own, mine.get(k, 0))
    return total


def value_floor(comp: Component, weight: int) -> int:
    """The value when every partition goes to its best subscriber, ignoring balance: a lower bound."""
    best = [min(comp.cross[i][k] for i in comp.group_members[g]) for k, g in enumerate(comp.class_group)]
    total = sum(weight * b * size for b, size in zip(best, comp.class_size, strict=True))
    for i, mine in enumerate(comp.owned):
        total += sum(own for k, own in mine.items() if comp.cross[i][k] > best[k])
    return total


def check_balanced(
    comp: Component, counts: Sequence[dict[int, int]], source: str = "the exact solver"
) -> None:
    """A plan's postcondition, checked in integers (see :func:`balance_violation`); ``source`` names who made it."""
    problem = balance_violation(comp, counts)
    if problem is not None:
        raise AssertionError(f"{source}'s plan: {problem}")


def balance_violation(comp: Component, counts: Sequence[dict[int, int]]) -> str | None:
    """What is wrong with a plan given as counts: a partition not placed once with a subscriber, or the balance rule.

    Checks a whole component (its ``floor`` and ``cap``, set only on parts of one, are not read).
    """
    placed = [0] * len(comp.class_size)
    for i, mine in enumerate(counts):
        for k, v in mine.items():
            if k not in comp.cross[i] or v < 0:
                return "a partition went to a member not subscribed to it"
            placed[k] += v
    if placed != list(comp.class_size):
        return "not every partition is placed once"
    total = [sum(mine.values()) for mine in counts]
    lowest = [min((total[j] for j in ms), default=0) for ms in comp.group_members]
    for i, mine in enumerate(counts):
        for k, v in mine.items():
            if v and total[i] - lowest[comp.class_group[k]] >= 2:
                return "it breaks the balance rule"
    return None


NODE_WORK = 8_000
"""The deterministic work budget: branch-and-bound nodes times the model's nonzeros.

A component's model of ``z`` nonzeros (of its constraint matrix) may explore
``NODE_WORK // z`` nodes: hundreds for the small models that tests compare
with brute force, one for the largest models HiGHS still gets
(``MAX_NONZEROS``).  Counted, never timed, so the same input gives the same
plan on any machine.  docs/performance.md measures what the budget costs and
what it leaves unproven.
"""

MAX_NONZEROS = 5_000
"""Above this size HiGHS does not run at all: the component keeps its fair plan, not proven.

The root node alone (LP, cut rounds, sub-MIP heuristics) is not bounded by
any option of HiGHS 1.16 and grows steeply: about 2.5 s of CPU at 5,400
nonzeros, 7 s at 13,000, minutes at 236,000.  A program known to be over it (each ``x[m, k]``
column is in two rows) is not built either: where every broker is its own rack each partition is
its own class, and building members x partitions columns only to refuse them cost seconds and
gigabytes (2,000 racks, unequal subscriptions).
"""


def solve(
    comp: Component,
    start: Sequence[dict[int, int]],
    budget: int = NODE_WORK,
    max_nonzeros: int = MAX_NONZEROS,
    light_root: bool = False,
) -> Solution:
    """The lexicographic optimum, or the best plan found within the node budget (see ``NODE_WORK``).

    ``start`` is a balanced assignment in the same form (the fair optimum), handed to HiGHS as its first
    incumbent.  A program over ``max_nonzeros`` is not run: the start comes back, not proven.
    ``light_root``: see :meth:`rackplan.assignor.flow.highs.Program.solve`."""
    if 2 * sum(map(len, comp.cross)) > max_nonzeros:  # each x[m, k] is in two rows: too large, unbuilt
        return Solution([dict(s) for s in start], False, None, ran=False)
    n_mem = len(comp.cross)
    n_grp = len(comp.group_members)
    group_classes: list[list[int]] = [[] for _ in range(n_grp)]
    for k, g in enumerate(comp.class_group):
        group_classes[g].append(k)
    group_size = [sum(comp.class_size[k] for k in ks) for ks in group_classes]
    member_groups: list[list[int]] = [[] for _ in range(n_mem)]
    for g, ms in enumerate(comp.group_members):
        for m in ms:
            member_groups[m].append(g)
    weight = sum(sum(o.values()) for o in comp.owned) + 1

    prog = _program()
    column, row, inf = prog.column, prog.row, prog.inf

    x: list[dict[int, int]] = [{} for _ in range(n_mem)]
    keep: list[dict[int, int]] = [{} for _ in range(n_mem)]
    y: list[dict[int, int]] = [{} for _ in range(n_mem)]
    most = [0] * n_mem
    for m in range(n_mem):
        for k, cr in sorted(comp.cross[m].items()):
            x[m][k] = column(weight * cr, 0, comp.class_size[k], True)
        for k, own in sorted(comp.owned[m].items()):
            keep[m][k] = column(-1, 0, own, False)
        for g in member_groups[m]:
            y[m][g] = column(0, 0, 1, True)
            most[m] += group_size[g]
    # Valid rows that cut what the big-M rows leave loose (see _subscription_floors).  Members
    # that also are in the same rack and own nothing are interchangeable: their counts may be
    # taken in decreasing order.
    floors = _subscription_floors(prog, member_groups, most, sum(comp.class_size))
    twins: dict[tuple[tuple[int, ...], tuple[tuple[int, int], ...], int], list[int]] = {}
    for m in range(n_mem):
        if not comp.owned[m]:
            key = (
                tuple(member_groups[m]),
                tuple(sorted(comp.cross[m].items())),
                comp.floor[m] if comp.floor else 0,
            )
            twins.setdefault(key, []).append(m)
    floor = comp.floor or [0] * n_mem
    count = [column(0, floor[m], most[m], False) for m in range(n_mem)]
    caps = comp.cap or [None] * n_grp
    mu = [
        column(0, 0, min([most[m] for m in ms] + ([] if c is None else [c]), default=0), False)
        for ms, c in zip(comp.group_members, caps, strict=True)
    ]

    holders: list[list[tuple[int, float]]] = [[] for _ in comp.class_size]
    for m in range(n_mem):
        for k, j in x[m].items():
            holders[k].append((j, 1.0))
    for k, terms in enumerate(holders):  # every partition placed
        row(comp.class_size[k], comp.class_size[k], terms)
    for m in range(n_mem):
        row(0, 0, [(count[m], 1.0)] + [(j, -1.0) for j in x[m].values()])
        for k, j in keep[m].items():
            row(-inf, 0, [(j, 1.0), (x[m][k], -1.0)])
        big = max(most[m] - 1, 0)
        for g in member_groups[m]:
            row(-inf, 0, [(x[m][k], 1.0) for k in group_classes[g]] + [(y[m][g], -float(group_size[g]))])
            row(-inf, 0, [(mu[g], 1.0), (count[m], -1.0)])
            row(-inf, 1 + big, [(count[m], 1.0), (mu[g], -1.0), (y[m][g], float(big))])

    for lo, ms in floors:
        for m in ms:
            row(0, 1, [(count[m], 1.0), (lo, -1.0)])
    for ms in twins.values():
        for a, b in itertools.pairwise(ms):
            row(0, inf, [(count[a], 1.0), (count[b], -1.0)])

    if prog.nonzeros > max_nonzeros:
        return Solution([dict(s) for s in start], False, None, ran=False)
    first = _start_vector(comp, start, list(twins.values()), x, keep, y, count, mu, len(prog.cost))
    for lo, ms in floors:
        first[lo] = min(first[count[m]] for m in ms)
    found = prog.solve(first, budget // max(prog.nonzeros, 1), light_root)
    sol = found.values
    counts = [{k: round(sol[j]) for k, j in x[m].items() if round(sol[j])} for m in range(n_mem)]
    return Solution(counts, found.optimal, found.bound)


def _subscription_floors(
    prog: Program, member_groups: list[list[int]], most: list[int], total: int
) -> list[tuple[int, list[int]]]:
    """A column ``lo`` per subscription two or more members share, with those members; ``most`` lowered.

    Members with the same subscription hold counts ``lo`` or ``lo + 1``: the most loaded one, if it
    holds anything, holds a topic every other one subscribes to.  So ``n`` such members hold at least
    ``n * lo``, which bounds ``lo`` and their counts (the big-M constants) by the component's
    ``total`` partitions.
    """
    by_sub: dict[tuple[int, ...], list[int]] = {}
    for m, groups in enumerate(member_groups):
        by_sub.setdefault(tuple(groups), []).append(m)
    floors: list[tuple[int, list[int]]] = []  # (column, members)
    for ms in by_sub.values():
        if len(ms) > 1:
            cap = min(most[ms[0]], total // len(ms))
            floors.append((prog.column(0, 0, cap, False), ms))
            for m in ms:
                most[m] = min(most[m], cap + 1)
    return floors


def _twins_in_order(start: Sequence[dict[int, int]], twins: list[list[int]]) -> list[dict[int, int]]:
    """``start`` with each set of twins' assignments dealt to them in decreasing count, as the program's
    symmetry rows ask (``count[a] >= count[b]`` for consecutive twins): the same plan up to swapping
    interchangeable members, and a start the program accepts.

    Handed over as it was, a start with a twin above the one before it broke a row; HiGHS then dropped
    it and returned its own worse incumbent at the node limit, which ``rebalance`` refused as "a plan
    worse than its start", an internal error of ``rackplan assign`` (an adversarial hunt's instance:
    8 members, 20 partitions, ``objective: bytes``; ``tests/assignor/test_traffic.py``).
    """
    out = [dict(s) for s in start]
    for ms in twins:
        rows = sorted((out[m] for m in ms), key=lambda s: -sum(s.values()))  # stable: deterministic
        for m, row in zip(ms, rows, strict=True):
            out[m] = row
    return out


def _program() -> Program:
    """An empty program: :mod:`rackplan.assignor.flow.highs` is imported here, on first use, not with this module
    (the door to HiGHS: a small component answered without it never opens it, issue 29 item 3)."""
    from ...flow.highs import Program

    return Program()


def _start_vector(
    comp: Component,
    start: Sequence[dict[int, int]],
    twins: list[list[int]],
    x: list[dict[int, int]],
    keep: list[dict[int, int]],
    y: list[dict[int, int]],
    count: list[int],
    mu: list[int],
    n_col: int,
) -> list[float]:
    """Every column's value in the assignment ``start``, its ``twins`` dealt in the program's order."""
    start = _twins_in_order(start, twins)
    out = [0.0] * n_col
    counts = [sum(s.values()) for s in start]
    for m, s in enumerate(start):
        for k, v in s.items():
            out[x[m][k]] = v
            g = comp.class_group[k]
            if v:
                out[y[m][g]] = 1.0
        for k, j in keep[m].items():
            out[j] = min(s.get(k, 0), comp.owned[m][k])
        out[count[m]] = counts[m]
    caps = comp.cap or [None] * len(comp.group_members)
    for g, ms in enumerate(comp.group_members):
        c = caps[g]
        out[mu[g]] = min([counts[m] for m in ms] + ([] if c is None else [c]), default=0)
    return out
