"""rack-optimal at scale, and against networkx min-cost flow on the full member x partition graph.

    .venv/bin/python -m bench.bench_rack_optimal            # everything, writes nothing
    .venv/bin/python -m bench.bench_rack_optimal --quick    # fewer repeats, smaller ladder

Cases (3 racks, replication factor 2 with rack-aware replica placement, equal
subscriptions unless named otherwise):

* ``fresh``: 2,000 members x 50,000 partitions, members spread 60/30/10 over the
  racks, nobody owns anything.
* ``leave``: the same group after it ran ``fresh``; one member leaves.
* ``racks-moved``: after ``fresh``, 10% of the partitions get new replicas.
* ``rf1``: one replica per partition, so cross-rack reads are unavoidable;
  one of 2,000 members leaves; or the previous owners are a random balanced
  assignment (many moves needed).
* ``unequal``: 100 members with random subscriptions over 40 topics x 50
  partitions (the contract's sample shape), and 1,000 members over 100 topics
  x 200 partitions.

Then the exact path for unequal subscriptions (``--exact-only`` runs just this
table): each case in a child process with a timeout, against the fair optimum
(``rack_optimal.fair_assign``, what rack-optimal returned before) and the
per-partition lower bound.  Random subscriptions over few large topics (the
bound certifies the fair optimum), over many two-partition topics (the
mixed-integer program has to run: a ladder of sizes up to 1,000 members x
20,000 partitions over 10,000 topics), and a rolling upgrade (half the members
subscribe to one topic fewer) with one replica per partition.

The baseline solves the same lexicographic problem (cross-rack first, then
moves, with the balance constraints) with ``networkx.network_simplex`` on the
full member x partition graph.  That graph has members x partitions edges, so
the baseline runs on a ladder of smaller sizes, each in a child process with a
timeout; the ratio is its time over rack-optimal's on the same instance.
"""

from __future__ import annotations

import argparse
import random
import sys
from functools import partial

from bench.common import in_child, peak_memory, peak_rss_mib, timed
from rackplan.assignor.consumer import cross_rack_count
from rackplan.assignor.consumer.owned import previous_owners
from rackplan.assignor.consumer.rack_optimal import assign, fair_assign
from rackplan.assignor.model import (
    Cluster,
    ConsumerGroup,
    ConsumerPlan,
    Member,
    TopicPartition,
    is_cross_rack,
)
from rackplan.assignor.record import replace

RACKS = ("az-a", "az-b", "az-c")


def make_cluster(
    n_topics: int, parts_per_topic: int, seed: int, brokers_per_rack: int = 3, rf: int = 2
) -> Cluster:
    """Rack-aware placement: a partition's two replicas sit in two different racks."""
    rng = random.Random(seed)
    n_brokers = brokers_per_rack * len(RACKS)
    broker_racks = {b: RACKS[b % len(RACKS)] for b in range(n_brokers)}
    topics: dict[str, tuple[tuple[int, ...], ...]] = {}
    for t in range(n_topics):
        parts: list[tuple[int, ...]] = []
        for _ in range(parts_per_topic):
            first = rng.randrange(n_brokers)
            if rf == 1:
                parts.append((first,))
                continue
            second = rng.choice([b for b in range(n_brokers) if b % len(RACKS) != first % len(RACKS)])
            parts.append((first, second))
        topics[f"topic-{t:03d}"] = tuple(parts)
    return Cluster(broker_racks=broker_racks, topics=topics)


def make_group(n_members: int, topics: list[str], seed: int, skew: bool = True) -> ConsumerGroup:
    rng = random.Random(seed)
    weights = (6, 3, 1) if skew else (1, 1, 1)
    members = tuple(
        Member(f"member-{i:05d}", rng.choices(RACKS, weights)[0], tuple(sorted(topics)))
        for i in range(n_members)
    )
    return ConsumerGroup("bench", "rack-optimal", members)


def owning(group: ConsumerGroup, plan: ConsumerPlan, generation: int = 1) -> ConsumerGroup:
    return replace(
        group,
        members=tuple(
            replace(m, owned=tuple(plan.assignment.get(m.member_id, ())), generation=generation)
            for m in group.members
        ),
    )


