"""Kafka's ``range`` assignor, including its rack-aware variant (KIP-881, Kafka 3.5+).

The result must equal what ``org.apache.kafka.clients.consumer.RangeAssignor``
computes for the same group, so this module follows its rules exactly:

* Members are ordered as Kafka's ``MemberInfo`` sorts them: members with a
  ``group.instance.id`` first, by that id, then the others by member id
  (Java string order, i.e. by UTF-16 code units).
* Each topic is split on its own into contiguous ranges; the first
  ``partitions % subscribers`` members get one partition more.
* Rack awareness is used when some topic "needs" it: one of its subscribers
  has a rack that holds a replica of the topic, and not every partition of the
  topic has replicas on the same set of racks.  Then, before the plain ranges:
  topics with identical subscribers and the same partition count are handled
  together (partition ``p`` of all of them goes to the first member, in order,
  whose rack holds a replica of ``p`` in every one of them and whose quota
  allows it), and every other topic that needs it gives each member, in order,
  the first partitions of its rack up to its quota.  Members without a rack
  match every partition in those passes; members whose rack holds no broker
  match none.  What is left is then filled in member order, partition order,
  up to each quota.  Quotas are Kafka's: ``partitions // members`` plus one
  while members that took an extra partition are fewer than
  ``partitions % members``.

Kafka scans every unassigned partition per member; here each rack keeps a
cursor into the ordered list of its partitions (and each rack a cursor into its
ordered members), so the cost is linear in partitions times racks.
``owned`` partitions are ignored, as Kafka's range assignor ignores them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from functools import reduce
from itertools import repeat
from operator import or_

from ..model import Cluster, ConsumerGroup, ConsumerPlan, Member, TopicPartition

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up (issue 29)

if TYPE_CHECKING:
    from ..flow.compiled import Core


def _java_order(s: str) -> bytes:
    """A sort key that orders strings as Java's ``String.compareTo`` does (UTF-16 code units)."""
    return s.encode("utf-16-be", "surrogatepass")


def _member_key(m: Member) -> tuple[int, bytes, bytes]:
    """Kafka's ``MemberInfo`` order: static members by instance id, then dynamic ones by member id.

    Two static members with the same instance id compare equal in Kafka, where
    their order then depends on hash iteration; the member id breaks that tie.
    """
    if m.group_instance_id is not None:
        return (0, _java_order(m.group_instance_id), _java_order(m.member_id))
    return (1, _java_order(m.member_id), b"")


def _ascii_member_key(m: Member) -> tuple[int, str, str]:
    """:func:`_member_key` for a group whose ids are all ASCII: there Java's UTF-16 order is the code-point
    order ``str`` compares by, so no id is encoded (a third of a 23-member call's sorting: issue 29)."""
    if m.group_instance_id is not None:
        return (0, m.group_instance_id, m.member_id)
    return (1, m.member_id, "")


def kafka_member_order(members: Sequence[Member]) -> list[Member]:
    """The members in Kafka's ``MemberInfo`` order (:func:`_member_key`)."""
    ascii_ids = all(m.member_id.isascii() and (m.group_instance_id or "").isascii() for m in members)
    return sorted(members, key=_ascii_member_key if ascii_ids else _member_key)


class _TopicState:
    """One topic's progress: Kafka's ``TopicAssignmentState`` bookkeeping, with cursors for speed."""

    __slots__ = ("assigned", "consumers", "counts", "extra", "masks", "n", "owner", "per_member", "topic")

    def __init__(self, topic: str, masks: Sequence[int], consumers: list[int]) -> None:
        self.topic = topic
        self.masks = masks
        self.n = len(masks)
        #: member positions (in Kafka's member order) subscribed to the topic
        self.consumers = consumers
        self.per_member = self.n // len(consumers)
        #: Kafka's ``remainingConsumersWithExtraPartition``
        self.extra = self.n % len(consumers)
        self.counts = dict.fromkeys(consumers, 0)
        #: owner[p] = member position, -1 while unassigned
        self.owner = [-1] * self.n
        self.assigned = 0

    def max_assignable(self, c: int) -> int:
        return max(0, self.per_member + (1 if self.extra > 0 else 0) - self.counts[c])

    def give(self, c: int, partitions: list[int]) -> None:
        owner = self.owner
        for p in partitions:
            owner[p] = c
        self.assigned += len(partitions)
        n = self.counts[c] + len(partitions)
        self.counts[c] = n
        if n > self.per_member:
            self.extra -= 1


