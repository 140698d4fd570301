"""Unequal subscriptions: from the fair optimum to the optimum over every assignment the contract calls balanced.

The fair optimum (:mod:`rackplan.assignor.consumer.rack_optimal`, stages A and B) is balanced,
but a less even balanced assignment can have fewer cross-rack partitions or
keep more owned ones.  This module makes the result exact over all of them:

1. Split the group into components: members linked by a topic with
   partitions that both subscribe to.  The balance rule only compares
   subscribers of one topic, and cost and moves add up, so each component is
   optimised on its own.
2. Certify cheaply where possible.  With ``W`` larger than the number of
   owned partitions, ``W * cross-rack + moves`` orders plans as the contract
   does.  No assignment, balanced or not, beats giving every partition
   separately its best subscriber: cross-rack only when no subscriber is
   local, moved only when its owner is cross-rack for it and another
   subscriber is not.  When the fair optimum of a component reaches that
   bound it is optimal over every balanced assignment, and is kept as it is.
3. Otherwise start from the better of the fair optimum and the general
   cooperative-sticky search's plan (a local search over count vectors, exact
   at each, same objective), and solve the component as a mixed-integer program
   (:mod:`rackplan.assignor.consumer.rack_optimal.milp`, HiGHS) from that start,
   within a deterministic work budget (nodes and model sizes, never time), and check the
   answer in integers: every partition placed with a subscriber, the balance
   rule, and a value no worse than the start.  When it is only as good, the
   start stays (the fair assignment, unless the search's was strictly
   better).  When the budget runs out first, the best plan found is used the
   same way (so never worse than the fair optimum), the component is not
   proven optimal, and HiGHS's dual bound gives a proven lower bound on its
   cross-rack partitions.
4. A component too large for the program (over its size limit, so HiGHS did
   not run) goes to the neighbourhood search
   (:mod:`rackplan.assignor.consumer.rack_optimal.neighbourhood`): exact programs over a few
   members at a time, each answer kept only when strictly better.  Where the
   whole program ran and only its node budget ran out, neighbourhoods (most of
   the same members) found nothing more in the measured cases and cost
   seconds, so they are not tried.

Partitions are handed out per class (same topic group, same replica-rack
mask): each member first keeps its own owned partitions of the class (sorted),
then takes the class's remaining partitions in order, members in id order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from ...model import Cluster, ConsumerGroup, Member, TopicPartition
from ...record import record, replace
from ..owned import previous_owners
from ..sticky.common import prepare
from ..sticky.general import assign_general
from .milp import NODE_WORK, Component, check_balanced, plan_value, solve, value_floor
from .neighbourhood import improve

#: Integer objectives HiGHS decides exactly: below 2**50 (a double holds 2**53 exactly; the margin
#: absorbs its feasibility tolerances), used by ``objective: bytes`` to decide whether a program may run.
EXACT_LIMIT = 1 << 50


@record(frozen=True)
class Outcome:
    """Whether the whole plan is proven optimal, and a proven lower bound on its cross-rack partitions.

    The bound adds up, per component, its cross-rack partitions when proven
    optimal, else the larger of the per-partition bound and HiGHS's dual bound.
    """

    optimal: bool
    cross_rack_lower_bound: int


def rebalance(
    cluster: Cluster,
    group: ConsumerGroup,
    fair: Mapping[str, Sequence[TopicPartition]],
    budget: int = NODE_WORK,
    values: Mapping[TopicPartition, int] | None = None,
) -> tuple[dict[str, list[TopicPartition]], Outcome]:
    """The lexicographic optimum (cross-rack, then moves) over balanced assignments, given the fair one.

    A component keeps its fair assignment unless the solver finds a strictly
    better one, so the result differs from ``fair`` only where it must.  When
    the solver's work budget (``budget``, see
    :data:`rackplan.assignor.consumer.rack_optimal.milp.NODE_WORK`) runs out, the best plan found
    stands (never worse than ``fair``) and the outcome says it is not proven.

    ``values`` (``objective: bytes``) makes a cross-rack partition cost its
    integer value (exact-scaled bytes/s) instead of 1; partitions of one class
    then also share their value.  HiGHS decides integers exactly only while
    they fit a double's mantissa, so when ``W * sum(values)`` reaches
    :data:`EXACT_LIMIT` no program runs: the plan stays, proven only at the
    per-partition bound.  The outcome's bound is then in those units.
    """
    members = sorted(group.members, key=lambda m: m.member_id)
    out = {m.member_id: list(fair[m.member_id]) for m in members}
    optimal, bound = True, 0
    for comp_members in _components(cluster, members):
        proven, low = _optimise(cluster, group, [members[i] for i in comp_members], out, budget, values)
        optimal = optimal and proven
        bound += low
    return out, Outcome(optimal, bound)


def _components(cluster: Cluster, members: list[Member]) -> list[list[int]]:
    """Member indices linked by shared topics that have partitions, each list sorted, lists by first member."""
    parent = list(range(len(members)))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    first: dict[str, int] = {}
    for i, m in enumerate(members):
        for t in m.topics:
            if not cluster.topics[t]:
                continue
            j = first.setdefault(t, i)
            a, b = find(i), find(j)
            if a != b:
                parent[max(a, b)] = min(a, b)
    comps: dict[int, list[int]] = {}
    for i in range(len(members)):
        comps.setdefault(find(i), []).append(i)
    return [c for _, c in sorted(comps.items())]


def _optimise(
    cluster: Cluster,
    group: ConsumerGroup,
    members: list[Member],
    out: dict[str, list[TopicPartition]],
    budget: int,
    values: Mapping[TopicPartition, int] | None = None,
) -> tuple[bool, int]:
    """Replace the component's part of ``out`` by a strictly better plan if one is found.

    Returns whether the result is proven optimal, and a proven lower bound on
    the component's cross-rack partitions (its cross-rack count when proven).
    """
    topics = sorted({t for m in members for t in m.topics if cluster.topics[t]})
    if not topics:
        return True, 0
    local = {m.member_id: i for i, m in enumerate(members)}
    subscribers: dict[str, list[int]] = {t: [] for t in topics}
    for i, m in enumerate(members):
        for t in m.topics:
            if t in subscribers:
                subscribers[t].append(i)
    group_index: dict[tuple[int, ...], int] = {}
    class_index: dict[tuple[int, int, int], int] = {}
    class_parts: list[list[TopicPartition]] = []
    class_of: dict[TopicPartition, int] = {}
    for t in topics:
        g = group_index.setdefault(tuple(subscribers[t]), len(group_index))
        for p, mask in enumerate(cluster.masks[t]):
            v = 1 if values is None else values[(t, p)]
            k = class_index.setdefault((g, mask, v), len(class_parts))
            if k == len(class_parts):
                class_parts.append([])
            class_parts[k].append((t, p))
            class_of[(t, p)] = k
    group_members = list(group_index)
    class_group = [g for g, _, _ in class_index]
    bits = [-1 if m.rack is None else cluster.member_bit(m.rack) for m in members]  # -1: local to any
    cross: list[dict[int, int]] = [{} for _ in members]
    for k, (g, mask, v) in enumerate(class_index):
        for i in group_members[g]:  # is_cross_rack without a call: millions where each broker is a rack
            cross[i][k] = v if mask and not mask & bits[i] else 0
    owned_parts: list[dict[int, list[TopicPartition]]] = [{} for _ in members]
    for tp, mid in previous_owners(cluster, group).items():
        at = local.get(mid)
        if at is not None and tp in class_of and tp[0] in members[at].topics:
            owned_parts[at].setdefault(class_of[tp], []).append(tp)
    for mine in owned_parts:
        for parts in mine.values():
            parts.sort()
    owned = [{k: len(v) for k, v in mine.items()} for mine in owned_parts]
    weight = sum(sum(o.values()) for o in owned) + 1

    start: list[dict[int, int]] = [{} for _ in members]
    for i, m in enumerate(members):
        for tp in out[m.member_id]:
            k = class_of[tp]
            start[i][k] = start[i].get(k, 0) + 1
    comp = Component(
        class_size=[len(p) for p in class_parts],
        class_group=class_group,
        group_members=group_members,
        cross=cross,
        owned=owned,
    )
    start_value = plan_value(comp, start, weight)
    cheap = value_floor(comp, weight)
    if start_value == cheap:
        return True, start_value // weight
    general = _searched(cluster, replace(group, members=tuple(members)), comp, class_of)
    general_value = plan_value(comp, general, weight)
    if general_value < start_value:
        start, start_value = general, general_value
        if start_value == cheap:
            _write(members, class_parts, start, owned_parts, out)
            return True, start_value // weight
    if (
        values is not None
        and weight * sum(values[tp] for parts in class_parts for tp in parts) >= EXACT_LIMIT
    ):
        # beyond what HiGHS decides exactly: keep the start, proven only at the per-partition floor
        if start is general:
            _write(members, class_parts, start, owned_parts, out)
        proven = start_value == cheap
        return proven, start_value // weight if proven else cheap // weight
    found = solve(comp, start, budget)
    best = found.counts
    check_balanced(comp, best)
    value = plan_value(comp, best, weight)
    if value > start_value:
        raise AssertionError("the solver returned a plan worse than its start")
    proven = found.optimal
    if not found.ran:  # too large for one program: improve it a few members at a time
        searched, _ = improve(comp, best, budget)
        check_balanced(comp, searched, "the neighbourhood search")
        searched_value = plan_value(comp, searched, weight)
        if searched_value < value:
            best, value = searched, searched_value
        proven = value == cheap  # reached the per-partition floor
    proven, low = _proof(proven, value, weight, cheap, found.bound)
    if value < start_value:
        _write(members, class_parts, best, owned_parts, out)
    elif start is general:
        _write(members, class_parts, start, owned_parts, out)
    return proven, low


def _proof(proven: bool, value: int, weight: int, cheap: int, milp_bound: float | None) -> tuple[bool, int]:
    """Whether a plan of ``value`` (``W * cross-rack + moves``) is proven, and a proven bound on its cross-rack.

    Unproven, the bound is the better of the per-partition floor (``cheap``) and HiGHS's: it bounds
    ``W * cross-rack - kept`` from below, and kept >= 0; the slack absorbs its feasibility tolerances
    (a real bound sits at least 1 / W above an integer).  A plan at that bound with no move is
    proven all the same: nothing balanced is better in (cross-rack, moves), whoever proved the bound
    (an unproven plan at 284 of 284 bytes/s with no move was seen by an adversarial hunt).
    """
    crossing = value // weight  # moves are fewer than ``weight``
    if proven:
        return True, crossing
    milp = -1 if milp_bound is None else math.ceil(milp_bound / weight - 1e-7)
    low = min(crossing, max(cheap // weight, milp))
    return value == weight * low, low


def _searched(
    cluster: Cluster, component: ConsumerGroup, comp: Component, class_of: Mapping[TopicPartition, int]
) -> list[dict[int, int]]:
    """The general cooperative-sticky search's balanced plan for the component, as counts per class.

    A local search over count vectors, exact at each one it visits
    (:mod:`rackplan.assignor.consumer.sticky.general_shift`), with the same
    objective (cross-rack first, then moves against the valid owners).  It
    often beats the fair optimum where the exact program is out of budget,
    so rack-optimal is never worse than it; the program then starts from
    the better of the two.
    """
    prep = prepare(cluster, component)
    counts: list[dict[int, int]] = [{} for _ in comp.cross]
    for i, parts in enumerate(assign_general(prep)):
        for gp in parts:
            k = class_of[prep.partition(gp)]
            counts[i][k] = counts[i].get(k, 0) + 1
    check_balanced(comp, counts, "the general search")
    return counts


def _write(
    members: list[Member],
    class_parts: list[list[TopicPartition]],
    counts: Sequence[dict[int, int]],
    owned_parts: list[dict[int, list[TopicPartition]]],
    out: dict[str, list[TopicPartition]],
) -> None:
    """Replace the component's part of ``out`` by the plan ``counts`` describes.

    Per class (interchangeable partitions): owners keep their own first, the
    rest go in partition order to members in id order.  Linear in the plan:
    each class visits only the members that hold or own some of it.
    """
    takers: list[list[int]] = [[] for _ in class_parts]
    for i, mine in enumerate(counts):
        for k in set(mine) | set(owned_parts[i]):
            takers[k].append(i)
    for m in members:
        out[m.member_id] = []
    for k, parts in enumerate(class_parts):
        need = {i: counts[i].get(k, 0) for i in sorted(takers[k])}
        taken: set[TopicPartition] = set()
        for i in need:
            own = owned_parts[i].get(k, [])[: need[i]]
            out[members[i].member_id].extend(own)
            taken.update(own)
            need[i] -= len(own)
        pool = iter(tp for tp in parts if tp not in taken)
        for i, n in need.items():
            out[members[i].member_id].extend(next(pool) for _ in range(n))
    for m in members:
        out[m.member_id].sort()
