"""What the size limit of the cooperative-sticky exact candidate costs and saves, against Kafka (issue 29).

    .venv/bin/python -m bench.bench_highs_gate                      # 40 seeds per shape, limits 600 and 350
    .venv/bin/python -m bench.bench_highs_gate --seeds 10 --gates 600,350,0
    .venv/bin/python -m bench.bench_highs_gate --sizes              # the solvers by model size, at 600

The exact candidate (``general_exact.exact_candidate``) is built for models of at most
``EXACT_NONZEROS`` estimated nonzeros: it first enumerates count vectors (``small_exact``) and, when
that runs out of budget, hands the balance program to HiGHS.  HiGHS's root node is not bounded by its
node budget: on bench_exact_candidate's 9 x 96 family one program of 450 to 580 nonzeros cost up to
0.9 s, and a settling builds several.  This settles every group of that family by cooperative rounds
(the test suite's ``run_rounds``: each round's plan handed back, until one withholds nothing) under each
limit, and by Kafka's own assignor (the oracle, ``oracle/``, Java 17 and Maven), and prints per limit:

* where the groups land: cross-rack partitions and moves summed over the groups every row settled, and
  how many groups land worse than under the first limit (more cross-rack, or as many and more moves)
  or better;
* against Kafka on the same groups: groups where rackplan lands worse, and where strictly better;
* CPU of the rounds per group (``time.process_time``): median, maximum, total, and groups above 1 s;
* groups not settled within the rounds (8, ``MAX_ROUNDS``): left out of the sums and comparisons.

``--sizes`` instead runs every group once (``assign``) with the limit at 600 (as before session 21)
and prints, by estimated nonzeros in bands of 50, how often the enumeration answered and HiGHS's CPU
per program: how the limit's value was chosen.

The groups are built once, before any limit is set (their convergence uses the tree's own), so every
row settles the same groups.  Limit 0 builds no exact candidate.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from bench.bench_exact_candidate import small_unequal
from rackplan.assignor.consumer.rack_optimal.milp import Component
from rackplan.assignor.consumer.sticky import assign, general_exact
from rackplan.assignor.model import Cluster, ConsumerGroup
from tests.assignor.test_vs_kafka_java import Assign, ours, run_rounds
from tests.kafka_oracle import KafkaOracle, build_jar

#: (cross-rack partitions, moves) where one group lands
Landing = tuple[int, int]
#: ``EXACT_NONZEROS`` before session 21: what ``--sizes`` and the benches that measured there set back
FORMER_LIMIT = 600


@dataclass(frozen=True)
class Row:
    """One way of settling the family: each group's landing and CPU seconds."""

    name: str
    landings: list[Landing | None]  # None: not settled within the rounds (Kafka's, on some groups)
    cpu: list[float]


def settle(name: str, assign: Assign, groups: Sequence[tuple[Cluster, ConsumerGroup]]) -> Row:
    """Every group settled by rounds of ``assign``, with its CPU; None for a group not settled within the rounds."""
    landings: list[Landing | None] = []
    cpu: list[float] = []
    for cluster, group in groups:
        start = time.process_time()
        settled = run_rounds(assign, cluster, group)
        cpu.append(time.process_time() - start)
        landings.append(None if settled is None else (settled.cross, settled.moved))
    return Row(name, landings, cpu)


def gated(gate: int, groups: Sequence[tuple[Cluster, ConsumerGroup]]) -> Row:
    """rackplan with ``EXACT_NONZEROS`` set to ``gate`` for these rounds."""
    real = general_exact.EXACT_NONZEROS
    general_exact.EXACT_NONZEROS = gate
    try:
        return settle(f"rackplan, exact candidate up to {gate} nonzeros", ours, groups)
    finally:
        general_exact.EXACT_NONZEROS = real


def worse(a: Landing | None, b: Landing | None) -> bool:
    """``a`` lands worse than ``b``: more cross-rack partitions, or as many and more moves (a group that
    either side did not settle counts for neither)."""
    return a is not None and b is not None and (a[0] > b[0] or (a[0] == b[0] and a[1] > b[1]))


