"""cooperative-sticky at scale, against kafka-python's StickyPartitionAssignor on the same input.

    .venv/bin/python -m bench.bench_sticky            # everything (kafka-python capped at --timeout)
    .venv/bin/python -m bench.bench_sticky --quick    # fewer repeats, kafka-python capped at 30 s

Cases (3 racks, 9 brokers; members spread 60/30/10% over the racks unless "even"):

* ``leave-2100``: 2,100 members x 2,100 partitions (10 topics x 210), one
  replica per partition; the group after it converged, then one member leaves.
* ``equal-50k``: 2,000 members x 50,000 partitions (50 topics x 1,000), equal
  subscriptions: fresh with two replicas in two racks and members even; and
  one replica per partition, converged, then one member leaves (the hard case
  for Kafka's Java assignor: 23 s).
* ``unequal-20k``: 1,000 members x 20,000 partitions (100 topics x 200, two
  replicas in two racks), each member subscribing to 10-40 random topics;
  fresh, and converged then one member leaves.
* Stress, beyond the targets: a rack-blind previous round (shuffled partitions
  dealt to subscribers in turn) with one replica per partition, so thousands
  of owned partitions are cross-rack and many must move.

Timings are medians of ``assign`` on the model (wall-clock and CPU); peak memory
is ``tracemalloc``'s peak over one call.  Quality is measured over both
cooperative rounds: partitions moved in this round, cross-rack partitions
after the follow-up round (which must withhold nothing).

Peer, same input, same run: kafka-python's ``StickyPartitionAssignor``
(module ``kafka.coordinator.assignors.sticky.sticky_assignor``, KIP-54 sticky,
eager and rack-blind), its executor called directly in a child process with a
timeout.  For ``leave-2100`` we also report Kafka's own rack-aware
CooperativeStickyAssignor (Java, through ``tests/kafka_oracle.py``) on quality only.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from assignor.consumer import cross_rack_count, subscribed_partitions
from assignor.model import Cluster, ConsumerGroup, ConsumerPlan, Member
from assignor.owned import count_moved, previous_owners
from assignor.sticky_assignor import assign
from bench.common import in_child, peak_memory, peak_rss_mib, timed

RACKS = ("az-a", "az-b", "az-c")
N_BROKERS = 9


def make_cluster(n_topics: int, per_topic: int, rf: int, seed: int) -> Cluster:
    """``rf`` replicas in ``rf`` different racks; with ``rf == 1`` partitions go round robin over brokers."""
    rng = random.Random(seed)
    topics: dict[str, tuple[tuple[int, ...], ...]] = {}
    for t in range(n_topics):
        parts: list[tuple[int, ...]] = []
        for p in range(per_topic):
            if rf == 1:
                parts.append(((t * per_topic + p) % N_BROKERS,))
                continue
            reps = [rng.randrange(N_BROKERS)]
            while len(reps) < rf:
                b = rng.randrange(N_BROKERS)
                if b % 3 not in {x % 3 for x in reps}:
                    reps.append(b)
            parts.append(tuple(reps))
        topics[f"topic-{t:03d}"] = tuple(parts)
    return Cluster(broker_racks={b: RACKS[b % 3] for b in range(N_BROKERS)}, topics=topics)


def make_group(
    n: int, topics: list[str], seed: int, even: bool = False, subs: tuple[int, int] | None = None
) -> ConsumerGroup:
    rng = random.Random(seed)
    members = []
    for i in range(n):
        rack = RACKS[i % 3] if even else RACKS[0] if i % 10 < 6 else RACKS[1] if i % 10 < 9 else RACKS[2]
        mine = sorted(topics) if subs is None else sorted(rng.sample(sorted(topics), rng.randint(*subs)))
        members.append(Member(f"member-{i:05d}", rack, tuple(mine)))
    return ConsumerGroup("bench", "cooperative-sticky", tuple(members))


def owning(group: ConsumerGroup, plan: ConsumerPlan) -> ConsumerGroup:
    gen = max(m.generation for m in group.members) + 1
    return replace(
        group,
        members=tuple(
            replace(m, owned=tuple(plan.assignment.get(m.member_id, ())), generation=gen)
            for m in group.members
        ),
    )


def converged(cluster: Cluster, group: ConsumerGroup) -> ConsumerGroup:
    for _ in range(4):
        plan = assign(cluster, group)
        group = owning(group, plan)
        if not plan.revoked:
            return group
    raise AssertionError("did not converge")


def random_owners(cluster: Cluster, group: ConsumerGroup, seed: int) -> ConsumerGroup:
    """A rack-blind previous round: shuffled partitions dealt to subscribers in turn (many must move)."""
    rng = random.Random(seed)
    parts = [(t, p) for t in sorted(cluster.topics) for p in range(len(cluster.topics[t]))]
    rng.shuffle(parts)
    subs = [set(m.topics) for m in group.members]
    owned: list[list[tuple[str, int]]] = [[] for _ in group.members]
    i = 0
    for tp in parts:
        for _ in range(len(subs)):
            k = i % len(subs)
            i += 1
            if tp[0] in subs[k]:
                owned[k].append(tp)
                break
    return replace(
        group,
        members=tuple(
            replace(m, owned=tuple(o), generation=1) for m, o in zip(group.members, owned, strict=True)
        ),
    )


def one_leaves(group: ConsumerGroup) -> ConsumerGroup:
    """The group without its middle member."""
    mid = len(group.members) // 2
    return replace(group, members=group.members[:mid] + group.members[mid + 1 :])


@dataclass
class Case:
    name: str
    cluster: Cluster
    group: ConsumerGroup


def cases() -> list[Case]:
    out = []
    c = make_cluster(10, 210, 1, seed=1)
    g = make_group(2100, sorted(c.topics), seed=2)
    out.append(Case("leave-2100 (rf 1, one of 2,100 leaves)", c, one_leaves(converged(c, g))))
    c = make_cluster(50, 1000, 2, seed=1)
    out.append(
        Case("equal-50k fresh (rf 2, racks even)", c, make_group(2000, sorted(c.topics), 2, even=True))
    )
    c = make_cluster(50, 1000, 1, seed=1)
    g = make_group(2000, sorted(c.topics), seed=2)
    out.append(Case("equal-50k (rf 1, one of 2,000 leaves)", c, one_leaves(converged(c, g))))
    out.append(Case("equal-50k (rf 1, rack-blind previous owners)", c, random_owners(c, g, 5)))
    c = make_cluster(100, 200, 2, seed=3)
    g = make_group(1000, sorted(c.topics), seed=4, subs=(10, 40))
    out.append(Case("unequal-20k fresh", c, g))
    out.append(Case("unequal-20k (one of 1,000 leaves)", c, one_leaves(converged(c, g))))
    c = make_cluster(100, 200, 1, seed=3)
    out.append(Case("unequal-20k (rf 1, rack-blind previous owners)", c, random_owners(c, g, 5)))
    return out


# ---- ours --------------------------------------------------------------------------------------


def measure(case: Case, repeats: int) -> dict[str, Any]:
    t = timed(partial(assign, case.cluster, case.group), repeats)
    peak = peak_memory(partial(assign, case.cluster, case.group))
    quality = two_rounds(assign, case.cluster, case.group)
    return {
        "time": t.wall,
        "cpu": t.cpu,
        "peak": peak,
        "plan": t.result,
        **quality,
    }


def two_rounds(
    assignor: Callable[[Cluster, ConsumerGroup], ConsumerPlan], cluster: Cluster, group: ConsumerGroup
) -> dict[str, Any]:
    subscribed = subscribed_partitions(cluster, group)
    plan = assignor(cluster, group)
    group2 = owning(group, plan)
    final = assignor(cluster, group2)
    counts = [len(v) for v in final.assignment.values()]
    return {
        "moved": count_moved(plan, previous_owners(cluster, group), subscribed),
        "moved2": count_moved(final, previous_owners(cluster, group2), subscribed),
        "cross": cross_rack_count(cluster, group2, final),
        "spread": max(counts) - min(counts),
    }


# ---- kafka-python's StickyPartitionAssignor ----------------------------------------------------------


class _KafkaPythonCluster:
    """The two ClusterMetadata calls kafka-python's sticky executor makes."""

    def __init__(self, cluster: Cluster) -> None:
        self._parts = {t: set(range(len(p))) for t, p in cluster.topics.items()}

    def topics(self) -> set[str]:
        return set(self._parts)

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return self._parts.get(topic)


