"""The balance program of a small component solved exactly in pure Python, on min-cost flows (no HiGHS).

Why.  :func:`rackplan.assignor.consumer.rack_optimal.milp.solve` needs HiGHS, and
importing highspy imported numpy: about 0.14 s of CPU, most of ``rackplan assign``
on a tiny unequal cooperative-sticky group (issue 29, item 3; HiGHS itself is now
loaded without numpy, :func:`rackplan.assignor.flow.highs.solver_module`, and a
flow enumeration that answers is still cheaper than loading it).  For the small
components the general path's exact candidate builds
(:mod:`rackplan.assignor.consumer.sticky.general_exact`), the same program
(minimise ``W * cross-rack - kept`` over every balanced assignment) is solved
here by enumeration, with the same answer value.

How.  Fix the count vector ``c`` (partitions per member).  The balance rule then
fixes who may hold what: member ``m`` may take a partition of topic group ``g``
only if ``c[m] <= mu_g + 1``, ``mu_g`` the smallest count among ``g``'s
subscribers.  What is left is a transportation problem (classes to members,
member ``m`` receiving exactly ``c[m]``; a kept partition one cheaper), one
min-cost flow.  The program's optimum is the least of these flows over the count
vectors, enumerated with what every balanced assignment satisfies:

* members with the same subscription (the same topic groups) hold ``lo`` or
  ``lo + 1`` (the more loaded one holds a topic the other subscribes to), so a
  subscription is enumerated by its total ``s`` (``lo = s // n``, ``s % n`` of
  them at ``lo + 1``), at most the partitions of its topics, the last
  subscription taking what is left;
* ``mu_g`` is the least ``lo`` among ``g``'s subscriptions, and only falls as
  more subscriptions are fixed: a member of count ``lo >= 1`` with no topic group
  left where ``lo <= mu_g + 1`` cannot hold anything, so the branch is cut;
* who of a subscription holds ``lo + 1`` is left to the flow (one unit each
  through an extra node) when both levels may hold the same topic groups;
  otherwise each choice is tried, members that are interchangeable (same racks'
  costs, owning nothing) counted, not chosen.

Each flow is asked only for a plan strictly better than the best so far
(:meth:`~rackplan.assignor.flow.mincost.FlowGraph.solve_below`), and the search
stops at the per-partition floor (:func:`~.milp.value_floor`, nothing is better).

Tie rule (deterministic): the start is kept unless something is strictly better;
otherwise the first count vector reaching the optimum in the enumeration order
(subscriptions in the order of their first member, each total ascending, the
``lo + 1`` choices in lexicographic order of the interchangeable runs) with its
flow's plan (ties broken by edge order: classes ascending, a kept partition first).

Budget: :data:`SMALL_WORK`, counted in the checks of the search plus the nodes and edges of
every flow built, never time.  Exhausted, :func:`solve_small` returns None and
the caller falls back to HiGHS; otherwise its answer is proven optimal (the
enumeration covered every balanced count vector).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence

from ...flow.mincost import FlowGraph, InfeasibleFlow
from ...record import record
from .milp import Component, plan_value, value_floor

SMALL_WORK = 50_000
"""The work budget of one :func:`solve_small`: per count total tried, the topic groups it checks; per
choice of who holds one more, one; per flow, its nodes and edges.