def _rack_pass_and_fill(
    state: _TopicState, bits: Sequence[int], has_rack: Sequence[bool], keys: list[int], core: Core | None
) -> None:
    """:func:`_rack_pass_py` then :func:`_fill` on a fresh topic, compiled (``core.rack_and_fill``,
    ``assignor/flow/_range.c``) where this install has the core.

    ``keys`` per member: its rack bit, or -1 without a rack.  On a 50-partition topic with 30
    subscribers the call, state included, takes about a quarter of the Python passes' time (12 against
    46 microseconds); on small unequal groups these passes were half of the whole call (issue 29).
    ``tests/assignor/test_range.py`` checks the two against each other.  The caller imports ``core``
    once per assignment: a relative import costs about a microsecond, a tenth of a small topic's turn.
    """
    if core is not None and not state.assigned:
        got = core.rack_and_fill(state.masks, state.consumers, keys, state.per_member, state.extra)
        if got is not None:
            state.owner, counts, state.extra, state.assigned = got
            state.counts = dict(zip(state.consumers, counts, strict=True))
            return
    _rack_pass_py(state, bits, has_rack)
    _fill(state)


def _rack_pass_py(state: _TopicState, bits: Sequence[int], has_rack: Sequence[bool]) -> None:
    """Kafka's ``assignRanges`` with ``racksMatch``: each member, in order, takes the first
    unassigned partitions with a replica in its rack, up to its quota.

    One loop with the state in locals (the members of a small group take a partition or two each,
    so the bookkeeping calls were most of the pass: issue 29); the same steps as a pass through
    :meth:`_TopicState.max_assignable`, a take-the-first-unassigned scan and :meth:`~_TopicState.give`,
    which ``tests/assignor/test_range.py`` checks it against.
    """
    n, masks, owner, counts = state.n, state.masks, state.owner, state.counts
    per, extra, assigned = state.per_member, state.extra, state.assigned
    # Candidates per key: a rack bit's partitions with a replica there; -1, members without a rack: all.
    candidates: dict[int, list[int] | range] = {-1: range(n)}
    cursors: dict[int, int] = {-1: 0}
    for c in state.consumers:
        if assigned == n or (per == 0 and extra == 0):
            break  # nothing left, or no quota left for anyone (quotas never grow)
        limit = per + (1 if extra > 0 else 0) - counts[c]
        if limit <= 0:
            continue
        key = bits[c] if has_rack[c] else -1
        if key == 0:
            continue  # a rack holding no broker matches no partition
        cand = candidates.get(key)
        if cand is None:
            cand = candidates[key] = [p for p in range(n) if masks[p] & key]
            cursors[key] = 0
        i, end, took = cursors[key], len(cand), 0
        while i < end and took < limit:
            p = cand[i]
            i += 1
            if owner[p] < 0:
                owner[p] = c
                took += 1
        while i < end and owner[cand[i]] >= 0:
            i += 1
        cursors[key] = i
        if took:
            assigned += took
            counts[c] += took
            if counts[c] > per:
                extra -= 1
    state.extra, state.assigned = extra, assigned


