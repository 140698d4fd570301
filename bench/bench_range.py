"""Benchmark the range assignor at 2,000 members x 50,000 partitions.

Run:  .venv/bin/python bench/bench_range.py [--repeat 7]

Each shape is timed with member racks (rack-aware passes run, since replicas
sit on 2 of 3 racks) and, as the baseline of the same run, with the same group
minus member racks (plain ranges).  Prints median milliseconds and the ratio.
"""

from __future__ import annotations

import argparse
import random
import sys
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: make ``bench`` importable

from bench.common import timed
from rackplan.assignor.consumer.range_assignor import assign
from rackplan.assignor.model import Cluster, ConsumerGroup, Member
from rackplan.assignor.record import replace

RACKS = ("az-a", "az-b", "az-c")
MEMBERS = 2_000
PARTITIONS = 50_000


def cluster(topics: int, rng: random.Random) -> Cluster:
    """Brokers on three racks; each partition on two brokers of different racks."""
    brokers = {b: RACKS[b % 3] for b in range(9)}
    per_topic = PARTITIONS // topics
    parts = {}
    for t in range(topics):
        reps = []
        for _ in range(per_topic):
            first = rng.randrange(9)
            second = (first + rng.choice((1, 2, 4, 5, 7, 8))) % 9
            reps.append((first, second))
        parts[f"topic-{t:04d}"] = tuple(reps)
    return Cluster(broker_racks=brokers, topics=parts)


def group(c: Cluster, rng: random.Random, subscribe: float) -> ConsumerGroup:
    topics = sorted(c.topics)
    members = []
    for i in range(MEMBERS):
        subs = topics if subscribe >= 1 else [t for t in topics if rng.random() < subscribe] or topics[:1]
        members.append(Member(f"consumer-{i:05d}-{rng.getrandbits(32):08x}", RACKS[i % 3], tuple(subs)))
    return ConsumerGroup("bench", "range", tuple(members))


def median_ms(c: Cluster, g: ConsumerGroup, repeat: int) -> tuple[float, float]:
    """Median wall-clock and CPU milliseconds of ``assign`` (CPU is the figure to read on a loaded machine)."""
    t = timed(partial(assign, c, g), repeat)
    return t.wall * 1000.0, t.cpu * 1000.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)
    rng = random.Random(20_240_501)
    shapes = [
        ("1 topic x 50,000, all subscribe", 1, 1.0),
        ("50 topics x 1,000, all subscribe (co-partitioned)", 50, 1.0),
        ("500 topics x 100, each member ~10% of topics", 500, 0.1),
    ]
    print(f"{MEMBERS} members x {PARTITIONS} partitions, median of {args.repeat} runs")
    print(
        f"{'shape':<52} {'rack-aware ms':>14} {'plain ms':>10} {'ratio':>6} {'rack-aware CPU':>15} {'plain CPU':>10}"
    )
    for name, topics, subscribe in shapes:
        c = cluster(topics, rng)
        g = group(c, rng, subscribe)
        plain = replace(g, members=tuple(replace(m, rack=None) for m in g.members))
        racked_ms, racked_cpu = median_ms(c, g, args.repeat)
        plain_ms, plain_cpu = median_ms(c, plain, args.repeat)
        print(
            f"{name:<52} {racked_ms:>14.1f} {plain_ms:>10.1f} {racked_ms / plain_ms:>6.2f}"
            f" {racked_cpu:>15.1f} {plain_cpu:>10.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