def lines(rows: Sequence[Row], kafka: Row) -> Iterator[str]:
    """The table: sums over the groups every row settled; Kafka's CPU is its JVM's, not measured here."""
    first = rows[0]
    every = [*rows, kafka]
    common = {i for i in range(len(first.landings)) if all(r.landings[i] is not None for r in every)}
    yield (
        f"| settled by | cross-rack ({len(common)} groups all settled) | moves | worse / better than the "
        "first row | worse / better than Kafka | CPU per group: median, max ms | total s | groups over 1 s "
        "| not settled in 8 rounds |"
    )
    yield "|---|---|---|---|---|---|---|---|---|"
    for row in every:
        mine = row.landings
        sums = [x for i, x in enumerate(mine) if i in common and x is not None]
        vs_first = (
            sum(worse(a, b) for a, b in zip(mine, first.landings, strict=True)),
            sum(worse(b, a) for a, b in zip(mine, first.landings, strict=True)),
        )
        vs_kafka = (
            sum(worse(a, b) for a, b in zip(mine, kafka.landings, strict=True)),
            sum(worse(b, a) for a, b in zip(mine, kafka.landings, strict=True)),
        )
        cpu = (
            "- | - | -"
            if row is kafka
            else f"{statistics.median(row.cpu) * 1e3:.0f}, {max(row.cpu) * 1e3:.0f} | {sum(row.cpu):.1f} "
            f"| {sum(c > 1.0 for c in row.cpu)}"
        )
        yield (
            f"| {row.name} | {sum(c for c, _ in sums)} | {sum(m for _, m in sums)} "
            f"| {vs_first[0]} / {vs_first[1]} | {vs_kafka[0]} / {vs_kafka[1]} | {cpu} "
            f"| {sum(x is None for x in mine)} |"
        )


def by_size(groups: Sequence[tuple[Cluster, ConsumerGroup]]) -> Iterator[str]:
    """The enumeration's answers and HiGHS's CPU per program, by estimated nonzeros (bands of 50), at 600."""
    real_limit = general_exact.EXACT_NONZEROS
    real_solve, real_small = vars(general_exact)["solve"], vars(general_exact)["solve_small"]
    highs: list[tuple[int, float, bool]] = []
    enumerated: list[tuple[int, bool]] = []

    def solve(comp: Component, counts: Any, **options: Any) -> Any:
        start = time.process_time()
        got = real_solve(comp, counts, **options)
        highs.append((general_exact.estimated_nonzeros(comp), time.process_time() - start, got.optimal))
        return got

    def small(comp: Component, counts: Any) -> Any:
        got = real_small(comp, counts)
        enumerated.append((general_exact.estimated_nonzeros(comp), got is not None))
        return got

    general_exact.EXACT_NONZEROS = FORMER_LIMIT
    setattr(general_exact, "solve", solve)  # noqa: B010 (patched by name: the module imports it)
    setattr(general_exact, "solve_small", small)  # noqa: B010
    try:
        for cluster, group in groups:
            assign(cluster, group)
    finally:
        general_exact.EXACT_NONZEROS = real_limit
        setattr(general_exact, "solve", real_solve)  # noqa: B010
        setattr(general_exact, "solve_small", real_small)  # noqa: B010
    yield (
        "| estimated nonzeros | enumerations: answered / run out | HiGHS programs | HiGHS CPU ms: median "
        "| 90th percentile (nearest rank) | max | proven optimal |"
    )
    yield "|---|---|---|---|---|---|---|"
    for band in sorted({size // 50 * 50 for size, _ in enumerated}):
        answered = sum(ok for size, ok in enumerated if size // 50 * 50 == band)
        ran_out = sum(not ok for size, ok in enumerated if size // 50 * 50 == band)
        inside = [(cpu, proven) for size, cpu, proven in highs if size // 50 * 50 == band]
        cpu = sorted(c for c, _ in inside)
        times = (
            f"{statistics.median(cpu) * 1e3:.0f} | {cpu[math.ceil(0.9 * len(cpu)) - 1] * 1e3:.0f} "
            f"| {cpu[-1] * 1e3:.0f}"
            if cpu
            else "- | - | -"
        )
        yield (
            f"| {band}-{band + 49} | {answered} / {ran_out} | {len(cpu)} | {times} "
            f"| {sum(p for _, p in inside)} |"
        )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--seeds", type=int, default=40, help="seeds per shape (three shapes)")
    ap.add_argument("--gates", default="600,350", help="EXACT_NONZEROS values, comma-separated")
    ap.add_argument("--sizes", action="store_true", help="the solvers by model size instead (at 600)")
    args = ap.parse_args(argv)
    gates = [int(g) for g in args.gates.split(",")]
    groups = list(small_unequal(args.seeds))
    print(
        f"{len(groups)} groups of bench_exact_candidate's 9 x 96 family ({args.seeds} seeds per shape)",
        flush=True,
    )
    if args.sizes:
        for line in by_size(groups):
            print(line)
        return 0
    oracle = KafkaOracle(build_jar())
    try:
        kafka = settle("Kafka 4.4.0's CooperativeStickyAssignor", oracle.plan, groups)
    finally:
        oracle.close()
    rows = []
    for gate in gates:
        rows.append(gated(gate, groups))
        print(f"  settled with the exact candidate up to {gate} nonzeros", flush=True)
    print()
    for line in lines(rows, kafka):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