def kafka_python_assign(cluster: Cluster, group: ConsumerGroup) -> dict[str, list[tuple[str, int]]]:
    from kafka.coordinator.assignors.sticky.sticky_assignor import (
        StickyAssignmentExecutor,
        StickyAssignorMemberMetadataV1,
    )
    from kafka.structs import TopicPartition

    members = {
        m.member_id: StickyAssignorMemberMetadataV1(
            subscription=list(m.topics),
            partitions=[TopicPartition(t, p) for t, p in m.owned],
            generation=m.generation,
        )
        for m in group.members
    }
    executor = StickyAssignmentExecutor(_KafkaPythonCluster(cluster), members)
    executor.perform_initial_assignment()
    executor.balance()
    return {m: [(tp.topic, tp.partition) for tp in executor.current_assignment[m]] for m in members}


def _kafka_python_measured(case: Case, repeats: int) -> tuple[float, int, int, int]:
    t = timed(partial(kafka_python_assign, case.cluster, case.group), repeats)
    plan = ConsumerPlan(assignment=t.result)
    moved = count_moved(
        plan, previous_owners(case.cluster, case.group), subscribed_partitions(case.cluster, case.group)
    )
    counts = [len(v) for v in t.result.values()]
    return t.wall, moved, cross_rack_count(case.cluster, case.group, plan), max(counts) - min(counts)


