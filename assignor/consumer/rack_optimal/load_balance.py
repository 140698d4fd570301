"""``balance: bytes``: members balanced by load (the contract's load rule), locality second.

The rule: every partition weighs ``w(p) = bytes/s + balance_floor``; no
partition ``p`` held by ``A`` may move to another subscriber ``B`` of its topic
with ``load(B) + w(p) < load(A)``.  Moving such a partition changes the sum
of squared loads by ``2 w (load(B) + w - load(A)) < 0``, so repeating such
moves always ends, in a plan that meets the rule.  Weights are exact integers
(:func:`rackplan.assignor.traffic.exact_integers`), so comparisons never
depend on rounding or on the order of a sum, and the loop cannot cycle.

The plan is built in four steps, each deterministic (members by id,
partitions heaviest first, then by topic and number):

1. targets: the loads plain LPT (heaviest first, to the least-loaded
   subscriber) reaches; with equal subscriptions LPT alone already meets the
   rule (the last partition ``q`` put on a member was no heavier than any
   earlier one, and the member was least loaded then);
2. locality first: each partition goes to its least-loaded local subscriber
   (its owner first, for stickiness) when that keeps the member within its
   target; the rest, heaviest first, to the least-loaded subscriber;
3. repair: while the rule is broken, the violating move that costs the least
   locality (then the lightest receiver, the heaviest partition) is made;
4. improve: cross-rack partitions, most costly first, move or swap to a local
   subscriber when the whole plan still meets the rule afterwards, within a
   deterministic work budget (:data:`IMPROVE_WORK`: each rule check costs the
   partitions plus the member-topic pairs it visits).

Two variants of steps 1 and 2 (:func:`balance_by_load`'s flags): of several least-loaded
subscribers, the partition's owner when local to it, else a local one (or simply the lowest index);
and step 2 with the partitions local to their owners first (or in weight order alone).  The local
variant is the plan: on skewed traffic it crosses 8-86% fewer bytes/s and at 50,000 partitions
costs a third to a tenth of the CPU (docs/performance.md).  The index variant is better on some
small groups, so :func:`assign_by_load` runs it too on groups up to :data:`BOTH_HEURISTICS_LIMIT`
partitions when the plan is not proven, and keeps it when strictly better (docs/assignors.md has the
counts against brute force, ``bench/bench_balance_bytes_quality.py``).

Locality is what the group's objective counts: cross-rack partitions
(``partitions``) or their bytes/s (``bytes``, unknown traffic at the mean).
This is a heuristic: ``optimal`` is true only when every cross-rack partition
has no local subscriber at all (no assignment can avoid it) and no owned
partition moved (the objective is crossings, then moves); otherwise the plan
reports that unavoidable part as its lower bound.  The result is checked
against the rule before it is returned (:class:`PostconditionError`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ...flow import PostconditionError
from ...model import Cluster, ConsumerGroup, ConsumerPlan, TopicPartition, is_cross_rack
from ...record import record
from ...traffic import exact_integers, exact_load_weights, group_weights, scaled_down
from ..owned import previous_owners
from .load_state import LazyMin, LoadState, LocalHeaps

#: Groups up to this many partitions also get the index variant of :func:`assign_by_load` when the plan is
#: not proven (better on some small groups; a second run of the path's work).
BOTH_HEURISTICS_LIMIT = 5_000

#: Partitions and member-topic pairs the improvement step may visit in rule checks (deterministic, never time).
IMPROVE_WORK = 2_000_000


@record(frozen=True)
class LoadPlan:
    """A plan meeting the load rule; ``cross`` its locality cost (scaled), ``bound`` the unavoidable part."""

    assignment: dict[str, list[TopicPartition]]
    cross: int
    bound: int
    scale: int
    repairs: int
    #: owned partitions (valid claims, owner still subscribed) that went to another member
    moved: int


def balance_by_load(
    cluster: Cluster, group: ConsumerGroup, prefer_local: bool = True, owned_first: bool = True
) -> LoadPlan:
    """A plan meeting the load rule with few cross-rack partitions (or bytes); see the module docstring.

    ``prefer_local``: step 1 gives a partition, of its least-loaded subscribers, to its owner when local
    to it, else to a local one (False: the lowest index); ``owned_first``: step 2 places the partitions
    local to their owners first, so an owner's target room goes to what it already reads (False: in
    weight order).  Both False is the index variant (the module docstring).
    """
    members = sorted(group.members, key=lambda m: m.member_id)
    topics = sorted({t for m in members for t in m.topics})
    topic_subs = {t: [i for i, m in enumerate(members) if t in m.topics] for t in topics}
    parts: list[TopicPartition] = [(t, p) for t in topics for p in range(len(cluster.topics[t]))]
    weight = exact_load_weights(cluster, group, parts)
    if group.objective == "bytes":
        values = group_weights(cluster, topics)
        value, scale = exact_integers([values[t][p] for t, p in parts])
    else:
        value, scale = [1] * len(parts), 0
    bits = [cluster.member_bit(m.rack) for m in members]
    rack_index = {r: k for k, r in enumerate(sorted({m.rack or "" for m in members}))}
    rack_of = [rack_index[m.rack or ""] for m in members]
    masks = cluster.masks

    def cost(p: int, i: int) -> int:
        t, q = parts[p]
        return value[p] if is_cross_rack(members[i].rack, bits[i], masks[t][q]) else 0

    index = {m.member_id: i for i, m in enumerate(members)}
    owner = {
        tp: index[mid]
        for tp, mid in previous_owners(cluster, group).items()
        if mid in index and tp[0] in members[index[mid]].topics
    }
    order = sorted(range(len(parts)), key=lambda p: (-weight[p], parts[p]))

    # Members by subscription and by rack, each a lazy heap: loads only grow in steps 1 and 2.
    rackless = [j for j, m in enumerate(members) if m.rack is None]

    # 1. targets: LPT loads; of the least-loaded subscribers, the owner if local, else a local one.
    lpt = LoadState(len(members), topic_subs, weight)
    least_local = LocalHeaps(lpt, topic_subs, bits, rackless, lpt.load.__getitem__)

    def preferred(p: int) -> list[int]:
        t, q = parts[p]
        prev = owner.get(parts[p], -1)
        local = sorted(h.top() for h in least_local.heaps(t, masks[t][q]))
        return [prev, *local] if prev >= 0 and cost(p, prev) == 0 else local

    _to_least_loaded(lpt, order, parts, preferred if prefer_local else None)
    target = lpt.load

    # 2. locality first, within the targets; the rest to the least loaded.
    s = LoadState(len(members), topic_subs, weight)
    # per (subscribers, rack bit; -1: no rack, 0: any), the member with the most room to its target
    roomiest = LocalHeaps(s, topic_subs, bits, rackless, lambda j: s.load[j] - target[j])
    deferred: list[int] = []
    for p in _owned_first(order, parts, owner, cost) if owned_first else order:
        t, q = parts[p]
        prev = owner.get(parts[p], -1)
        if prev >= 0 and cost(p, prev) == 0 and s.load[prev] + weight[p] <= target[prev]:
            chosen = prev
        else:
            tops = [(h.key(j), j) for h in roomiest.heaps(t, masks[t][q]) for j in [h.top()]]
            pick = min(tops, default=None)
            chosen = -1 if pick is None or pick[0] + weight[p] > 0 else pick[1]
        if chosen < 0:
            deferred.append(p)
        else:
            s.put(p, t, chosen)
    _to_least_loaded(s, deferred, parts)

    # 3. repair: every step lowers the sum of squared loads, so the loop ends.
    repairs = _repair(s, parts, cost, rack_of, [m.member_id for m in members])

    # 4. improve locality while the rule holds.
    _improve(s, parts, cost, topic_subs, order)

    if (bad := s.violation()) is not None:
        raise PostconditionError(f"load rule broken by member {members[bad[0]].member_id} on topic {bad[1]}")
    assignment: dict[str, list[TopicPartition]] = {m.member_id: [] for m in members}
    for p, i in enumerate(s.owner):
        if i < 0:
            raise PostconditionError(f"partition {parts[p]} left unassigned")
        assignment[members[i].member_id].append(parts[p])
    cross = sum(cost(p, i) for p, i in enumerate(s.owner))
    # unavoidable: no subscriber of the topic is in a rack holding a replica (one look per topic and mask)
    local_racks: dict[str, int] = {t: 0 for t in topics}
    for t in topics:
        for j in topic_subs[t]:
            if members[j].rack is not None:
                local_racks[t] |= bits[j]
    has_rackless = {t: any(members[j].rack is None for j in topic_subs[t]) for t in topics}
    bound = sum(
        value[p]
        for p, (t, q) in enumerate(parts)
        if not has_rackless[t] and masks[t][q] and not masks[t][q] & local_racks[t]
    )
    index_of = {tp: p for p, tp in enumerate(parts)}
    moved = sum(1 for tp, i in owner.items() if s.owner[index_of[tp]] != i)
    return LoadPlan(assignment, cross, bound, scale, repairs, moved)


def _repair(
    s: LoadState,
    parts: Sequence[TopicPartition],
    cost: Callable[[int, int], int],
    rack_of: Sequence[int],
    member_ids: Sequence[str],
) -> int:
    """While the rule is broken: the violating move that costs the least locality, then the lightest
    receiver, the heaviest partition (each move lowers the sum of squared loads: the loop ends).
    Returns the number of moves."""
    repairs = 0
    weight, load = s.weight, s.load
    while (bad := s.violation()) is not None:
        i, t = bad
        held = [(p, cost(p, i)) for p in s.held[i][t]]
        best: tuple[int, int, int, TopicPartition, int, int] | None = None
        for j in s.receivers(t, i, rack_of):
            room = load[i] - load[j]
            for p, here in held:
                if weight[p] < room:
                    key = (cost(p, j) - here, load[j], -weight[p], parts[p], j, p)
                    if best is None or key < best:
                        best = key
        if best is None:  # violation() promised a move
            raise PostconditionError(f"load rule: no move found for member {member_ids[i]}")
        j, p = best[4], best[5]
        s.take(p, t)
        s.put(p, t, j)
        repairs += 1
    return repairs


def _owned_first(
    order: Sequence[int],
    parts: Sequence[TopicPartition],
    owner: Mapping[TopicPartition, int],
    cost: Callable[[int, int], int],
) -> list[int]:
    """``order`` with the partitions local to their owner first (each part keeping its order)."""
    first = [p for p in order if parts[p] in owner and cost(p, owner[parts[p]]) == 0]
    chosen = set(first)
    return first + [p for p in order if p not in chosen]


def _to_least_loaded(
    s: LoadState,
    order: Sequence[int],
    parts: Sequence[TopicPartition],
    preferred: Callable[[int], Sequence[int]] | None = None,
) -> None:
    """Each partition, in ``order``, to its least-loaded subscriber: LPT.  Of several least loaded, the
    first of ``preferred(p)`` that is one, else the lowest index.

    Any least-loaded choice keeps LPT's guarantee (module docstring, step 1); which one decides where
    the targets put the heavy partitions, so step 1 prefers the partition's owner and its local
    subscribers: chosen by index, a heavy owned partition's target load could land on a member in
    another rack, and the partition had to cross or move (an adversarial hunt's cases: 543 B/s
    crossing where 11 could, a move where none was needed; ``tests/assignor/test_traffic.py``).
    """
    heaps: dict[int, LazyMin] = {}
    load = s.load
    for p in order:
        t = parts[p][0]
        g = s.group_of[t]
        heap = heaps.get(g)
        if heap is None:
            heap = heaps[g] = LazyMin(s.group_subs[g], load.__getitem__)
        chosen = heap.top()
        if preferred is not None:
            chosen = next((j for j in preferred(p) if load[j] == load[chosen]), chosen)
        s.put(p, t, chosen)


def _improve(
    s: LoadState,
    parts: Sequence[TopicPartition],
    c: Callable[[int, int], int],
    topic_subs: Mapping[str, Sequence[int]],
    order: Sequence[int],
) -> None:
    """Move or swap cross-rack partitions to local subscribers while the rule still holds (budgeted)."""
    budget = IMPROVE_WORK
    cross = sorted((p for p in order if c(p, s.owner[p]) > 0), key=lambda p: (-c(p, s.owner[p]), parts[p]))
    for p in cross:
        if budget <= 0:
            return
        t = parts[p][0]
        i = s.owner[p]
        if c(p, i) == 0:
            continue
        for j in sorted((j for j in topic_subs[t] if c(p, j) < c(p, i)), key=lambda j: (s.load[j], j)):
            # a move
            s.take(p, t)
            s.put(p, t, j)
            budget -= s.work()
            if s.violation() is None:
                break
            s.take(p, t)
            s.put(p, t, i)
            # a swap with a partition of j that i may hold, closest in weight, that gains overall
            done = False
            cands = sorted(
                (q for tq, qs in s.held[j].items() if i in topic_subs[tq] for q in qs),
                key=lambda q: (abs(s.weight[q] - s.weight[p]), parts[q]),
            )
            for q in cands[:8]:
                if c(p, j) + c(q, i) >= c(p, i) + c(q, j):
                    continue
                tq = parts[q][0]
                s.take(p, t)
                s.take(q, tq)
                s.put(p, t, j)
                s.put(q, tq, i)
                budget -= s.work()
                if s.violation() is None:
                    done = True
                    break
                s.take(p, t)
                s.take(q, tq)
                s.put(p, t, i)
                s.put(q, tq, j)
            if done or budget <= 0:
                break


def assign_by_load(cluster: Cluster, group: ConsumerGroup) -> ConsumerPlan:
    """``rack-optimal`` with ``balance: bytes``: the plan and its honest ``stats``."""
    if not group.members:
        return ConsumerPlan(assignment={}, revoked={}, stats={"optimal": True})
    plan = balance_by_load(cluster, group)
    # proven only at the floor of both criteria: the unavoidable crossings and no owned partition moved
    optimal = plan.cross == plan.bound and plan.moved == 0
    if not optimal and sum(map(len, plan.assignment.values())) <= BOTH_HEURISTICS_LIMIT:
        other = balance_by_load(cluster, group, prefer_local=False, owned_first=False)
        if (other.cross, other.moved) < (plan.cross, plan.moved):
            plan = other
            optimal = plan.cross == plan.bound and plan.moved == 0
    stats: dict[str, bool | int | float] = {"optimal": optimal}
    if not optimal:
        if group.objective == "bytes":
            stats["cross_rack_bytes_lower_bound"] = scaled_down(plan.bound, plan.scale)
        else:
            stats["cross_rack_lower_bound"] = plan.bound
    return ConsumerPlan(assignment=plan.assignment, revoked={}, stats=stats)
