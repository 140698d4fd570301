"""The *exact candidate* of the general cooperative-sticky path: the optimum over every balanced assignment.

The general path's search (:mod:`rackplan.assignor.consumer.sticky.general`) is exact only at
the counts it visits, and which counts it visits depends on the owners; a
group owning nothing, or owning partitions that pull the search elsewhere,
can end one cross-rack partition or one move behind a count vector it never
tried (issue 10's two open counterexamples).  The contract's balance rule over
*all* count vectors is the mixed-integer program rack-optimal already solves
exactly (:mod:`rackplan.assignor.consumer.rack_optimal.milp`: ``W * cross-rack
- kept``, every partition with a subscriber, no holder of a topic two above one
of its subscribers).  Here it is built from the cooperative-sticky working
model (:class:`~rackplan.assignor.consumer.sticky.common.Prepared`) with moves
priced against the valid owners, and started from a balanced assignment the
search found, so its answer is never worse than that start.

When the answer is proven optimal it is lexicographically no worse, in
(cross-rack partitions, moves), than *any* balanced assignment, Kafka's settled
one included (Kafka's moves over its rounds are at least the partitions whose
final holder is not their valid owner).  :func:`rackplan.assignor.consumer.sticky.settle_general`
takes it as one more candidate, checked for stability like every other.

Cost: nothing is built when the model would exceed :data:`EXACT_NONZEROS` by a bound from the
subscriptions alone (:func:`size_floor`); no solver runs when the start already reaches the
per-partition floor (every partition with its best subscriber, an owner kept unless another
subscriber is strictly more local: then it is optimal as it is), or when the model's estimate
exceeds the limit.  The
solvers' work budgets are counted, never timed, so the answer is deterministic.

Solver: first :func:`rackplan.assignor.consumer.rack_optimal.small_exact.solve_small` (the
same program by enumerating count vectors, one min-cost flow each, pure Python: no
HiGHS to load, issue 29 item 3), proven optimal when it answers; HiGHS
(:func:`~rackplan.assignor.consumer.rack_optimal.milp.solve`) only when its work budget
(:data:`~rackplan.assignor.consumer.rack_optimal.small_exact.SMALL_WORK`) runs out.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable

from ..rack_optimal.milp import Component, check_balanced, plan_value, solve, value_floor
from ..rack_optimal.small_exact import solve_small
from .common import Prepared

#: Largest model (constraint-matrix nonzeros, estimated) the exact candidate is built for.  HiGHS's node
#: budget does not bound its root, and its cost grows steeply with the model: on bench_exact_candidate's
#: 9 x 96 family (``bench/bench_highs_gate.py --sizes``) programs under 350 estimated nonzeros took at
#: most 0.17 s of CPU, larger ones up to 0.85 s, and with the limit at 600, 19 to 22 of its 120 groups
#: took over 1 s.  There the enumeration answered none of its 138 models above 350 (it ran out, and HiGHS got them).
#: At 350, 114 of the 120 land exactly where they did and none worse than Kafka's (``bench_highs_gate``;
#: the tests: ``test_highs_gate.py``, ``test_vs_kafka_java.py``).
EXACT_NONZEROS = 350


def exact_candidate(
    prep: Prepared,
    start: list[int],
    spend: Callable[[], bool],
    least_cross: dict[Hashable, int] | None = None,
) -> list[int] | None:
    """A holder strictly better than the balanced ``start`` in ``W * cross-rack + moves``, or None.

    None when ``start`` is already optimal by the per-partition floor or by ``least_cross``, when the
    model is too large (:data:`EXACT_NONZEROS`), when ``spend`` (asked only before the solver runs)
    refuses the run, or when the solver finds nothing better within its work budget.

    ``least_cross`` (one settling's, filled here): per component, ignoring who owns what, the fewest
    cross-rack partitions of any balanced assignment, once a solver proved an optimum.  ``W`` exceeds
    any count of moves, so a proven optimum's cross-rack count is that least one, and it does not
    depend on the owners: the balance rule and the racks do not read them.  A later candidate of the
    same component (the follow-up round a settling simulates, on the owners this round hands out) whose
    start reaches ``W * least`` with no move is then optimal as it is, and the solver is not run again
    for an answer that could not be strictly better (the same None it would give).
    """
    if size_floor(prep) > EXACT_NONZEROS:
        return None  # too large whatever its classes: the same None as below, without building the model
    comp, part_class, counts = _component(prep, start)
    cross, owned = comp.cross, comp.owned
    weight = sum(sum(o.values()) for o in owned) + 1
    value = plan_value(comp, counts, weight)
    key = _key(comp)
    least = None if least_cross is None else least_cross.get(key)
    floor = value_floor(comp, weight)
    if value == (floor if least is None else max(floor, weight * least)):
        return None  # no assignment, balanced or not (or no balanced one), does better
    size = estimated_nonzeros(comp)  # refused before anything is built
    if size > EXACT_NONZEROS or not spend():
        return None
    best = solve_small(comp, counts)
    proven = best is not None
    if best is None:  # the enumeration's budget ran out: HiGHS only now
        found = solve(comp, counts, light_root=True)  # small programs: see Program.solve
        best, proven = found.counts, found.optimal
    check_balanced(comp, best)
    if proven and least_cross is not None:
        least_cross[key] = sum(cross[m][k] * v for m, per in enumerate(best) for k, v in per.items())
    if plan_value(comp, best, weight) >= value:
        return None
    return _hand_out(prep, part_class, best)


def least_known(prep: Prepared, holder: list[int], least_cross: dict[Hashable, int]) -> int | None:
    """The least cross-rack count of the group's component recorded in ``least_cross``, if any
    (``holder``: any complete holder of the group; the component does not depend on it)."""
    if not least_cross or size_floor(prep) > EXACT_NONZEROS:
        return None  # nothing recorded, or too large for one to have been
    return least_cross.get(_key(_component(prep, holder)[0]))


def _key(comp: Component) -> Hashable:
    """What a component's least cross-rack count depends on: its classes, groups and racks, not owners."""
    return (
        tuple(comp.class_size),
        tuple(comp.class_group),
        tuple(map(tuple, comp.group_members)),
        tuple(tuple(sorted(c.items())) for c in comp.cross),
    )


def estimated_nonzeros(comp: Component) -> int:
    """The balance program's constraint-matrix nonzeros, estimated as :func:`~..rack_optimal.milp.solve`
    builds them (placement, count and keep rows per column, three rows per subscription)."""
    member_groups = [
        [g for g, ms in enumerate(comp.group_members) if m in ms] for m in range(len(comp.cross))
    ]
    size = sum(3 * len(c) + 6 * len(g) for c, g in zip(comp.cross, member_groups, strict=True))
    return size + 2 * sum(len(o) for o in comp.owned)


def size_floor(prep: Prepared) -> int:
    """A lower bound of :func:`estimated_nonzeros` of the group's model, from the subscriptions alone.

    Topics with the same subscribers form one topic group; a group with a partition has a class (a topic
    group and a replica mask) for every member of it, so each such (group, member) pair counts at least
    3 + 6 estimated nonzeros.  Cheap next to :func:`_component`, which was most of what a
    candidate refused for size cost: a group whose floor is above the limit is refused before anything
    is built.
    """
    off = prep.topic_offset
    groups = {tuple(ms) for t, ms in enumerate(prep.topic_members) if off[t + 1] > off[t]}
    return 9 * sum(map(len, groups))


def _component(prep: Prepared, start: list[int]) -> tuple[Component, list[int], list[dict[int, int]]]:
    """The balance program's component of the whole group (classes: topic group and replica mask), each
    partition's class, and ``start`` as counts per member and class."""
    n = len(prep.member_ids)
    tm, masks, ptopic, owner = prep.topic_members, prep.part_mask, prep.part_topic, prep.owner
    # Topics with the same subscribers form one topic group: the balance rule compares exactly those.
    group_of: dict[tuple[int, ...], int] = {}
    topic_group = [group_of.setdefault(tuple(tm[t]), len(group_of)) for t in range(len(prep.topics))]
    class_of: dict[tuple[int, int], int] = {}
    part_class = [
        class_of.setdefault((topic_group[ptopic[gp]], masks[gp]), len(class_of)) for gp in range(len(masks))
    ]
    classes = list(class_of)
    group_members = [list(ms) for ms in group_of]
    class_size = [0] * len(classes)
    for k in part_class:
        class_size[k] += 1
    cross: list[dict[int, int]] = [{} for _ in range(n)]
    for k, (g, mask) in enumerate(classes):
        for m in group_members[g]:
            cross[m][k] = prep.cross(prep.member_class[m], mask)
    owned: list[dict[int, int]] = [{} for _ in range(n)]
    counts: list[dict[int, int]] = [{} for _ in range(n)]
    for gp, k in enumerate(part_class):
        o, h = owner[gp], start[gp]
        if o >= 0:
            owned[o][k] = owned[o].get(k, 0) + 1
        counts[h][k] = counts[h].get(k, 0) + 1
    comp = Component(
        class_size=class_size,
        class_group=[g for g, _ in classes],
        group_members=group_members,
        cross=cross,
        owned=owned,
    )
    return comp, part_class, counts


def _hand_out(prep: Prepared, part_class: list[int], counts: list[dict[int, int]]) -> list[int]:
    """A holder with ``counts`` per member and class: owners keep their own first (lowest partitions
    first), the rest go in partition order to members in number order."""
    owner = prep.owner
    need = [dict(c) for c in counts]
    holder = [-1] * len(part_class)
    for gp, k in enumerate(part_class):
        o = owner[gp]
        if o >= 0 and need[o].get(k, 0) > 0:
            holder[gp] = o
            need[o][k] -= 1
    slots: dict[int, list[int]] = {}
    for m, per in enumerate(need):
        for k, v in per.items():
            slots.setdefault(k, []).extend([m] * v)
    for k in slots:
        slots[k].reverse()  # popped from the end: lowest member first
    for gp, k in enumerate(part_class):
        if holder[gp] < 0:
            holder[gp] = slots[k].pop()
    return holder