def kafka_python_timed(case: Case, repeats: int, timeout: float) -> tuple[float, int, int, int] | None:
    """kafka-python's (median seconds, moved, cross-rack, max-min) in a child process; None on timeout."""
    return in_child(_kafka_python_measured, (case, repeats), timeout)


def kafka_java(cluster: Cluster, group: ConsumerGroup) -> ConsumerPlan:
    """Kafka 4.3.1's own CooperativeStickyAssignor through the oracle (tests/kafka_oracle.py)."""
    from tests.kafka_oracle import session_oracle

    return session_oracle().plan(cluster, group)


# ---- main --------------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 repeats, kafka-python capped at 30 s")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds for kafka-python per case")
    args = ap.parse_args(argv)
    repeats = 3 if args.quick else 7
    timeout = 30.0 if args.quick else args.timeout

    print(
        "| case | members x partitions | median | median CPU | peak traced | moved | cross-rack after follow-up "
        "| max-min | follow-up moves | kafka-python | ratio | kafka-python moved / max-min |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for case in cases():
        mine = measure(case, repeats)
        n_parts = len(subscribed_partitions(case.cluster, case.group))
        peer = kafka_python_timed(case, 3 if not args.quick else 1, timeout)
        if peer is None:
            peer_cols = f"> {timeout:.0f} s (timeout) | > {timeout / mine['time']:,.0f}x | - |"
        else:
            t, moved, _cross, spread = peer
            peer_cols = f"{t:,.2f} s | {t / mine['time']:,.0f}x | {moved:,} / {spread} |"
        print(
            f"| {case.name} | {len(case.group.members):,} x {n_parts:,} | {mine['time'] * 1000:,.0f} ms "
            f"| {mine['cpu'] * 1000:,.0f} ms | {mine['peak'] / 2**20:,.0f} MiB | {mine['moved']:,} "
            f"| {mine['cross']:,} | {mine['spread']} | {mine['moved2']} | {peer_cols}",
            flush=True,
        )
    print(f"\nPeak resident memory of this process: {peak_rss_mib():,.0f} MiB")

    case = cases()[0]
    print(f"\nQuality on {case.name}, both cooperative rounds:\n")
    print("| assignor | moved | cross-rack before | cross-rack after follow-up | max-min |")
    print("|---|---|---|---|---|")
    before = cross_rack_count(
        case.cluster, case.group, ConsumerPlan({m.member_id: list(m.owned) for m in case.group.members})
    )
    for name, fn in (
        ("cooperative-sticky (ours)", assign),
        ("Kafka 4.3.1 CooperativeStickyAssignor (Java)", kafka_java),
    ):
        q = two_rounds(fn, case.cluster, case.group)
        print(f"| {name} | {q['moved'] + q['moved2']:,} | {before:,} | {q['cross']:,} | {q['spread']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
