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
3. Otherwise solve the component as a mixed-integer program
   (:mod:`rackplan.assignor.consumer.rack_optimal.milp`, HiGHS), starting from the fair optimum,
   within a deterministic work budget (nodes and model sizes, never time), and check the
   answer in integers: every partition placed with a subscriber, the balance
   rule, and a value no worse than the fair one.  When it is only as good,
   the fair assignment stays.  When the budget runs out first, the best plan
   found is used the same way (so never worse than the fair optimum), the
   component is not proven optimal, and HiGHS's dual bound gives a proven
   lower bound on its cross-rack partitions.

Partitions are handed out per class (same topic group, same replica-rack
mask): each member first keeps its own owned partitions of the class (sorted),
then takes the class's remaining partitions in order, members in id order.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ...model import Cluster, ConsumerGroup, Member, TopicPartition, is_cross_rack
from ..owned import previous_owners
from .milp import NODE_WORK, Component, solve


@dataclass(frozen=True, slots=True)
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
) -> tuple[dict[str, list[TopicPartition]], Outcome]:
    """The lexicographic optimum (cross-rack, then moves) over balanced assignments, given the fair one.

    A component keeps its fair assignment unless the solver finds a strictly
    better one, so the result differs from ``fair`` only where it must.  When
    the solver's work budget (``budget``, see
    :data:`rackplan.assignor.consumer.rack_optimal.milp.NODE_WORK`) runs out, the best plan found
    stands (never worse than ``fair``) and the outcome says it is not proven.
    """
    members = sorted(group.members, key=lambda m: m.member_id)
    out = {m.member_id: list(fair[m.member_id]) for m in members}
    optimal, bound = True, 0
    for comp_members in _components(cluster, members):
        proven, low = _optimise(cluster, group, [members[i] for i in comp_members], out, budget)
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
    class_index: dict[tuple[int, int], int] = {}
    class_parts: list[list[TopicPartition]] = []
    class_of: dict[TopicPartition, int] = {}
    for t in topics:
        g = group_index.setdefault(tuple(subscribers[t]), len(group_index))
        for p, mask in enumerate(cluster.masks[t]):
            k = class_index.setdefault((g, mask), len(class_parts))
            if k == len(class_parts):
                class_parts.append([])
            class_parts[k].append((t, p))
            class_of[(t, p)] = k
    group_members = list(group_index)
    class_group = [g for g, _ in class_index]
    racks = [(m.rack, cluster.member_bit(m.rack)) for m in members]
    cross: list[dict[int, int]] = [{} for _ in members]
    for k, (g, mask) in enumerate(class_index):
        for i in group_members[g]:
            cross[i][k] = int(is_cross_rack(racks[i][0], racks[i][1], mask))
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
    fair_value = plan_value(comp, start, weight)
    cheap = value_floor(comp, weight)
    if fair_value == cheap:
        return True, fair_value // weight
    found = solve(comp, start, budget)
    best = found.counts
    check_balanced(comp, best)
    value = plan_value(comp, best, weight)
    if value > fair_value:
        raise AssertionError("the solver returned a plan worse than the fair one")
    crossing = min(value, fair_value) // weight  # moves are fewer than ``weight``
    if found.optimal:
        low = crossing
    else:
        # HiGHS bounds ``W * cross-rack - kept`` from below, and kept >= 0; the slack absorbs
        # its feasibility tolerances (a real bound sits at least 1 / W above an integer).
        milp = -1 if found.bound is None else math.ceil(found.bound / weight - 1e-7)
        low = min(crossing, max(cheap // weight, milp))
    if value == fair_value:
        return found.optimal, low  # the fair plan is as good: keep it
    for m in members:
        out[m.member_id] = []
    for k, parts in enumerate(class_parts):
        _hand_out(k, parts, members, best, owned_parts, out)
    for m in members:
        out[m.member_id].sort()
    return found.optimal, low


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


def check_balanced(comp: Component, counts: Sequence[dict[int, int]]) -> None:
    """Every partition placed with a subscriber, and the contract's balance rule, in integers."""
    placed = [0] * len(comp.class_size)
    for i, mine in enumerate(counts):
        for k, v in mine.items():
            if k not in comp.cross[i] or v < 0:
                raise AssertionError("a partition went to a member not subscribed to it")
            placed[k] += v
    if placed != list(comp.class_size):
        raise AssertionError("the exact solver did not place every partition once")
    total = [sum(mine.values()) for mine in counts]
    for i, mine in enumerate(counts):
        for k, v in mine.items():
            if v and any(total[i] - total[j] >= 2 for j in comp.group_members[comp.class_group[k]]):
                raise AssertionError("the exact solver's plan breaks the balance rule")


def _hand_out(
    k: int,
    parts: list[TopicPartition],
    members: list[Member],
    counts: Sequence[dict[int, int]],
    owned_parts: list[dict[int, list[TopicPartition]]],
    out: dict[str, list[TopicPartition]],
) -> None:
    """Give class ``k``'s partitions: owners keep their own first, the rest go in order."""
    need = [counts[i].get(k, 0) for i in range(len(members))]
    taken: set[TopicPartition] = set()
    for i, m in enumerate(members):
        mine = owned_parts[i].get(k, [])[: need[i]]
        out[m.member_id].extend(mine)
        taken.update(mine)
        need[i] -= len(mine)
    pool = iter(tp for tp in parts if tp not in taken)
    for i, m in enumerate(members):
        for _ in range(need[i]):
            out[m.member_id].append(next(pool))
