"""The cooperative-sticky cliff of issue 29: small unequal groups over seven racks, one member joining.

    .venv/bin/python -m bench.bench_settle_work              # 60 groups
    .venv/bin/python -m bench.bench_settle_work --groups 150
    .venv/bin/python -m bench.bench_settle_work --timing-only   # the joining round's CPU alone (before/after)

Each group (the shape of ``tests/assignor/test_sticky_work.py``: 23 members, 148 partitions in
4-12 topics, seven racks, two replicas in distinct racks, unequal subscriptions) settles without its
last member, which then joins; the joining round is timed.  Columns: CPU seconds of rackplan's
``assign`` on the model (one call: it is deterministic) and of Kafka 4.3.1's
``CooperativeStickyAssignor`` (the oracle harness, JIT-warmed, median of 5 calls); the flow edges
rackplan's count-shift searches built (``Settlement.shift_edges``) and how many plans were returned
without a proven fixed point; then both assignors run cooperative rounds from the joining round until
one withholds nothing (``bench_sticky.settle_rounds``): cross-rack partitions after settling, moves
and rounds.  (One round's cross-rack count says little: a cooperative round leaves out what moves.)
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from collections.abc import Callable, Sequence

from bench.bench_sticky import Settled, kafka_java, settle_rounds
from rackplan.assignor.consumer.sticky import SETTLE_WORK, assign, settle_general
from rackplan.assignor.consumer.sticky.common import prepare
from rackplan.assignor.model import Cluster, ConsumerGroup
from tests.assignor.test_sticky_work import one_joins, seven_racks


class _Count(logging.Handler):
    """Counts the settling's "no fixed point" warnings."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.n = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.n += "no fixed point" in record.getMessage()


def _kafka(cluster: Cluster, group: ConsumerGroup) -> tuple[int, float]:
    from bench.bench_hard import _kafka_timed

    return _kafka_timed(cluster, group, 5)


def _settled_table(ours: list[Settled], kafka: list[Settled]) -> None:
    """Both assignors after settling: the groups both settled are compared."""
    both = [(m, k) for m, k in zip(ours, kafka or ours, strict=True) if m.rounds and k.rounds]

    def cell(xs: list[Settled], f: Callable[[list[Settled]], int]) -> str:
        return f"{f(xs):,}" if xs else "-"

    rows: list[tuple[str, Callable[[list[Settled]], int]]] = [
        ("not settled within 10 rounds", lambda xs: sum(x.rounds is None for x in xs)),
        ("most rounds (settled)", lambda xs: max((x.rounds or 0) for x in xs)),
    ]
    print("\n| after settling | rackplan | Kafka 4.3.1 |")
    print("|---|---|---|")
    for name, f in rows:
        print(f"| {name} | {cell(ours, f)} | {cell(kafka, f)} |")
    ours_both, kafka_both = [m for m, _ in both], [k for _, k in both] if kafka else []
    print(
        f"| cross-rack partitions ({len(both)} both settled) | {cell(ours_both, lambda xs: sum(x.cross for x in xs))} "
        f"| {cell(kafka_both, lambda xs: sum(x.cross for x in xs))} |"
    )
    print(
        f"| partitions moved, all rounds | {cell(ours_both, lambda xs: sum(x.moved for x in xs))} "
        f"| {cell(kafka_both, lambda xs: sum(x.moved for x in xs))} |"
    )
    if kafka:
        worse = sum(m.cross > k.cross for m, k in both)
        print(f"rackplan more cross-rack than Kafka in {worse} of {len(both)} groups both settled")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--groups", type=int, default=60)
    ap.add_argument("--no-kafka", action="store_true", help="rackplan only (no Java)")
    ap.add_argument(
        "--timing-only",
        action="store_true",
        help="only the joining round's CPU (no edge count, no cooperative rounds after it): a before/after run",
    )
    args = ap.parse_args(argv)
    count = _Count()
    logging.getLogger("rackplan.assignor.consumer.sticky").addHandler(count)
    ours: list[float] = []
    java: list[float] = []
    edges: list[int] = []
    ours_settled: list[Settled] = []
    kafka_settled: list[Settled] = []
    unproven = 0
    for seed in range(args.groups):
        cluster, members = seven_racks(seed, 23, 148)
        group = one_joins(cluster, members)
        warned = count.n
        start = time.process_time()
        assign(cluster, group)
        ours.append(time.process_time() - start)
        unproven += count.n > warned
        if not args.no_kafka:
            java.append(_kafka(cluster, group)[1])
        if not args.timing_only:
            edges.append(settle_general(prepare(cluster, group)).shift_edges)
            ours_settled.append(settle_rounds(assign, cluster, group))
            if not args.no_kafka:
                kafka_settled.append(settle_rounds(kafka_java, cluster, group))
        print(f"\r{seed + 1}/{args.groups} groups", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)

    def q(xs: Sequence[float], f: float) -> float:
        return sorted(xs)[min(len(xs) - 1, int(f * len(xs)))]

    print(
        f"{args.groups} groups, 23 members x 148 partitions, 7 racks, rf 2, one joining (SETTLE_WORK={SETTLE_WORK:,})"
    )
    print("| | median | p90 | max |")
    print("|---|---|---|---|")
    print(f"| rackplan CPU s | {statistics.median(ours):.2f} | {q(ours, 0.9):.2f} | {max(ours):.2f} |")
    if java:
        print(
            f"| Kafka CPU s (JIT-warm) | {statistics.median(java):.3f} | {q(java, 0.9):.3f} | {max(java):.3f} |"
        )
    print(f"joining-round plans without a proven fixed point: {unproven} of {args.groups}")
    if not args.timing_only:
        print(
            f"| shift-search flow edges | {statistics.median(edges):,.0f} | {q(edges, 0.9):,.0f} | {max(edges):,} |"
        )
        _settled_table(ours_settled, kafka_settled)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
