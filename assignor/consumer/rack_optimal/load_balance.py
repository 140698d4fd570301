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

Locality is what the group's objective counts: cross-rack partitions
(``partitions``) or their bytes/s (``bytes``, unknown traffic at the mean).
This is a heuristic: ``optimal`` is true only when every cross-rack partition
has no local subscriber at all (no assignment can avoid it) and no owned
partition moved (the objective is crossings, then moves); otherwise the plan
reports that unavoidable part as its lower bound.  The result is checked
against the rule before it is returned (:class:`PostconditionError`).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Callable, Mapping, Sequence

from ...flow import PostconditionError
from ...model import Cluster, ConsumerGroup, ConsumerPlan, TopicPartition, is_cross_rack
from ...record import record
from ...traffic import exact_integers, exact_load_weights, group_weights, scaled_down
from ..owned import previous_owners

#: How many of the least-loaded subscribers a repair move considers (besides each rack's least loaded).
RECEIVERS = 8

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


class _State:
    """Who holds what, member loads and each member's lightest weight per topic held (all exact integers)."""

    def __init__(self, n_mem: int, topic_subs: Mapping[str, Sequence[int]], weight: Sequence[int]) -> None:
        self.load = [0] * n_mem
        self.held: list[dict[str, set[int]]] = [{} for _ in range(n_mem)]
        self.lightest: list[dict[str, int]] = [{} for _ in range(n_mem)]
        #: each member's lightest partition over all its topics (None: holds nothing)
        self.lightest_held: list[int | None] = [None] * n_mem
        self.owner: list[int] = [-1] * len(weight)
        self.topic_subs = topic_subs
        self.weight = weight
        #: no member whose load is at most the least load plus this can break the rule
        self.min_weight = min(weight, default=0)
        # topics with the same subscribers share one subscriber list (one for equal subscriptions)
        shared: dict[tuple[int, ...], int] = {}
        self.group_of = {t: shared.setdefault(tuple(subs), len(shared)) for t, subs in topic_subs.items()}
        self.group_subs: list[Sequence[int]] = [list(subs) for subs in shared]
        self._by_rack: dict[int, dict[int, list[int]]] = {}
        #: every member's ``(load, index)``, ascending, kept up to date once the rule is first checked
        #: (steps 1 and 2 do not need it): the rule's checks then never sort
        self._ranked: list[tuple[int, int]] | None = None

    def _reload(self, i: int, new: int) -> None:
        """Member ``i``'s load becomes ``new`` (its place in :attr:`_ranked` with it)."""
        ranked = self._ranked
        if ranked is not None:
            del ranked[bisect_left(ranked, (self.load[i], i))]
            insort(ranked, (new, i))
        self.load[i] = new

    def ranked(self) -> list[tuple[int, int]]:
        """``(load, index)`` of every member, ascending."""
        if self._ranked is None:
            self._ranked = sorted((x, i) for i, x in enumerate(self.load))
        return self._ranked

    def put(self, p: int, topic: str, i: int) -> None:
        self.owner[p] = i
        w = self.weight[p]
        self._reload(i, self.load[i] + w)
        self.held[i].setdefault(topic, set()).add(p)
        light = self.lightest[i]
        if w < light.get(topic, w + 1):
            light[topic] = w
            least = self.lightest_held[i]
            if least is None or w < least:
                self.lightest_held[i] = w

    def take(self, p: int, topic: str) -> int:
        i = self.owner[p]
        w = self.weight[p]
        self._reload(i, self.load[i] - w)
        mine = self.held[i][topic]
        mine.discard(p)
        if not mine:
            del self.held[i][topic]
            del self.lightest[i][topic]
        elif self.lightest[i][topic] == w:
            self.lightest[i][topic] = min(self.weight[q] for q in mine)
        if self.lightest_held[i] == w:
            self.lightest_held[i] = min(self.lightest[i].values(), default=None)
        self.owner[p] = -1
        return i

    def violation(self) -> tuple[int, str] | None:
        """A member and topic breaking the rule (the most loaded such member, then topic), or None.

        Members are visited by decreasing load, equal loads by increasing index, from :meth:`ranked`
        (kept sorted, never re-sorted); each topic's least-loaded other subscriber is found once per
        call; a member whose lightest partition no other subscriber could take is passed over in one
        look; and the visit stops at the first load at most the least load plus the lightest weight:
        no member from there on can break the rule (``load(B) + w >= least load + lightest weight >=
        load(A)``).  Same answer as checking every member and topic (tests/assignor/test_traffic.py).
        """
        ranked = self.ranked()
        if not ranked:
            return None
        least_load = ranked[0][0]
        floor = least_load + self.min_weight
        least: dict[int, int] = {}
        end = len(ranked)
        while end > 0:
            li = ranked[end - 1][0]
            if li <= floor:
                return None
            start = bisect_left(ranked, (li, -1), 0, end)  # the members of load li, by index
            for _, i in ranked[start:end]:
                lightest = self.lightest_held[i]
                if lightest is None or least_load + lightest >= li:
                    continue  # no topic of i can: every other subscriber has at least the least load
                light = self.lightest[i]
                for t in sorted(light):
                    other = self._least_other(t, i, least)
                    if other is not None and other + light[t] < li:
                        return i, t
            end = start
        return None

    def _least_other(self, topic: str, i: int, least: dict[int, int]) -> int | None:
        """The least load of ``topic``'s subscribers other than ``i``, None when it has no other
        (``least`` caches each group's least-loaded member for one check)."""
        g = self.group_of[topic]
        subs = self.group_subs[g]
        ranked = self._ranked
        load = self.load
        j = least.get(g)
        if j is None:
            full = ranked is not None and len(subs) == len(ranked)
            j = least[g] = ranked[0][1] if full and ranked else min(subs, key=load.__getitem__)
        if j != i:
            return load[j]
        if ranked is not None and len(subs) == len(ranked):
            return ranked[1][0] if len(ranked) > 1 else None
        return min((load[k] for k in subs if k != i), default=None)

    def receivers(self, topic: str, i: int, racks: Sequence[int]) -> list[int]:
        """Where a partition of ``topic`` on ``i`` may best go: the least-loaded other subscribers, and each rack's.

        Least loaded by ``(load, index)``: the head of :meth:`ranked` when every member subscribes, else
        a stable sort of the subscribers by load; each rack's by a ``min`` over its subscribers.
        """
        g = self.group_of[topic]
        subs = self.group_subs[g]
        by_rack = self._by_rack.get(g)
        if by_rack is None:
            by_rack = self._by_rack[g] = {}
            for j in subs:
                by_rack.setdefault(racks[j], []).append(j)
        key = self.load.__getitem__
        ranked = self.ranked()
        out: set[int] = set()
        if len(subs) == len(ranked):  # every member: the head of the ranking, each rack's first in it
            racks_left = set(by_rack) - ({racks[i]} if len(by_rack[racks[i]]) == 1 else set())
            for n, (_, j) in enumerate(x for x in ranked if x[1] != i):
                if n < RECEIVERS:
                    out.add(j)
                if racks[j] in racks_left:
                    racks_left.discard(racks[j])
                    out.add(j)
                if n + 1 >= RECEIVERS and not racks_left:
                    break
            return sorted(out)
        least = sorted(subs, key=key)[: RECEIVERS + 1]
        out.update(j for j in least if j != i)
        if len(out) > RECEIVERS:
            out.remove(least[-1])
        for ms in by_rack.values():
            first = min(ms, key=key)  # the first of equal loads: the lowest index, as (load, index) orders
            if first == i:
                rest = [j for j in ms if j != i]
                if not rest:
                    continue
                first = min(rest, key=key)
            out.add(first)
        return sorted(out)

    def work(self) -> int:
        return len(self.load) + sum(len(t) for t in self.held)