def _co_partitioned_pass(states: list[_TopicState], bits: Sequence[int], has_rack: Sequence[bool]) -> None:
    """Kafka's ``assignCoPartitionedWithRackMatching``: partition ``p`` of every topic goes to the
    first member (in order) with quota left whose rack holds a replica of ``p`` in all of them.

    The topics share subscribers and partition count and receive the same
    assignments, so their quotas move in lockstep: one set of counts stands for all of them, and each
    topic gets a copy at the end.  A member whose quota is spent never regains one, which lets each
    rack's member cursor only advance.  One loop with that state in locals, as :func:`_rack_pass_py`
    (the bookkeeping calls per topic, partition and member were half of a small equal group's call:
    issue 29); ``tests/assignor/test_range.py`` checks it against the pass through the calls.
    """
    first = states[0]
    consumers, n, per, extra = first.consumers, first.n, first.per_member, first.extra
    counts = dict(first.counts)
    owner = list(first.owner)
    assigned = first.assigned
    # Candidate lists: members without a rack (key 0) and members per rack bit, in member order.
    queues: dict[int, list[int]] = {}
    for c in consumers:
        if not has_rack[c]:
            queues.setdefault(0, []).append(c)
        elif bits[c]:
            queues.setdefault(bits[c], []).append(c)
    order = list(queues.items())
    heads = [0] * len(order)
    rank = {c: i for i, c in enumerate(consumers)}
    all_masks = [s.masks for s in states]
    for p in range(n):
        common = -1
        for m in all_masks:
            common &= m[p]
        best, best_rank = -1, len(consumers)
        quota = per + (1 if extra > 0 else 0)
        for j, (key, queue) in enumerate(order):
            if key and not (key & common):
                continue
            # The queue's first member with quota left (the same in every topic: lockstep).
            i, end = heads[j], len(queue)
            while i < end and counts[queue[i]] >= quota:
                i += 1
            heads[j] = i
            if i < end and rank[queue[i]] < best_rank:
                best, best_rank = queue[i], rank[queue[i]]
        if best >= 0:
            owner[p] = best
            assigned += 1
            counts[best] += 1
            if counts[best] > per:
                extra -= 1
    for s in states:
        s.owner, s.counts, s.extra, s.assigned = list(owner), dict(counts), extra, assigned


def _needs_rack_aware(state: _TopicState, bits: Sequence[int], prefer_rack_aware: bool) -> bool:
    """Kafka's ``useRackAwareAssignment`` for one topic (only called when a subscriber has a rack).

    A member rack holding no broker has bit 0, so it overlaps no partition rack,
    exactly as its rack string would be disjoint from the replica racks.
    """
    # Over the distinct values (C-level passes): a topic has a few replica-rack masks however many
    # partitions, and its subscribers a few racks, however many members (issue 29: the per-partition
    # and per-member loops were a fifth of range on 500 topics x 2,000 members).
    distinct = set(state.masks)
    union = reduce(or_, distinct, 0)
    member_racks = reduce(or_, set(map(bits.__getitem__, state.consumers)), 0)
    if not (member_racks & union):
        return False
    return prefer_rack_aware or len(distinct) > 1