def random_plan(cluster: Cluster, group: ConsumerGroup, seed: int) -> ConsumerPlan:
    """A balanced assignment that ignores racks: a plausible previous round of another assignor."""
    rng = random.Random(seed)
    parts = [(t, p) for t in sorted(cluster.topics) for p in range(len(cluster.topics[t]))]
    rng.shuffle(parts)
    ids = [m.member_id for m in group.members]
    out: dict[str, list[TopicPartition]] = {m: [] for m in ids}
    for i, tp in enumerate(parts):
        out[ids[i % len(ids)]].append(tp)
    return ConsumerPlan(assignment=out)


def move_replicas(cluster: Cluster, fraction: float, seed: int) -> Cluster:
    rng = random.Random(seed)
    n_brokers = len(cluster.broker_racks)
    topics = {}
    for t, parts in cluster.topics.items():
        new = []
        for replicas in parts:
            if rng.random() < fraction:
                first = rng.randrange(n_brokers)
                second = rng.choice([b for b in range(n_brokers) if b % 3 != first % 3])
                replicas = (first, second)
            new.append(replicas)
        topics[t] = tuple(new)
    return Cluster(broker_racks=dict(cluster.broker_racks), topics=topics)


def unequal_case(
    seed: int, n_members: int = 100, n_topics: int = 40, parts_per_topic: int = 50, most: int = 20
) -> tuple[Cluster, ConsumerGroup]:
    rng = random.Random(seed)
    cluster = make_cluster(n_topics, parts_per_topic, seed)
    topics = sorted(cluster.topics)
    members = tuple(
        Member(
            f"member-{i:05d}",
            rng.choices(RACKS, (6, 3, 1))[0],
            tuple(sorted(rng.sample(topics, rng.randint(5, most)))),
        )
        for i in range(n_members)
    )
    return cluster, ConsumerGroup("bench", "rack-optimal", members)


def moves(cluster: Cluster, group: ConsumerGroup, plan: ConsumerPlan) -> int:
    subs = {m.member_id: set(m.topics) for m in group.members}
    holder = {tp: mid for mid, parts in plan.assignment.items() for tp in parts}
    return sum(
        1
        for tp, mid in previous_owners(cluster, group).items()
        if tp[0] in subs[mid] and holder.get(tp) != mid
    )


# ---- the networkx baseline -------------------------------------------------------------------------


def networkx_solve(cluster: Cluster, group: ConsumerGroup) -> tuple[int, int]:
    """(cross-rack, moves) of the same optimum, by network simplex on the full bipartite graph."""
    import networkx as nx

    members = list(group.members)
    parts: list[TopicPartition] = sorted(
        {(t, p) for m in members for t in m.topics for p in range(len(cluster.topics[t]))}
    )
    subs = {m.member_id: set(m.topics) for m in members}
    owners = {tp: mid for tp, mid in previous_owners(cluster, group).items() if tp[0] in subs[mid]}
    n, k = len(parts), len(members)
    q, r = divmod(n, k)
    big = n + 1
    g = nx.DiGraph()
    g.add_node("T", demand=n - r)
    g.add_node("X", demand=r)
    for pi in range(n):
        g.add_node(pi, demand=-1)
    bits = [(m.rack, cluster.member_bit(m.rack)) for m in members]
    for pi, (t, p) in enumerate(parts):
        mask = cluster.masks[t][p]
        owner = owners.get((t, p))
        for mi, m in enumerate(members):
            cross = is_cross_rack(bits[mi][0], bits[mi][1], mask)
            g.add_edge(
                pi, ("m", mi), capacity=1, weight=big * cross + (owner is not None and owner != m.member_id)
            )
    for mi in range(k):
        g.add_edge(("m", mi), "T", capacity=q, weight=0)
        g.add_edge(("m", mi), "X", capacity=1, weight=0)
    cost, _ = nx.network_simplex(g)
    return divmod(int(cost), big)


def networkx_timed(
    cluster: Cluster, group: ConsumerGroup, timeout: float
) -> tuple[float, tuple[int, int]] | None:
    """networkx's seconds and (cross-rack, moves), solved in a child process; None on timeout."""
    return in_child(_nx_seconds_and_result, (cluster, group), timeout)


def _nx_seconds_and_result(cluster: Cluster, group: ConsumerGroup) -> tuple[float, tuple[int, int]]:
    t = timed(partial(networkx_solve, cluster, group), 1)
    return t.wall, t.result


# ---- the exact path for unequal subscriptions --------------------------------------------------------