class _LazyMin:
    """The member of least ``key`` among some, for keys that only grow: a stale entry (its key grew since)
    is smaller than it should be, so it surfaces first and is refreshed in :meth:`top`.

    Ties go to the lowest member index, so the choice is deterministic.
    """

    def __init__(self, members: Sequence[int], key: Callable[[int], int]) -> None:
        self.key = key
        self.heap = [(key(j), j) for j in members]
        heapq.heapify(self.heap)

    def __bool__(self) -> bool:
        return bool(self.heap)

    def top(self) -> int:
        heap, key = self.heap, self.key
        while True:
            k, j = heap[0]
            now = key(j)
            if now == k:
                return j
            heapq.heapreplace(heap, (now, j))


def balance_by_load(cluster: Cluster, group: ConsumerGroup) -> LoadPlan:
    """A plan meeting the load rule with few cross-rack partitions (or bytes); see the module docstring."""
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

    # 1. targets: plain LPT loads.
    lpt = _State(len(members), topic_subs, weight)
    _to_least_loaded(lpt, order, parts)
    target = lpt.load

    # 2. locality first, within the targets; the rest to the least loaded.
    s = _State(len(members), topic_subs, weight)
    # per (subscribers, rack bit; -1: no rack, 0: any), the member with the most room to its target
    roomiest: dict[tuple[int, int], _LazyMin] = {}

    def local_heaps(t: str, mask: int) -> list[_LazyMin]:
        out = []
        for bit in [-1, *(1 << k for k in range(mask.bit_length()) if mask >> k & 1)] if mask else [0]:
            key = (s.group_of[t], bit)
            heap = roomiest.get(key)
            if heap is None:
                if bit == 0:  # no known replica rack: everyone is local
                    ms = topic_subs[t]
                elif bit < 0:
                    subscribed = set(topic_subs[t])
                    ms = [j for j in rackless if j in subscribed]
                else:
                    ms = [j for j in topic_subs[t] if bits[j] == bit]
                heap = roomiest[key] = _LazyMin(ms, lambda j: s.load[j] - target[j])
            if heap:
                out.append(heap)
        return out

    deferred: list[int] = []
    for p in order:
        t, q = parts[p]
        prev = owner.get(parts[p], -1)
        if prev >= 0 and cost(p, prev) == 0 and s.load[prev] + weight[p] <= target[prev]:
            chosen = prev
        else:
            tops = [(h.key(j), j) for h in local_heaps(t, masks[t][q]) for j in [h.top()]]
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
    s: _State,
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


def _to_least_loaded(s: _State, order: Sequence[int], parts: Sequence[TopicPartition]) -> None:
    """Each partition, in ``order``, to its least-loaded subscriber (lowest index on ties): LPT."""
    heaps: dict[int, _LazyMin] = {}
    load = s.load
    for p in order:
        t = parts[p][0]
        g = s.group_of[t]
        heap = heaps.get(g)
        if heap is None:
            heap = heaps[g] = _LazyMin(s.group_subs[g], load.__getitem__)
        s.put(p, t, heap.top())


def _improve(
    s: _State,
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
    stats: dict[str, bool | int | float] = {"optimal": optimal}
    if not optimal:
        if group.objective == "bytes":
            stats["cross_rack_bytes_lower_bound"] = scaled_down(plan.bound, plan.scale)
        else:
            stats["cross_rack_lower_bound"] = plan.bound
    return ConsumerPlan(assignment=plan.assignment, revoked={}, stats=stats)
