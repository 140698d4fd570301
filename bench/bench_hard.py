"""Groups whose rack-optimal answer is NP-hard to find, where the optimum is known: planted 3-SAT.

    .venv/bin/python -m bench.bench_hard            # sizes 10-160 variables, 5 formulas each
    .venv/bin/python -m bench.bench_hard --quick    # sizes 10-40, 2 formulas each

Each formula is a random 3-CNF with a hidden satisfying assignment, at the
ratio where random 3-SAT is hardest (4.26 clauses per variable), turned into
a consumer group by the reduction of ``tests/hard_instances.py`` (two racks,
one replica per partition, one partition per topic, unequal subscriptions).
Its optimum over balanced plans is 0 cross-rack partitions (the planted
plan); any plan with more is that far from optimal.

Columns: total cross-rack partitions over the formulas of a size for Kafka
4.3.1's ``RangeAssignor`` and ``CooperativeStickyAssignor`` (the oracle
harness, ``tests/kafka_oracle.py``) and rackplan's ``cooperative-sticky`` and
``rack-optimal`` (with how many plans it proved optimal); then median CPU
seconds of one in-memory call (rackplan: ``assign`` on the model; Kafka:
``assign(Cluster, GroupSubscription)``, JIT-warmed, 5 calls in the JVM).
Nothing is owned, so every assignor answers in one round.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from functools import partial

from bench.common import timed
from rackplan.assignor.consumer import cross_rack_count, get_assignor
from rackplan.assignor.model import Cluster, ConsumerGroup
from rackplan.assignor.record import replace
from tests.hard_instances import formula_group, planted_formula

RATIO = 4.26


def _kafka_timed(cluster: Cluster, group: ConsumerGroup, repeats: int) -> tuple[int, float]:
    """Kafka's cross-rack count and median seconds of its warm ``assign`` calls."""
    from tests.kafka_oracle import document, parse_plan, session_oracle

    doc = document(cluster, group)
    doc["oracle_repeat"] = repeats
    answer = session_oracle().answer_many([doc])[0]
    if "error" in answer:
        raise RuntimeError(answer["error"])
    plan = parse_plan(answer)
    return cross_rack_count(cluster, group, plan), statistics.median(answer["oracle_timing_ns"]) / 1e9


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="sizes 10-40, two formulas each")
    args = ap.parse_args(argv)
    sizes = (10, 20, 40) if args.quick else (10, 20, 40, 80, 160)
    per_size = 2 if args.quick else 5
    rng = random.Random(2026)
    print(
        "| variables | members x partitions | Kafka range | Kafka cooperative-sticky | rackplan cooperative-sticky "
        "| rackplan rack-optimal (proven) | rack-optimal CPU | cooperative-sticky CPU | Kafka cooperative-sticky "
        "(JIT-warm) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for n in sizes:
        totals = {"kr": 0, "kc": 0, "rc": 0, "ro": 0}
        proven = 0
        cpu_ro: list[float] = []
        cpu_rc: list[float] = []
        java: list[float] = []
        shape = ""
        for _ in range(per_size):
            clauses, _values = planted_formula(rng, n, round(RATIO * n))
            cluster, group = formula_group(n, clauses)
            shape = f"{len(group.members):,} x {len(cluster.topics):,}"
            ranged = replace(group, assignor="range")
            sticky = replace(group, assignor="cooperative-sticky")
            totals["kr"] += _kafka_timed(cluster, ranged, 1)[0]
            cross, seconds = _kafka_timed(cluster, sticky, 5)
            totals["kc"] += cross
            java.append(seconds)
            ro = timed(partial(get_assignor("rack-optimal"), cluster, group), 3)
            rc = timed(partial(get_assignor("cooperative-sticky"), cluster, sticky), 3)
            totals["ro"] += cross_rack_count(cluster, group, ro.result)
            totals["rc"] += cross_rack_count(cluster, sticky, rc.result)
            proven += bool(ro.result.stats.get("optimal"))
            cpu_ro.append(ro.cpu)
            cpu_rc.append(rc.cpu)
        print(
            f"| {n} | {shape} | {totals['kr']:,} | {totals['kc']:,} | {totals['rc']:,} "
            f"| {totals['ro']:,} ({proven} of {per_size}) | {statistics.median(cpu_ro) * 1000:,.0f} ms "
            f"| {statistics.median(cpu_rc) * 1000:,.0f} ms | {statistics.median(java) * 1000:,.1f} ms |",
            flush=True,
        )
    print(
        f"\n{per_size} planted formulas per size at {RATIO} clauses per variable; the optimum is 0 in every one."
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