0.25 to 0.6 microseconds of CPU a unit, so about 12 to 30 ms when spent in full, when measured;
4.3 ms (0.09 microseconds a unit) on bench_vs_kafka's 9 x 96 group since the walk re-checks only
the subscriptions a total changes (bench/bench_passes_ab.py).  Less than importing HiGHS (0.14 s),
the fallback when it runs out.  On the exact candidates of
tests/assignor/test_sticky*.py (401 calls, unbudgeted) the median enumeration costs 322 units,
90% at most 34,241; 38 need more than 50,000 (up to 2.5 million) and go to HiGHS
(docs/performance.md, start-up section).
"""


class _OutOfWork(Exception):
    """The budget ran out: the enumeration is not complete, so nothing is proven."""


@record(frozen=True)
class _Subscription:
    """Members with the same topic groups (in member order), in runs of interchangeable ones."""

    groups: tuple[int, ...]
    members: tuple[int, ...]
    runs: tuple[tuple[int, ...], ...]
    #: the most they can hold together: the partitions of their topic groups
    most: int


def solve_small(
    comp: Component, start: Sequence[dict[int, int]], budget: int | None = None
) -> list[dict[int, int]] | None:
    """The optimal plan of a whole component (``start`` itself when nothing is strictly better), or None.

    ``start`` is a balanced plan in :class:`~.milp.Component`'s counts form.  None when the work
    budget (default :data:`SMALL_WORK`, read at the call) runs out before the enumeration is complete, or for a part of a component
    (``comp.floor`` or ``comp.cap`` set: the neighbourhood search's programs, not handled here).
    """
    if comp.floor or comp.cap:
        return None
    search = _Search(comp, start, SMALL_WORK if budget is None else budget)
    try:
        search.run()
    except _OutOfWork:
        return None
    return search.best


class _Search:
    """One enumeration: the best plan so far, its value, the work spent."""

    def __init__(self, comp: Component, start: Sequence[dict[int, int]], budget: int) -> None:
        self.comp, self.budget, self.work = comp, budget, 0
        n_mem = len(comp.cross)
        self.n_class = len(comp.class_size)
        self.group_classes: list[list[int]] = [[] for _ in comp.group_members]
        for k, g in enumerate(comp.class_group):
            self.group_classes[g].append(k)
        group_size = [sum(comp.class_size[k] for k in ks) for ks in self.group_classes]
        member_groups: list[list[int]] = [[] for _ in range(n_mem)]
        for g, ms in enumerate(comp.group_members):
            for m in ms:
                member_groups[m].append(g)
        by_groups: dict[tuple[int, ...], list[int]] = {}
        for m in range(n_mem):
            by_groups.setdefault(tuple(sorted(member_groups[m])), []).append(m)
        self.subs = [
            _Subscription(gs, tuple(ms), _runs(comp, ms), sum(group_size[g] for g in gs))
            for gs, ms in by_groups.items()
        ]
        #: per subscription, the most the ones after it can hold together
        self.later = [sum(s.most for s in self.subs[i + 1 :]) for i in range(len(self.subs))]
        #: per subscription, the work of checking one of its totals: the topic groups fixed by then
        self.check_cost = list(itertools.accumulate(1 + len(s.groups) for s in self.subs))
        #: per subscription, per topic group of it, the subscriptions before it that share the group
        self.earlier: list[dict[int, tuple[int, ...]]] = [
            {g: tuple(j for j in range(i) if g in self.subs[j].groups) for g in sub.groups}
            for i, sub in enumerate(self.subs)
        ]
        self.total = sum(comp.class_size)
        owned = sum(sum(o.values()) for o in comp.owned)
        self.weight = owned + 1
        self.shift = self.total - owned  # a flow's cost less this is the plan's value
        self.best = [dict(s) for s in start]
        self.value = plan_value(comp, start, self.weight)
        self.floor = value_floor(comp, self.weight)

    def run(self) -> None:
        if self.value > self.floor and self.subs:
            self._walk([], self.total, [None] * len(self.group_classes))

    def _spend(self, work: int) -> None:
        self.work += work
        if self.work > self.budget:
            raise _OutOfWork

    def _walk(self, totals: list[int], rem: int, mu: list[int | None]) -> None:
        """Every total of the next subscription, given the ones before (``totals``, their ``mu``) and what is left.

        ``mu[g]``: the least ``lo`` among the fixed subscriptions to ``g`` (None: none fixed yet).
        Each total tried costs the check it runs: one unit per topic group of every fixed subscription.
        """
        i = len(totals)
        sub = self.subs[i]
        last = i == len(self.subs) - 1
        for s in range(rem if last else max(0, rem - self.later[i]), min(rem, sub.most) + 1):
            self._spend(self.check_cost[i])
            if self.value == self.floor:
                return  # proven: nothing is better than the floor
            chosen, lo, fixed = [*totals, s], s // len(sub.members), list(mu)
            fell: set[int] = set()  # the subscriptions before this one whose topic groups' mu fell
            for g in sub.groups:
                held = fixed[g]
                if held is None or lo < held:
                    fixed[g] = lo
                    fell.update(self.earlier[i][g])
            if not _may_hold(self.subs, chosen, fixed, (*sorted(fell), i)):
                continue
            if last:
                self._choose(chosen, fixed, [])
            else:
                self._walk(chosen, rem - s, fixed)

    def _choose(self, totals: list[int], mu: list[int | None], levels: list[tuple[int, ...] | None]) -> None:
        """Every count vector with these subscription totals (who holds ``lo + 1``, one subscription at a
        time, each choice one unit of work): one flow each."""
        i = len(levels)
        if i == len(self.subs):
            self._flow(totals, levels, mu)
            return
        for option in _levels(self.subs[i], totals[i], mu):
            self._spend(1)
            if self.value == self.floor:
                return
            self._choose(totals, mu, [*levels, option])

    def _flow(
        self, totals: list[int], levels: Sequence[tuple[int, ...] | None], mu: list[int | None]
    ) -> None:
        """The best plan at one count vector (``levels`` None: the flow picks who holds one more), if better."""
        comp, n_class = self.comp, self.n_class
        graph = FlowGraph(n_class + len(comp.cross))
        graph.supply[:n_class] = comp.class_size
        arcs: list[tuple[int, int, int]] = []  # (member, class, edge)
        for sub, s, fixed in zip(self.subs, totals, levels, strict=True):
            lo, extra = divmod(s, len(sub.members))
            sink = graph.add_node(-extra) if fixed is None and extra else -1
            for j, m in enumerate(sub.members):
                count = lo + (extra > 0) if fixed is None else fixed[j]
                graph.supply[n_class + m] = -(lo if fixed is None else count)
                if sink >= 0:
                    graph.add_edge(n_class + m, sink, 1, 0)
                if count:
                    self._member_arcs(graph, arcs, m, count, sub.groups, mu)
        self._spend(len(graph.edges) + graph.num_nodes)
        try:
            found = graph.solve_below(self.value + self.shift)
        except InfeasibleFlow:
            return
        if found is not None:
            plan: list[dict[int, int]] = [{} for _ in comp.cross]
            for m, k, e in arcs:
                if found.flow[e]:
                    plan[m][k] = plan[m].get(k, 0) + found.flow[e]
            self.best, self.value = plan, found.cost - self.shift

    def _member_arcs(
        self,
        graph: FlowGraph,
        arcs: list[tuple[int, int, int]],
        m: int,
        count: int,
        groups: tuple[int, ...],
        mu: list[int | None],
    ) -> None:
        """Edges from the classes member ``m`` may hold at ``count`` (a kept partition one cheaper)."""
        comp, node = self.comp, self.n_class + m
        for g in groups:
            low = mu[g]
            if low is None or count > low + 1:
                continue
            for k in self.group_classes[g]:
                cost = self.weight * comp.cross[m][k] + 1
                own = comp.owned[m].get(k, 0)
                if own:
                    arcs.append((m, k, graph.add_edge(k, node, own, cost - 1)))
                arcs.append((m, k, graph.add_edge(k, node, min(count, comp.class_size[k]), cost)))


def _runs(comp: Component, members: Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """``members`` in runs of interchangeable ones: the same costs, nothing owned (alone otherwise)."""
    runs: dict[object, list[int]] = {}
    for m in members:
        key: object = tuple(sorted(comp.cross[m].items())) if not comp.owned[m] else ("owner", m)
        runs.setdefault(key, []).append(m)
    return tuple(tuple(r) for r in runs.values())


def _may_hold(
    subs: Sequence[_Subscription],
    totals: Sequence[int],
    mu: Sequence[int | None],
    which: Sequence[int] | None = None,
) -> bool:
    """Whether every member of a fixed subscription still has a topic group it may hold at its level.

    ``mu`` only falls as more subscriptions are fixed, so a False here holds for every completion.
    ``which``: only these fixed subscriptions (None: all).  The walk checks the one it just fixed and
    those sharing a topic group whose ``mu`` that lowered: every other one passed the same check at
    the same ``mu`` one level up, so the answer is the full check's at a fraction of its cost (it was
    most of the enumeration's CPU on a 9-member group, each member its own subscription).
    """
    for j in range(len(totals)) if which is None else which:
        sub, s = subs[j], totals[j]
        lo, extra = divmod(s, len(sub.members))
        for level in (lo, lo + 1) if extra else (lo,):
            if level and not any((low := mu[g]) is not None and level <= low + 1 for g in sub.groups):
                return False
    return True


def _levels(sub: _Subscription, s: int, mu: Sequence[int | None]) -> Iterator[tuple[int, ...] | None]:
    """Who of ``sub`` holds ``lo + 1``: None when the flow may choose, else every choice (runs counted)."""
    lo, extra = divmod(s, len(sub.members))
    if not extra or lo == 0 or all(mu[g] != lo - 1 for g in sub.groups):
        yield None  # both levels may hold the same topic groups (a member at 0 holds none)
        return
    for split in _splits(extra, [len(r) for r in sub.runs]):
        up = {m for run, j in zip(sub.runs, split, strict=True) for m in run[:j]}
        yield tuple(lo + (m in up) for m in sub.members)


def _splits(total: int, sizes: Sequence[int]) -> Iterator[tuple[int, ...]]:
    """Every way to put ``total`` into bins of these sizes, in lexicographic order."""
    if not sizes:
        if total == 0:
            yield ()
        return
    for first in range(min(total, sizes[0]) + 1):
        for rest in _splits(total - first, sizes[1:]):
            yield (first, *rest)
