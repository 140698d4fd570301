"""cooperative-sticky at scale, against Kafka's own Java CooperativeStickyAssignor on the same input.

    .venv/bin/python -m bench.bench_sticky            # everything
    .venv/bin/python -m bench.bench_sticky --quick    # fewer repeats, fewer random cases
    .venv/bin/python -m bench.bench_sticky --wide     # only 10,000 topics x 1,000 members, against rack-optimal

Needs Java 17 and Maven: Kafka 4.3.1's assignor runs in the oracle harness
(``oracle/``, driven by ``tests/kafka_oracle.py``), one JVM for the whole run.

Cases (3 racks, 9 brokers; members spread 60/30/10% over the racks unless "even"):

* ``leave-2100``: 2,100 members x 2,100 partitions (10 topics x 210), one
  replica per partition; the group after it converged, then one member leaves.
* ``equal-50k``: 2,000 members x 50,000 partitions (50 topics x 1,000), equal
  subscriptions: fresh with two replicas in two racks and members even; and
  one replica per partition, converged, then one member leaves.
* ``unequal-20k``: 1,000 members x 20,000 partitions (100 topics x 200, two
  replicas in two racks), each member subscribing to 10-40 random topics;
  fresh, and converged then one member leaves.
* Stress: a rack-blind previous round (shuffled partitions dealt to
  subscribers in turn) with one replica per partition, so thousands of owned
  partitions are cross-rack and many must move.

Timings.  Ours: medians of ``assign`` on the model (wall-clock and CPU; the
call includes settling the follow-up round); peak memory is ``tracemalloc``'s
peak over one call.  Kafka: ``assign(Cluster, GroupSubscription)`` inside the
JVM, timed there with ``System.nanoTime`` over repeated calls on the same
input after a first, untimed call (JIT-warmed; JSON parsing and building the
subscriptions are outside the timed region).  Ratio: Kafka's median / ours.

Quality: both assignors run cooperative rounds from the same input until a
round withholds nothing (each member then owns what it was given, one
generation later): rounds needed, partitions moved over all rounds,
cross-rack partitions and max-min after settling.

Settling study: random unequal-subscription groups with racks (10-40
members, 120-400 partitions, one to three replicas), settled by Kafka, then
replicas reassigned or one member leaving; rounds to settle (up to 10) and
cross-rack partitions after settling, for both.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from bench.common import peak_memory, peak_rss_mib, timed
from rackplan.assignor.consumer import cross_rack_count, subscribed_partitions
from rackplan.assignor.consumer.owned import count_moved, previous_owners
from rackplan.assignor.consumer.rack_optimal import assign as rack_optimal_assign
from rackplan.assignor.consumer.sticky import assign
from rackplan.assignor.model import Cluster, ConsumerGroup, ConsumerPlan, Member
from rackplan.assignor.record import replace

if TYPE_CHECKING:  # imported only when the oracle is used (it needs pytest)
    from tests.kafka_oracle import KafkaOracle

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


# ---- Kafka's Java assignor (the oracle harness) ------------------------------------------------


def kafka_java(cluster: Cluster, group: ConsumerGroup) -> ConsumerPlan:
    """Kafka 4.3.1's own CooperativeStickyAssignor through the oracle (tests/kafka_oracle.py)."""
    return _oracle().plan(cluster, group)


def _oracle() -> KafkaOracle:
    from tests.kafka_oracle import KafkaOracle, build_jar

    global _ORACLE
    if _ORACLE is None:
        _ORACLE = KafkaOracle(build_jar())
    return _ORACLE


_ORACLE: KafkaOracle | None = None


def kafka_java_timed(case: Case, repeats: int) -> float:
    """Median seconds of Kafka's ``assign`` over ``repeats`` warm calls inside the JVM."""
    from tests.kafka_oracle import document

    doc = document(case.cluster, case.group)
    doc["oracle_repeat"] = repeats
    answer = _oracle().answer_many([doc])[0]
    if "error" in answer:
        raise RuntimeError(answer["error"])
    return float(statistics.median(answer["oracle_timing_ns"])) / 1e9


@dataclass
class Settled:
    rounds: int | None  # None: not settled within the limit
    moved: int
    cross: int
    spread: int