def rolling_case(n_members: int, seed: int) -> tuple[Cluster, ConsumerGroup]:
    """A rolling upgrade: half the members subscribe to 10 topics, half to 9; one replica per partition."""
    cluster = make_cluster(10, 100, seed, rf=1)
    topics = sorted(cluster.topics)
    rng = random.Random(seed + 1)
    members = tuple(
        Member(
            f"member-{i:05d}",
            rng.choices(RACKS, (6, 3, 1))[0],
            tuple(topics if i % 2 else topics[:-1]),
        )
        for i in range(n_members)
    )
    return cluster, ConsumerGroup("bench", "rack-optimal", members)


def lower_bound(cluster: Cluster, group: ConsumerGroup) -> int:
    """Cross-rack partitions no assignment avoids: those with no subscriber in a replica rack (or rack-less)."""
    subs: dict[str, list[Member]] = {}
    for m in group.members:
        for t in m.topics:
            subs.setdefault(t, []).append(m)
    return sum(
        1
        for t, ms in subs.items()
        for mask in cluster.masks[t]
        if all(is_cross_rack(m.rack, cluster.member_bit(m.rack), mask) for m in ms)
    )


def _exact_row(
    cluster: Cluster, group: ConsumerGroup
) -> tuple[float, float, float, int, int, int, int, bool, int]:
    fair = timed(partial(fair_assign, cluster, group), 1)
    exact = timed(partial(assign, cluster, group), 1)
    exact_cross = cross_rack_count(cluster, group, exact.result)
    stats = exact.result.stats
    return (
        fair.wall,
        exact.wall,
        exact.cpu,
        cross_rack_count(cluster, group, fair.result),
        exact_cross,
        moves(cluster, group, exact.result),
        lower_bound(cluster, group),
        bool(stats["optimal"]),
        int(stats.get("cross_rack_lower_bound", exact_cross)),
    )


def exact_table(timeout: float, quick: bool) -> None:
    print(
        "| case | members x partitions | topics | fair optimum | rack-optimal | its CPU | per-partition bound "
        "| cross-rack fair -> rack-optimal | optimal | proven lower bound | moves |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    cases: list[tuple[str, tuple[Cluster, ConsumerGroup]]] = [
        ("random subscriptions, fresh", unequal_case(4, 100, 40, 50, 20)),
        ("random subscriptions, fresh", unequal_case(4, 1000, 100, 200, 40)),
        ("random subscriptions, fresh", unequal_case(4, 20, 100, 2, 10)),
        ("random subscriptions, fresh", unequal_case(4, 50, 250, 2, 15)),
        ("rolling upgrade, rf1", rolling_case(50, 5)),
        ("rolling upgrade, rf1", rolling_case(200, 5)),
    ]
    if not quick:
        cases += [
            ("random subscriptions, fresh", unequal_case(4, 100, 500, 2, 20)),
            ("random subscriptions, fresh", unequal_case(4, 1000, 10000, 2, 40)),
            ("rolling upgrade, rf1", rolling_case(1000, 5)),
        ]
    for name, (cluster, group) in cases:
        parts = sum(len(cluster.topics[t]) for t in {t for m in group.members for t in m.topics})
        head = f"| {name} | {len(group.members):,} x {parts:,} | {len(cluster.topics):,} |"
        result = in_child(_exact_row, (cluster, group), timeout)
        if result is None:
            fair = timed(partial(fair_assign, cluster, group), 1)
            print(
                f"{head} {fair.wall * 1000:,.0f} ms | > {timeout:,.0f} s (timeout) | - | {lower_bound(cluster, group):,} "
                f"| {cross_rack_count(cluster, group, fair.result):,} -> - | - | - | - |",
                flush=True,
            )
            continue
        fair_s, exact_s, exact_cpu, fair_cross, exact_cross, moved, bound, optimal, proven = result
        print(
            f"{head} {fair_s * 1000:,.0f} ms | {exact_s * 1000:,.0f} ms | {exact_cpu * 1000:,.0f} ms | {bound:,} "
            f"| {fair_cross:,} -> {exact_cross:,} | {'yes' if optimal else 'no'} | {proven:,} | {moved:,} |",
            flush=True,
        )


# ---- main ------------------------------------------------------------------------------------------


