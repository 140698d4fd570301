"""Large-neighbourhood search: exact programs over a few members at a time, for components too big to solve whole.

Finding the fewest cross-rack partitions over balanced assignments is
NP-hard (docs/assignors.md, *rack-optimal*, and ``tests/hard_instances.py``),
so a large component cannot be solved exactly within a budget.  What can
be solved exactly is a small part of it: free a few members, keep every
other member's partitions where they are, and hand the free members'
partitions out again among themselves by the same mixed-integer program
(:func:`rackplan.assignor.consumer.rack_optimal.milp.solve`).  The members
outside enter that program only as constants:

* a member outside holding ``c`` partitions of a topic a free member
  subscribes to needs the free member to keep at least ``c - 1``
  (``Component.floor``);
* a free member holding part of a topic needs at most one more than every
  subscriber outside (``Component.cap``).

So every plan the small program admits, put back into the whole, is
balanced, and its value changes by exactly the small program's change: an
answer strictly better there is strictly better overall and is kept.

Which members are freed: a member holding a partition cross-rack that some
subscriber could read locally (or that lost owned partitions), then the
local subscribers of those partitions, then members reached through shared
topics, up to ``FREE_MEMBERS`` members and ``SUB_NONZEROS`` estimated
nonzeros.  Rounds go over those seeds until one finds nothing better,
``PATIENCE`` programs in a row have found nothing, or ``MAX_NEIGHBOURHOODS``
programs have run.  Everything is counted (programs,
members, HiGHS nodes), never timed, so the same input gives the same plan.

A local search: each step is exact over its neighbourhood, the result is
never worse than its start, and it is not a proof of optimality (the
plan's ``stats`` still say ``optimal: false`` with the proven bound).
"""

from __future__ import annotations

from collections.abc import Sequence

from .milp import NODE_WORK, Component, plan_value, solve

#: Members freed per neighbourhood.
FREE_MEMBERS = 32
#: Largest neighbourhood program, in estimated constraint-matrix nonzeros (HiGHS's root node is
#: not bounded by its node budget, so size is what bounds it).
SUB_NONZEROS = 2_000
#: Programs solved per component, over all rounds.
MAX_NEIGHBOURHOODS = 200
#: The search stops after this many programs in a row found nothing better.
PATIENCE = 12


def improve(
    comp: Component, counts: Sequence[dict[int, int]], budget: int = NODE_WORK
) -> tuple[list[dict[int, int]], int]:
    """A plan no worse than ``counts`` (balanced, same form), improved one neighbourhood at a time.

    ``budget`` is each neighbourhood program's node work (see ``NODE_WORK``).
    Returns the plan and how many neighbourhood programs were solved.
    """
    search = _Search(comp, [dict(c) for c in counts], budget)
    solved = idle = 0
    tried: set[tuple[int, ...]] = set()
    while solved < MAX_NEIGHBOURHOODS and idle < PATIENCE:
        improved = False
        for seed in search.seeds():
            if solved >= MAX_NEIGHBOURHOODS or idle >= PATIENCE:
                break
            free = search.neighbourhood(seed)
            if free in tried:
                continue
            solved += 1
            if search.resolve(free):
                improved = True
                idle = 0
                tried.clear()
            else:
                idle += 1
                tried.add(free)
        if not improved:
            break
    return search.counts, solved