def settle_rounds(
    assignor: Callable[[Cluster, ConsumerGroup], ConsumerPlan],
    cluster: Cluster,
    group: ConsumerGroup,
    limit: int = 10,
) -> Settled:
    """Cooperative rounds until one withholds nothing (see the module docstring)."""
    subscribed = subscribed_partitions(cluster, group)
    moved = 0
    for r in range(1, limit + 1):
        plan = assignor(cluster, group)
        moved += count_moved(plan, previous_owners(cluster, group), subscribed)
        assigned = {tp for v in plan.assignment.values() for tp in v}
        nxt = owning(group, plan)
        if assigned >= subscribed:
            counts = [len(v) for v in plan.assignment.values()]
            return Settled(r, moved, cross_rack_count(cluster, group, plan), max(counts) - min(counts))
        group = nxt
    return Settled(None, moved, cross_rack_count(cluster, group, plan), -1)


def random_unequal(rng: random.Random) -> tuple[Cluster, ConsumerGroup]:
    """10-40 members over three racks, 120-400 partitions in 6-20 topics, 1-3 replicas in distinct racks."""
    n_topics = rng.randint(6, 20)
    total = rng.randint(120, 400)
    topics: dict[str, tuple[tuple[int, ...], ...]] = {}
    for t in range(n_topics):
        rf = rng.randint(1, 3)
        parts = []
        for _ in range(max(1, total // n_topics)):
            racks = rng.sample(range(3), rf)
            parts.append(tuple(r + 3 * rng.randrange(3) for r in racks))
        topics[f"topic-{t:02d}"] = tuple(parts)
    cluster = Cluster(broker_racks={b: RACKS[b % 3] for b in range(N_BROKERS)}, topics=topics)
    names = sorted(topics)
    members = tuple(
        Member(
            f"member-{i:03d}", rng.choice(RACKS), tuple(sorted(rng.sample(names, rng.randint(1, len(names)))))
        )
        for i in range(rng.randint(10, 40))
    )
    return cluster, ConsumerGroup("bench", "cooperative-sticky", members)


def changed(rng: random.Random, cluster: Cluster, group: ConsumerGroup) -> tuple[str, Cluster, ConsumerGroup]:
    """Replicas of a quarter of the partitions reassigned, or one member leaving."""
    if rng.random() < 0.5:
        topics = {
            t: tuple(
                tuple(r + 3 * rng.randrange(3) for r in rng.sample(range(3), len(reps)))
                if rng.random() < 0.25
                else reps
                for reps in parts
            )
            for t, parts in cluster.topics.items()
        }
        return "reassigned", Cluster(cluster.broker_racks, topics), group
    members = list(group.members)
    members.pop(rng.randrange(len(members)))
    return "leave", cluster, replace(group, members=tuple(members))


def settling_study(n_cases: int, seed: int = 10) -> None:
    rng = random.Random(seed)
    rows: list[tuple[Settled, Settled]] = []
    for _ in range(n_cases):
        cluster, group = random_unequal(rng)
        start = settle_rounds(kafka_java, cluster, group)
        if start.rounds is None:
            continue
        # the group as Kafka left it: replay Kafka's rounds to get the owned partitions
        g = group
        for _ in range(start.rounds):
            g = owning(g, kafka_java(cluster, g))
        _kind, c2, g2 = changed(rng, cluster, g)
        rows.append((settle_rounds(assign, c2, g2), settle_rounds(kafka_java, c2, g2)))
    both = [(m, k) for m, k in rows if k.rounds is not None and m.rounds is not None]
    print(f"\nSettling study: {len(rows)} random unequal groups with racks, Kafka-settled, then changed\n")
    print("| | rackplan | Kafka 4.3.1 |")
    print("|---|---|---|")
    unsettled_k = sum(1 for _, k in rows if k.rounds is None)
    unsettled_m = sum(1 for m, _ in rows if m.rounds is None)
    max_m = max((m.rounds or 0) for m, _ in rows)
    max_k = max((k.rounds or 0) for _, k in rows)
    print(f"| not settled within 10 rounds | {unsettled_m} | {unsettled_k} |")
    print(f"| most rounds to settle (settled cases) | {max_m} | {max_k} |")
    print(
        f"| mean rounds to settle (settled cases) | {statistics.mean(m.rounds or 0 for m, _ in rows):.2f} "
        f"| {statistics.mean(k.rounds for _, k in rows if k.rounds is not None):.2f} |"
    )
    print(
        f"| cross-rack after settling (both settled: {len(both)}) | {sum(m.cross for m, _ in both):,} "
        f"| {sum(k.cross for _, k in both):,} |"
    )
    print(
        f"| partitions moved, all rounds (both settled) | {sum(m.moved for m, _ in both):,} | {sum(k.moved for _, k in both):,} |"
    )
    worse = sum(1 for m, k in both if m.cross > k.cross)
    better = sum(1 for m, k in both if m.cross < k.cross)
    more_moves = sum(1 for m, k in both if m.cross == k.cross and m.moved > k.moved)
    print(
        f"\nrackplan more cross-rack than Kafka: {worse} of {len(both)}; fewer: {better}; "
        f"as many but more moves: {more_moves}"
    )


# ---- main --------------------------------------------------------------------------------------


def wide_topics(repeats: int) -> None:
    """Issue 17's case: 10,000 topics of 1-3 partitions, unequal subscriptions; ours against rack-optimal."""
    from bench.bench_rack_optimal import unequal_case

    cluster, group = unequal_case(4, 1000, 10000, 2, 40)
    sticky = replace(group, assignor="cooperative-sticky")
    print(
        "\n| 10,000 topics, 1,000 members | partitions | cooperative-sticky median CPU | wall "
        "| rack-optimal median CPU | wall | cross-rack sticky / rack-optimal |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, g in (("fresh", sticky), ("one of 1,000 leaves", one_leaves(converged(cluster, sticky)))):
        ours = timed(partial(assign, cluster, g), repeats)
        optimal_group = replace(g, assignor="rack-optimal")
        opt = timed(partial(rack_optimal_assign, cluster, optimal_group), repeats)
        n_parts = len(subscribed_partitions(cluster, g))
        cross_ours = cross_rack_count(cluster, g, assign(cluster, g))
        cross_opt = cross_rack_count(cluster, g, rack_optimal_assign(cluster, optimal_group))
        print(
            f"| {name} | {n_parts:,} | {ours.cpu * 1000:,.0f} ms | {ours.wall * 1000:,.0f} ms "
            f"| {opt.cpu * 1000:,.0f} ms | {opt.wall * 1000:,.0f} ms | {cross_ours:,} / {cross_opt:,} |",
            flush=True,
        )


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 repeats, 20 random cases in the settling study")
    ap.add_argument("--study", type=int, default=80, help="random cases in the settling study (0: none)")
    ap.add_argument("--only", default="", help="run only the cases whose name contains this text")
    ap.add_argument("--wide", action="store_true", help="only the 10,000-topic case, against rack-optimal")
    args = ap.parse_args(argv)
    repeats = 3 if args.quick else 7
    if args.wide:
        wide_topics(repeats)
        return 0
    study = 20 if args.quick else args.study

    print(
        "| case | members x partitions | median | median CPU | peak traced | Kafka median (JIT-warm) | Kafka / ours "
        "| rounds ours / Kafka | moved ours / Kafka | cross-rack ours / Kafka | max-min ours / Kafka |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for case in cases():
        if args.only not in case.name:
            continue
        t = timed(partial(assign, case.cluster, case.group), repeats)
        peak = peak_memory(partial(assign, case.cluster, case.group))
        n_parts = len(subscribed_partitions(case.cluster, case.group))
        k_time = kafka_java_timed(case, repeats)
        mine = settle_rounds(assign, case.cluster, case.group)
        theirs = settle_rounds(kafka_java, case.cluster, case.group)
        print(
            f"| {case.name} | {len(case.group.members):,} x {n_parts:,} | {t.wall * 1000:,.0f} ms "
            f"| {t.cpu * 1000:,.0f} ms | {peak / 2**20:,.0f} MiB | {k_time * 1000:,.0f} ms | {k_time / t.wall:,.1f}x "
            f"| {mine.rounds} / {theirs.rounds or '> 10'} | {mine.moved:,} / {theirs.moved:,} "
            f"| {mine.cross:,} / {theirs.cross:,} | {mine.spread} / {theirs.spread} |",
            flush=True,
        )
    print(f"\nPeak resident memory of this process: {peak_rss_mib():,.0f} MiB")
    if study:  # --study 0: the cases alone
        settling_study(study)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
