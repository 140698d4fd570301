"""A plain model of Kafka's rack-aware constrained sticky assignment, as a baseline for comparisons.

It follows the steps of ``AbstractStickyAssignor.ConstrainedAssignmentBuilder``
(Kafka 3.5+, KIP-881): keep each member's rack-matching owned partitions up to
its quota (the first members to own ``maxQuota`` keep that many, the others
``minQuota``), drop every owned partition whose rack does not match, deal the
rest rack-aware round robin (partitions with the fewest same-rack consumers
first), then plain round robin, with the KAFKA-15170 fix (3.5.1+: the rack
pass stops promoting members to ``maxQuota`` once ``P % N`` have it).  Members are visited in the
given order (Kafka's hash-map order), sorted ids by default.  Previous owners follow :mod:`assignor.owned`, so the
comparison is on the same input; the result is the *target* (what Kafka hands
out plus what it would withhold), to be fed to
:func:`assignor.owned.withhold_moving` for a fair cooperative round.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from assignor.model import Cluster, ConsumerGroup, Member, TopicPartition
from assignor.owned import previous_owners


def kafka_constrained(
    cluster: Cluster, group: ConsumerGroup, order: Sequence[str] | None = None
) -> dict[str, list[TopicPartition]]:
    """Kafka's target assignment; ``order`` is its hash-map order of members (default: sorted ids)."""
    members = list(order) if order is not None else sorted(m.member_id for m in group.members)
    racks = {m.member_id: m.rack for m in group.members if m.rack}
    topics = sorted(group.members[0].topics)
    parts = [(t, p) for t in topics for p in range(len(cluster.topics[t]))]
    owners = previous_owners(cluster, group)
    part_racks = {tp: cluster.replica_racks(*tp) for tp in parts}
    all_racks: set[str] = set().union(*part_racks.values()) if parts else set()
    # AbstractPartitionAssignor.useRackAwareAssignment (preferRackAwareLogic off)
    rack_aware = (
        bool(racks)
        and not set(racks.values()).isdisjoint(all_racks)
        and not all(r == all_racks for r in part_racks.values())
    )

    def mismatch(m: str, tp: TopicPartition) -> bool:
        r = racks.get(m) if rack_aware else None
        return r is not None and r not in part_racks[tp]

    n, total = len(members), len(parts)
    min_q, max_q = total // n, -(-total // n)
    expected_over, current_over = total % n, 0
    assignment: dict[str, list[TopicPartition]] = {m: [] for m in members}
    under: list[str] = []
    exact: list[str] = []
    for m in members:
        own = sorted(
            (tp for tp, o in owners.items() if o == m and tp[0] in topics and not mismatch(m, tp)),
            key=lambda tp: (tp[1], tp[0]),
        )
        if len(own) < min_q:
            assignment[m] += own
            under.append(m)
        elif len(own) >= max_q and current_over < expected_over:
            current_over += 1
            if current_over == expected_over:
                exact.clear()
            assignment[m] += own[:max_q]
        else:
            assignment[m] += own[:min_q]
            if current_over < expected_over:
                exact.append(m)
    taken = {tp for v in assignment.values() for tp in v}
    unassigned = [tp for tp in parts if tp not in taken]
    under.sort()
    exact.sort()
    if racks:  # numConsumersByPartition exists whenever some consumer has a rack
        per_rack = Counter(racks.values())
        unassigned.sort(key=lambda tp: sum(per_rack.get(r, 0) for r in part_racks[tp]))

    def next_rack(tp: TopicPartition, lst: list[str], first: int) -> int:
        for i in range(len(lst)):
            idx = (first + i) % len(lst)
            if racks.get(lst[idx]) in part_racks[tp]:
                return idx
        return -1

    if rack_aware:  # assignRackAwareRoundRobin
        nxt = 0
        rest = []
        for tp in unassigned:
            consumer = None
            idx = next_rack(tp, under, nxt)
            if idx >= 0:
                consumer = under[idx]
                count = len(assignment[consumer]) + 1
                if count >= min_q:
                    under.remove(consumer)
                    if count < max_q and current_over < expected_over:
                        exact.append(consumer)
                else:
                    idx += 1
                nxt = idx % len(under) if under else 0
            elif exact:
                first = next_rack(tp, exact, 0)
                if first >= 0:
                    consumer = exact[first]
                    if len(assignment[consumer]) + 1 == max_q:
                        exact.pop(first)
                        current_over += 1
                        if current_over == expected_over:
                            exact.clear()
            if consumer is None:
                rest.append(tp)
            else:
                assignment[consumer].append(tp)
        unassigned = rest

    pos = 0  # assignRoundRobin: an iterator over the under-quota members
    for tp in unassigned:
        if pos < len(under):
            consumer = under[pos]
            pos += 1
        elif not under:
            consumer = exact.pop(0)
        else:
            consumer = under[0]
            pos = 1
        assignment[consumer].append(tp)
        if len(assignment[consumer]) == min_q and pos > 0 and under[pos - 1] == consumer:
            under.pop(pos - 1)
            pos -= 1
            exact.append(consumer)
    return {m: sorted(v) for m, v in assignment.items()}


# ---- the model against Kafka's own expectations (AbstractStickyAssignorTest) --------------------


def _rack_case(rf: int, brokers: list[str | None], owned: list[str] | None = None) -> dict[str, list[str]]:
    from assignor.owned import withhold_moving
    from tests.strategies import follow_up
    from tests.test_range import kafka_cluster, racks, tps

    cluster = kafka_cluster({"t1": 6, "t2": 7, "t3": 2}, rf, brokers)
    group = ConsumerGroup(
        "g",
        "cooperative-sticky",
        tuple(
            Member(f"consumer{i}", rack, ("t1", "t2", "t3"), tuple(tps(owned[i])) if owned else (), 1)
            for i, rack in enumerate(racks(3))
        ),
    )
    plan = withhold_moving(kafka_constrained(cluster, group), previous_owners(cluster, group))
    group = follow_up(group, plan)
    plan = withhold_moving(kafka_constrained(cluster, group), previous_owners(cluster, group))
    return {m: [f"{t}-{p}" for t, p in v] for m, v in plan.assignment.items()}


ALIGNED = {
    "consumer0": ["t1-0", "t1-3", "t2-0", "t2-3", "t2-6"],
    "consumer1": ["t1-1", "t1-4", "t2-1", "t2-4", "t3-0"],
    "consumer2": ["t1-2", "t1-5", "t2-2", "t2-5", "t3-1"],
}


def test_model_reproduces_kafkas_rack_aware_uniform_expectations() -> None:
    # testRackAwareAssignmentWithUniformSubscription: rack-aligned with one and two replicas, the
    # plain round robin when every partition has the same racks, and alignment restored from
    # misaligned owned partitions.
    from tests.test_range import racks

    assert _rack_case(1, racks(3)) == ALIGNED
    assert _rack_case(2, racks(3)) == ALIGNED
    assert _rack_case(3, racks(2)) == ALIGNED
    misaligned = [
        "t1-0, t1-1, t1-2, t1-3, t1-4",
        "t1-5, t2-0, t2-1, t2-2, t2-3",
        "t2-4, t2-5, t2-6, t3-0, t3-1",
    ]
    assert _rack_case(1, racks(3), misaligned) == ALIGNED
