"""``balance: bytes`` against brute force: how often each heuristic, and the path, reaches the optimum.

    .venv/bin/python -m bench.bench_balance_bytes_quality            # 1,500 random small groups
    .venv/bin/python -m bench.bench_balance_bytes_quality --groups 300
    .venv/bin/python -m bench.bench_balance_bytes_quality --cost   # what the second heuristic costs

The groups are seeded (1-4 brokers in racks a-c or none, 1-2 topics of 1-4 partitions with whole
bytes/s from idle to 1,000, 2-4 members in racks a-c, a rack without brokers or none, partly owned,
either objective), at most 8 subscribed partitions, so that every assignment meeting the load rule
is enumerated (``tests/assignor/test_traffic.py``'s exact references: rationals, the contract's w(p)).
Prints, per heuristic of :func:`~rackplan.assignor.consumer.rack_optimal.load_balance.balance_by_load`
and for :func:`~rackplan.assignor.consumer.rack_optimal.load_balance.assign_by_load` (the better of
the first two on these sizes), the groups whose (crossings, moves) is the optimum.  Counts, not times.

``--cost``: on ``bench_traffic``'s cases (Zipf-skewed whole bytes/s, ``objective: bytes``), the CPU
of the path before (the index variant alone) and of the path now (the local variant, and the index
variant too up to ``BOTH_HEURISTICS_LIMIT`` partitions when not proven), medians of 3 interleaved
runs (one with ``--largest``), and the cross-rack bytes/s each plan reaches.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from functools import partial
from typing import Any

from rackplan.assignor.consumer.rack_optimal.load_balance import assign_by_load, balance_by_load
from rackplan.assignor.model import Cluster, ConsumerGroup, TopicPartition
from rackplan.assignor.parse import parse_instance
from tests.assignor.test_traffic import (
    cross_value,
    every_assignment,
    exact_weights,
    load_rule_holds,
    moves,
    rule_weights,
)

HEURISTICS = {
    "index variant (the path before)": (False, False),
    "local variant": (True, True),
    "local targets, steps in weight order": (True, False),
    "index targets, owned first": (False, True),
}


def group_document(seed: int) -> dict[str, Any]:
    """One seeded random instance (see the module docstring)."""
    rng = random.Random(seed)
    nb = rng.randint(1, 4)
    racks = ["a", "b", "c", None] if rng.random() < 0.2 else ["a", "b", "c"]
    brokers = [{"id": i, "rack": rng.choice(racks)} for i in range(1, nb + 1)]
    topics = {
        f"t{k}": [rng.sample(range(1, nb + 1), rng.randint(1, min(2, nb))) for _ in range(rng.randint(1, 4))]
        for k in range(rng.randint(1, 2))
    }
    levels = [0, 1, 2, 5, 10, 50, 100, 500]
    traffic = {
        t: [float(rng.choice([*levels, rng.randint(0, 1000)])) for _ in parts] for t, parts in topics.items()
    }
    names = sorted(topics)
    members: list[dict[str, Any]] = [
        {
            "member_id": f"m-{i}",
            "rack": rng.choice(["a", "b", "c", "z", None]),
            "topics": sorted(rng.sample(names, rng.randint(1, len(names)))),
        }
        for i in range(rng.randint(2, 4))
    ]
    if rng.random() < 0.6:
        for t in names:
            for p in range(len(topics[t])):
                who = rng.randint(-1, len(members) - 1)
                if who >= 0:
                    members[who].setdefault("owned", []).append([t, p])
    group = {"group_id": "g", "assignor": "rack-optimal", "balance": "bytes", "members": members}
    group["objective"] = rng.choice(["partitions", "bytes"])
    return {"cluster": {"brokers": brokers, "topics": topics, "traffic": traffic}, "consumer_group": group}


def _index_variant(cluster: Cluster, group: ConsumerGroup) -> Mapping[str, Sequence[TopicPartition]]:
    return balance_by_load(cluster, group, prefer_local=False, owned_first=False).assignment


def _path(cluster: Cluster, group: ConsumerGroup) -> Mapping[str, Sequence[TopicPartition]]:
    return assign_by_load(cluster, group).assignment


def cost(largest: bool) -> None:
    """The ``--cost`` table (see the module docstring)."""
    import statistics
    import time

    from bench.bench_traffic import CASES, LARGEST, LARGEST_UNEQUAL, make_instance
    from rackplan.assignor.record import replace
    from rackplan.assignor.traffic import consumer_traffic_stats

    print(
        "| case | members x partitions | CPU s: index variant (before), path | cross-rack B/s: before, path |"
    )
    print("|---|---|---|---|")
    for case in [*CASES, *LARGEST, *LARGEST_UNEQUAL] if largest else CASES:
        cluster, group = make_instance(case)
        group = replace(group, objective="bytes", balance="bytes")
        runs: dict[str, Callable[[], Mapping[str, Sequence[TopicPartition]]]] = {
            "before": partial(_index_variant, cluster, group),
            "path": partial(_path, cluster, group),
        }
        times: dict[str, list[float]] = {k: [] for k in runs}
        cross: dict[str, float] = {}
        for _ in range(1 if largest else 3):
            for name, run in runs.items():
                start = time.process_time()
                assignment = run()
                times[name].append(time.process_time() - start)
                cross[name] = float(
                    consumer_traffic_stats(cluster, group, assignment)["cross_rack_bytes_per_s"]
                )
        cpu = " / ".join(f"{statistics.median(times[k]):.2f}" for k in runs)
        shape = f"{case.members} x {case.topics * case.parts:,}"
        print(f"| {case.name} | {shape} | {cpu} | {cross['before']:,.0f}, {cross['path']:,.0f} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument(
        "--groups", type=int, default=1500, help="seeds 0..N-1 (groups over 8 partitions skipped)"
    )
    ap.add_argument(
        "--cost", action="store_true", help="CPU and bytes against the path before (bench_traffic)"
    )
    ap.add_argument("--largest", action="store_true", help="with --cost: also the 2,000 x 50,000 cases")
    args = ap.parse_args(argv)
    if args.cost:
        cost(args.largest)
        return 0
    at_optimum = dict.fromkeys([*HEURISTICS, "assign_by_load (the path)"], 0)
    proven = tried = 0
    for seed in range(args.groups):
        cluster, group = parse_instance(group_document(seed))
        assert isinstance(group, ConsumerGroup)
        if sum(len(cluster.topics[t]) for t in {t for m in group.members for t in m.topics}) > 8:
            continue
        tried += 1
        b = exact_weights(cluster, group)
        value: Callable[[TopicPartition], Fraction] = (
            b.__getitem__ if group.objective == "bytes" else (lambda tp: Fraction(1))
        )
        w = rule_weights(cluster, group)
        best = min(
            (cross_value(cluster, group, a, value), moves(cluster, group, a))
            for a in every_assignment(cluster, group)
            if load_rule_holds(group, a, w)
        )
        plans: dict[str, Mapping[str, Sequence[TopicPartition]]] = {
            name: balance_by_load(cluster, group, *flags).assignment for name, flags in HEURISTICS.items()
        }
        path = assign_by_load(cluster, group)
        plans["assign_by_load (the path)"] = path.assignment
        proven += bool(path.stats["optimal"])
        for name, assignment in plans.items():
            owner = {tp: mid for mid, parts in assignment.items() for tp in parts}
            at_optimum[name] += (
                cross_value(cluster, group, owner, value),
                moves(cluster, group, owner),
            ) == best
        if tried % 250 == 0:
            print(f"... {tried} groups", flush=True)
    print(f"\n{tried} groups of at most 8 partitions (seeds 0-{args.groups - 1}); the path proves {proven}\n")
    print("| heuristic | groups at the optimum (crossings, then moves) |\n|---|---|")
    for name, n in at_optimum.items():
        print(f"| {name} | {n} ({100 * n / max(tried, 1):.1f}%) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