def range_assignment(
    cluster: Cluster, group: ConsumerGroup, *, prefer_rack_aware: bool = False
) -> dict[str, list[TopicPartition]]:
    """Every member's partitions, sorted, as Kafka's ``RangeAssignor`` would assign them.

    ``prefer_rack_aware`` is Kafka's test-only ``preferRackAwareLogic``: it runs
    the rack passes even when every partition has replicas on the same racks
    (kept so Kafka's test cases that set it can be reproduced).
    """
    members = kafka_member_order(group.members)
    # Kafka drops an empty client.rack the same as an absent one.
    has_rack = [bool(m.rack) for m in members]
    bits = [cluster.member_bit(m.rack) if m.rack else 0 for m in members]

    subscribers: defaultdict[str, list[int]] = defaultdict(list)  # no spare list per (member, topic)
    for i, m in enumerate(members):
        for t in m.topics:
            subscribers[t].append(i)
    states: list[_TopicState] = []
    for t in sorted(subscribers):
        masks = cluster.masks.get(t)
        if masks:  # topics without metadata or partitions are skipped, as in Kafka
            states.append(_TopicState(t, masks, subscribers[t]))

    racked = [s for s in states if any(has_rack[c] for c in s.consumers)]
    needs = {s.topic for s in racked if _needs_rack_aware(s, bits, prefer_rack_aware)}  # once a topic
    if needs:
        # Group by subscriber set, then by partition count.  Topics whose
        # subscribers have no rack take no part (Kafka groups them under a
        # partition count of 0, which assigns nothing).
        # Imported here: a group no rack pass runs for (most, with racks that hold every replica) does not
        # load the flow package and its core, about 1.3 ms of a one-shot ``rackplan assign``.
        from ..flow.compiled import CORE

        keys = [b if r else -1 for b, r in zip(bits, has_rack, strict=True)]
        groups: dict[tuple[tuple[int, ...], int], list[_TopicState]] = {}
        for s in racked:
            groups.setdefault((tuple(s.consumers), s.n), []).append(s)
        for grouped in groups.values():
            if len(grouped) > 1:
                _co_partitioned_pass(grouped, bits, has_rack)
            elif grouped[0].topic in needs:
                _rack_pass_and_fill(grouped[0], bits, has_rack, keys, CORE)

    result: dict[str, list[TopicPartition]] = {m.member_id: [] for m in members}
    lists = [result[m.member_id] for m in members]
    for s in states:
        t = s.topic
        if s.assigned:
            _fill(s)
            for c, tp in zip(s.owner, zip(repeat(t), range(s.n)), strict=True):
                lists[c].append(tp)
            continue
        for c, first, end in plain_ranges(s):  # no rack pass took any: Kafka's plain ranges
            if end - first == 1:
                lists[c].append((t, first))
            else:
                lists[c].extend(zip(repeat(t, end - first), range(first, end), strict=True))
    # Each list is sorted as built: topics in name order, each topic's partitions ascending.
    return result


def _fill(state: _TopicState) -> None:
    """Kafka's plain ``assignRanges`` over what the rack passes left: each member, in order, takes the
    first unassigned partitions up to its quota (in one loop, as :func:`_rack_pass_py`; checked against the
    bookkeeping calls by ``tests/assignor/test_range.py``)."""
    n, owner, counts = state.n, state.owner, state.counts
    per, extra, assigned = state.per_member, state.extra, state.assigned
    cursor = 0
    for c in state.consumers:
        if assigned == n:
            break
        limit = per + (1 if extra > 0 else 0) - counts[c]
        if limit <= 0:
            continue
        took = 0
        while cursor < n and took < limit:
            if owner[cursor] < 0:
                owner[cursor] = c
                took += 1
            cursor += 1
        while cursor < n and owner[cursor] >= 0:
            cursor += 1
        if took:
            assigned += took
            counts[c] += took
            if counts[c] > per:
                extra -= 1
    state.extra, state.assigned = extra, assigned


def plain_ranges(state: _TopicState) -> list[tuple[int, int, int]]:
    """What :func:`_fill` gives a topic nothing is assigned in yet, as ``(member, first, end)`` slices.

    With nothing assigned every member's quota is ``per_member``, plus one for the first ``extra``
    members, and each takes the next contiguous slice: one step per member that gets partitions
    instead of a bookkeeping call per member and a Python step per partition (issue 29, item 4;
    equal to :func:`_fill` by ``tests/assignor/test_range.py``).  The state is not updated: nothing
    reads it after the fill.
    """
    per, extra = state.per_member, state.extra
    sizes = [per + 1] * extra + [per] * (len(state.consumers) - extra) if per else [1] * extra
    out: list[tuple[int, int, int]] = []
    first = 0
    for c, size in zip(state.consumers, sizes, strict=False):
        out.append((c, first, first + size))
        first += size
    return out


def assign(cluster: Cluster, group: ConsumerGroup) -> ConsumerPlan:
    """The range assignment; not cooperative, so nothing is revoked and owned partitions are ignored."""
    return ConsumerPlan(assignment=range_assignment(cluster, group), revoked={})