def run_case(name: str, cluster: Cluster, group: ConsumerGroup, repeats: int) -> ConsumerPlan:
    t = timed(partial(assign, cluster, group), repeats)
    elapsed, plan, cpu = t.wall, t.result, t.cpu
    peak = peak_memory(partial(assign, cluster, group))
    parts = sum(len(v) for v in plan.assignment.values())
    counts = [len(v) for v in plan.assignment.values()]
    print(
        f"| {name} | {len(group.members):,} x {parts:,} | {elapsed * 1000:,.0f} ms | {cpu * 1000:,.0f} ms "
        f"| {peak / 2**20:,.0f} MiB "
        f"| {cross_rack_count(cluster, group, plan):,} | {moves(cluster, group, plan):,} "
        f"| {max(counts) - min(counts)} |",
        flush=True,
    )
    return plan


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats and a shorter ladder")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds per networkx run")
    ap.add_argument(
        "--exact-only", action="store_true", help="only the unequal-subscription exact-path table"
    )
    ap.add_argument("--exact-timeout", type=float, default=300.0, help="seconds per exact-path case")
    args = ap.parse_args(argv)
    repeats = 3 if args.quick else 7
    if args.exact_only:
        exact_table(args.exact_timeout, args.quick)
        return 0

    print(
        "| case | members x partitions | median | median CPU | peak traced memory | cross-rack | moves | max-min |"
    )
    print("|---|---|---|---|---|---|---|---|")
    cluster = make_cluster(50, 1000, seed=1)
    group = make_group(2000, sorted(cluster.topics), seed=2)
    fresh = run_case("fresh", cluster, group, repeats)
    leave = owning(replace(group, members=group.members[1:]), fresh)
    run_case("leave (one of 2,000 leaves)", cluster, leave, repeats)
    run_case(
        "racks-moved (10% of partitions)", move_replicas(cluster, 0.1, seed=3), owning(group, fresh), repeats
    )
    even = make_group(2000, sorted(cluster.topics), seed=2, skew=False)
    run_case("fresh, racks even", cluster, even, repeats)
    c1 = make_cluster(50, 1000, seed=1, rf=1)
    rf1 = run_case("rf1, fresh", c1, group, repeats)
    run_case("rf1, one of 2,000 leaves", c1, owning(replace(group, members=group.members[1:]), rf1), repeats)
    run_case("rf1, random previous owners", c1, owning(group, random_plan(c1, group, seed=7)), repeats)
    for n_members, n_topics, per_topic, most in ((100, 40, 50, 20), (1000, 100, 200, 40)):
        ucluster, ugroup = unequal_case(4, n_members, n_topics, per_topic, most)
        uplan = run_case("unequal, fresh", ucluster, ugroup, repeats)
        uleave = owning(replace(ugroup, members=ugroup.members[1:]), uplan)
        run_case("unequal, one leaves", ucluster, uleave, repeats)
    print(f"\nPeak resident memory of this process so far: {peak_rss_mib():,.0f} MiB")
    print(
        "networkx on 2,000 x 50,000 is not attempted: the full graph has 100 million member-partition edges."
    )
    print()
    print(
        "| ladder (rf1, random previous owners) | rack-optimal | networkx full graph | ratio | same optimum |"
    )
    print("|---|---|---|---|---|")
    ladder = [(50, 500), (200, 2000)] if args.quick else [(50, 500), (200, 2000), (500, 5000)]
    for k, n in ladder:
        c = make_cluster(10, n // 10, seed=5, rf=1)
        g = make_group(k, sorted(c.topics), seed=6)
        g = owning(g, random_plan(c, g, seed=7))
        t = timed(partial(assign, c, g), repeats)
        mine, plan = t.wall, t.result
        result = networkx_timed(c, g, args.timeout)
        ours = (cross_rack_count(c, g, plan), moves(c, g, plan))
        if result is None:
            print(
                f"| {k:,} x {n:,} | {mine * 1000:,.1f} ms | > {args.timeout:.0f} s (timeout) | > {args.timeout / mine:,.0f}x | - |"
            )
        else:
            theirs, optimum = result
            print(
                f"| {k:,} x {n:,} | {mine * 1000:,.1f} ms | {theirs:,.1f} s | {theirs / mine:,.0f}x "
                f"| {'yes' if optimum == ours else f'NO {optimum} vs {ours}'} |",
                flush=True,
            )
    print()
    exact_table(args.exact_timeout, args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