class _Search:
    """The component, its current plan (counts per member and class) and what follows from it."""

    def __init__(self, comp: Component, counts: list[dict[int, int]], budget: int) -> None:
        self.comp = comp
        self.counts = counts
        self.budget = budget
        self.member_groups: list[list[int]] = [[] for _ in comp.cross]
        for g, ms in enumerate(comp.group_members):
            for m in ms:
                self.member_groups[m].append(g)
        self.weight = sum(sum(o.values()) for o in comp.owned) + 1
        #: per class: some subscriber reads it locally (so holding it cross-rack is avoidable)
        self.local_somewhere = [
            any(not comp.cross[j][k] for j in comp.group_members[g]) for k, g in enumerate(comp.class_group)
        ]
        self.totals = [0] * len(counts)
        self.held: list[dict[int, int]] = [{} for _ in counts]
        for m in range(len(counts)):
            self._account(m)

    def seeds(self) -> list[int]:
        """Members holding avoidable cross-rack partitions (most first), then members that lost owned ones."""
        comp = self.comp
        crossing: list[tuple[int, int]] = []
        losing: list[int] = []
        for m, mine in enumerate(self.counts):
            avoidable = sum(v for k, v in mine.items() if v and comp.cross[m][k] and self.local_somewhere[k])
            if avoidable:
                crossing.append((-avoidable, m))
            elif any(own > mine.get(k, 0) for k, own in comp.owned[m].items()):
                losing.append(m)
        return [m for _, m in sorted(crossing)] + losing

    def neighbourhood(self, seed: int) -> tuple[int, ...]:
        """The seed, the local subscribers of its cross-rack partitions, then members sharing topics."""
        comp = self.comp
        size = _Size(self)
        order: list[int] = []
        refused = 0

        def join(j: int) -> None:
            nonlocal refused
            if j in size.free or len(order) >= FREE_MEMBERS or refused >= FREE_MEMBERS:
                return
            if size.total + size.cost(j) <= SUB_NONZEROS:
                size.add(j)
                order.append(j)
            else:
                refused += 1  # near the size limit: after FREE_MEMBERS refusals, stop looking

        join(seed)
        for k, v in sorted(self.counts[seed].items()):
            if v and comp.cross[seed][k]:
                for j in comp.group_members[comp.class_group[k]]:
                    if not comp.cross[j][k]:
                        join(j)
        at = 0
        while at < len(order) and len(order) < FREE_MEMBERS and refused < FREE_MEMBERS:
            for g in self.member_groups[order[at]]:
                for j in comp.group_members[g]:
                    join(j)
            at += 1
        return tuple(sorted(order))

    def resolve(self, free: tuple[int, ...]) -> bool:
        """Hand the free members' partitions out again, exactly; True when strictly better (and applied)."""
        comp, counts = self.comp, self.counts
        local = {m: i for i, m in enumerate(free)}
        sub_class: dict[int, int] = {}
        sizes: list[int] = []
        for m in free:
            for k, v in sorted(counts[m].items()):
                if v:
                    at = sub_class.setdefault(k, len(sizes))
                    if at == len(sizes):
                        sizes.append(0)
                    sizes[at] += v
        if not sizes:
            return False  # the free members hold nothing to hand out
        classes = sorted(sub_class, key=sub_class.__getitem__)
        sub_group: dict[int, int] = {}
        class_group = [sub_group.setdefault(comp.class_group[k], len(sub_group)) for k in classes]
        groups = sorted(sub_group, key=sub_group.__getitem__)
        group_members = [[local[m] for m in comp.group_members[g] if m in local] for g in groups]
        touched = sorted({g for m in free for g in self.member_groups[m]})
        outside_low: dict[int, int | None] = {}  # per group: the least loaded subscriber outside
        outside_high: dict[int, int] = {}  # per group: the most loaded holder outside
        for g in touched:
            low: int | None = None
            high = 0
            for j in comp.group_members[g]:
                if j in local:
                    continue
                t = self.totals[j]
                low = t if low is None else min(low, t)
                if self.held[j].get(g):
                    high = max(high, t)
            outside_low[g], outside_high[g] = low, high
        cap = [outside_low[g] for g in groups]
        floor = [max([outside_high[g] - 1 for g in self.member_groups[m]] + [0]) for m in free]
        cross = [{sub_class[k]: comp.cross[m][k] for k in classes if k in comp.cross[m]} for m in free]
        owned = [{sub_class[k]: own for k, own in comp.owned[m].items() if k in sub_class} for m in free]
        sub = Component(
            class_size=sizes,
            class_group=class_group,
            group_members=group_members,
            cross=cross,
            owned=owned,
            floor=floor,
            cap=cap,
        )
        start = [{sub_class[k]: v for k, v in counts[m].items() if v} for m in free]
        found = solve(sub, start, self.budget, SUB_NONZEROS)
        if plan_value(sub, found.counts, self.weight) >= plan_value(sub, start, self.weight):
            return False
        for m, mine in zip(free, found.counts, strict=True):
            counts[m] = {classes[k]: v for k, v in mine.items() if v}
            self._account(m)
        return True

    def _account(self, m: int) -> None:
        """Member ``m``'s total and partitions held per group, from its counts."""
        held: dict[int, int] = {}
        for k, v in self.counts[m].items():
            if v:
                g = self.comp.class_group[k]
                held[g] = held.get(g, 0) + v
        self.held[m] = held
        self.totals[m] = sum(held.values())


class _Size:
    """The estimated size of a neighbourhood's program as members join, in constraint-matrix nonzeros.

    The program has a column per (free member, class held by a free member of a
    topic group it subscribes to), about 4 nonzeros each with its rows, 6 per
    (free member, such group), 2 per owned class and 3 per member
    (:func:`rackplan.assignor.consumer.rack_optimal.milp.solve` builds it).
    Kept incrementally: a member joining adds its own columns and one column
    for every free subscriber of each class it brings.
    """

    def __init__(self, search: _Search) -> None:
        self.search = search
        self.free: set[int] = set()
        self.classes: set[int] = set()
        self.in_group: dict[int, int] = {}  # classes of each group among ``classes``
        self.free_subs: dict[int, int] = {}  # free subscribers of each group
        self.total = 0

    def _brought(self, j: int) -> dict[int, int]:
        """Per group, the classes member ``j`` holds that are not in the program yet."""
        group_of = self.search.comp.class_group
        out: dict[int, int] = {}
        for k, v in self.search.counts[j].items():
            if v and k not in self.classes:
                out[group_of[k]] = out.get(group_of[k], 0) + 1
        return out

    def cost(self, j: int) -> int:
        """How much the program grows if member ``j`` joins."""
        brought = self._brought(j)
        grow = 0
        for g, n in brought.items():
            grow += self.free_subs.get(g, 0) * (4 * n + (0 if self.in_group.get(g) else 6))
        for g in self.search.member_groups[j]:
            n = self.in_group.get(g, 0) + brought.get(g, 0)
            if n:
                grow += 4 * n + 6
        return grow + 2 * len(self.search.comp.owned[j]) + 3

    def add(self, j: int) -> None:
        self.total += self.cost(j)
        group_of = self.search.comp.class_group
        for k, v in self.search.counts[j].items():
            if v and k not in self.classes:
                self.classes.add(k)
                self.in_group[group_of[k]] = self.in_group.get(group_of[k], 0) + 1
        for g in self.search.member_groups[j]:
            self.free_subs[g] = self.free_subs.get(g, 0) + 1
        self.free.add(j)
