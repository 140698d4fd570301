"""Cross-rack *bytes* on skewed traffic: Kafka's assignors against rackplan's count- and bytes-optimal plans.

    .venv/bin/python -m bench.bench_traffic            # the full table (a few minutes)
    .venv/bin/python -m bench.bench_traffic --quick    # the small cases only

Each case: 4 racks (members spread 5:3:1:1), replicas placed rack-aware (``rf``
replicas in ``rf`` different racks), partition rates Zipf-like (the partition
of rank ``r`` carries ``1 / r ** s`` of the topic's bytes, ranks shuffled,
``s`` the skew), equal subscriptions or random ones (5-20 of the topics per
member).  Every plan is judged by the same recomputation
(:func:`rackplan.assignor.traffic.consumer_traffic_stats`):

* ``range`` and ``cooperative-sticky``: Kafka 4.3.1's own (KIP-881 rack-aware)
  assignors, through the Java oracle (``tests/kafka_oracle.py``; ``make oracle``);
  without Java or Maven their columns are empty;
* ``rack-optimal``: the partition objective (fewest cross-rack partitions);
* ``bytes``: ``objective: bytes`` (fewest cross-rack bytes/s, count balance),
  with whether it is proven optimal;
* ``load``: ``balance: bytes`` + ``objective: bytes``: max member bytes/s over the
  mean, against the count-balanced plans' (what balancing by load buys), and
  its cross-rack bytes/s.

Times are rackplan's own (median of ``--repeats``, CPU seconds), per plan.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import statistics
import sys
import threading
from dataclasses import dataclass
from functools import partial
from typing import Any

from bench.common import timed
from rackplan.assignor.consumer import run_assignor
from rackplan.assignor.model import Cluster, ConsumerGroup, ConsumerPlan, Member
from rackplan.assignor.record import replace
from rackplan.assignor.traffic import consumer_traffic_stats

RACKS = ("az-a", "az-b", "az-c", "az-d")


@dataclass(frozen=True)
class Case:
    name: str
    members: int
    topics: int
    parts: int
    rf: int
    equal: bool
    skew: float
    seed: int


def make_instance(case: Case) -> tuple[Cluster, ConsumerGroup]:
    """The cluster (with Zipf-like traffic) and the group of a case; the same case gives the same instance."""
    rng = random.Random(case.seed)
    n_brokers = 3 * len(RACKS)
    broker_racks: dict[int, str | None] = {b: RACKS[b % len(RACKS)] for b in range(n_brokers)}
    topics: dict[str, tuple[tuple[int, ...], ...]] = {}
    traffic: dict[str, tuple[float, ...]] = {}
    for t in range(case.topics):
        name = f"topic-{t:03d}"
        rows = []
        for _ in range(case.parts):
            racks = rng.sample(range(len(RACKS)), case.rf)
            rows.append(tuple(r + len(RACKS) * rng.randrange(3) for r in racks))
        topics[name] = tuple(rows)
        ranks = list(range(1, case.parts + 1))
        rng.shuffle(ranks)
        total = 1e6 * rng.choice((0.1, 1.0, 10.0))  # topics differ in volume too
        norm = sum(1 / r**case.skew for r in ranks)
        # whole bytes/s, as a measurement in bytes gives them
        traffic[name] = tuple(float(round(total / r**case.skew / norm)) for r in ranks)
    cluster = Cluster(broker_racks=broker_racks, topics=topics, traffic=traffic)
    names = sorted(topics)
    members = []
    for i in range(case.members):
        subs = (
            names
            if case.equal
            else sorted(rng.sample(names, rng.randint(min(5, len(names)), min(20, len(names)))))
        )
        members.append(Member(f"member-{i:05d}", rng.choices(RACKS, (5, 3, 1, 1))[0], tuple(subs)))
    return cluster, ConsumerGroup("bench", "rack-optimal", tuple(members))


def figures(cluster: Cluster, group: ConsumerGroup, plan: ConsumerPlan) -> dict[str, float]:
    stats = consumer_traffic_stats(cluster, group, plan.assignment)
    loads = [
        math.fsum(cluster.traffic[t][p] for t, p in parts)  # type: ignore[index]
        for parts in plan.assignment.values()
    ]
    mean = statistics.fmean(loads) if loads else 0.0
    return {
        "cross": float(stats["cross_rack_bytes_per_s"]),
        "total": float(stats["bytes_per_s"]),
        "max_over_mean": max(loads) / mean if mean else 0.0,
    }


def _plan(cluster: Cluster, group: ConsumerGroup) -> ConsumerPlan:
    return run_assignor(cluster, group)[0]


def kafka_plans(
    instances: list[tuple[Cluster, ConsumerGroup]], assignor: str, timeout_s: float | None = None
) -> list[ConsumerPlan | None]:
    """Kafka's own plans through the Java oracle, one JVM per instance; None where it cannot run here or
    did not answer within ``timeout_s`` (its JVM is then killed: Kafka's cooperative-sticky does not finish
    on the largest unequal groups in minutes)."""
    try:
        from tests.kafka_oracle import KafkaOracle, build_jar, parse_plan

        jar = build_jar()
    except (FileNotFoundError, RuntimeError, ImportError) as exc:
        print(f"# Kafka oracle unavailable ({exc}): its columns stay empty", file=sys.stderr)
        return [None] * len(instances)
    from rackplan.assignor.contract import instance_document

    out: list[ConsumerPlan | None] = []
    for cluster, group in instances:
        oracle = KafkaOracle(jar)
        answers: list[dict[str, Any]] = []
        doc = instance_document(cluster, replace(group, assignor=assignor))
        worker = threading.Thread(target=_ask, args=(oracle, doc, answers), daemon=True)
        worker.start()
        worker.join(timeout_s)
        if worker.is_alive():
            print(
                f"# Kafka {assignor} gave no plan within {timeout_s} s: its cell stays empty", file=sys.stderr
            )
            oracle._proc.kill()
        oracle.close()
        out.append(parse_plan(answers[0]) if answers else None)
    return out


def _ask(oracle: Any, doc: dict[str, Any], answers: list[dict[str, Any]]) -> None:
    with contextlib.suppress(RuntimeError):  # its JVM killed at the deadline (or dead): the caller says so
        answers.extend(oracle.answer_many([doc]))


CASES = [
    Case("eq-rf1", 30, 10, 100, 1, True, 1.1, 1),
    Case("eq-rf2", 30, 10, 100, 2, True, 1.1, 2),
    Case("eq-rf3", 30, 10, 100, 3, True, 1.1, 3),
    Case("uneq-rf1", 30, 10, 100, 1, False, 1.1, 4),
    Case("uneq-rf2", 30, 10, 100, 2, False, 1.1, 5),
    Case("eq-rf1-steep", 100, 20, 250, 1, True, 1.5, 6),
    Case("eq-rf2-large", 300, 20, 1000, 2, True, 1.1, 7),
    Case("uneq-rf1-large", 300, 40, 250, 1, False, 1.1, 8),
    Case("eq-rf1-xl", 1000, 20, 2500, 1, True, 1.1, 9),
]
QUICK = CASES[:5]
#: issue 26's largest shape, run apart (``--largest``): minutes on a shared machine
LARGEST = [
    Case("eq-rf1-2000", 2000, 20, 2500, 1, True, 1.1, 10),
    Case("eq-rf2-2000", 2000, 20, 2500, 2, True, 1.1, 11),
]
#: the same shape with unequal subscriptions (each member 5-20 of the 20 topics): ``--largest-unequal``
LARGEST_UNEQUAL = [
    Case("uneq-rf1-2000", 2000, 20, 2500, 1, False, 1.1, 12),
    Case("uneq-rf2-2000", 2000, 20, 2500, 2, False, 1.1, 13),
]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--largest", action="store_true", help="only issue 26's largest shape, 2,000 x 50,000")
    ap.add_argument("--largest-unequal", action="store_true", help="2,000 x 50,000, unequal subscriptions")
    ap.add_argument("--kafka-timeout-s", type=float, default=None, help="give up on a Kafka plan after this")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="one JSON line per case instead of the table")
    args = ap.parse_args(argv)
    cases = (
        LARGEST_UNEQUAL
        if args.largest_unequal
        else LARGEST
        if args.largest
        else QUICK
        if args.quick
        else CASES
    )
    instances = [make_instance(c) for c in cases]
    kafka = {a: kafka_plans(instances, a, args.kafka_timeout_s) for a in ("range", "cooperative-sticky")}
    rows: list[dict[str, Any]] = []
    for k, (case, (cluster, group)) in enumerate(zip(cases, instances, strict=True)):
        row: dict[str, Any] = {
            "case": case.name,
            "members": case.members,
            "partitions": case.topics * case.parts,
        }
        for a, plans in kafka.items():
            plan = plans[k]
            row[a] = None if plan is None else figures(cluster, group, plan)["cross"]
        for label, g in (
            ("count", group),
            ("bytes", replace(group, objective="bytes")),
            ("load", replace(group, objective="bytes", balance="bytes")),
        ):
            t = timed(partial(_plan, cluster, g), args.repeats)
            f = figures(cluster, g, t.result)
            row[label] = f["cross"]
            row[f"{label}_s"] = round(t.cpu, 3)
            row[f"{label}_max_over_mean"] = round(f["max_over_mean"], 3)
            if label != "count":
                row[f"{label}_optimal"] = bool(t.result.stats.get("optimal"))
        row["total"] = f["total"]
        rows.append(row)
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            _print_row(row, header=k == 0)
    _summary(rows)
    return 0


def _pct(x: float | None, total: float) -> str:
    return "-" if x is None else f"{100 * x / total:5.2f}%"


def _print_row(row: dict[str, Any], header: bool) -> None:
    if header:
        print(
            "| case | members x partitions | Kafka range | Kafka coop-sticky | rack-optimal (count) | bytes-optimal "
            "| load-balanced | time count / bytes / load (CPU s) | max/mean load: count, bytes, load |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
    tot = row["total"]
    print(
        f"| {row['case']} | {row['members']} x {row['partitions']} | {_pct(row['range'], tot)} "
        f"| {_pct(row['cooperative-sticky'], tot)} | {_pct(row['count'], tot)} "
        f"| {_pct(row['bytes'], tot)}{'' if row['bytes_optimal'] else ' (not proven)'} | {_pct(row['load'], tot)} "
        f"| {row['count_s']} / {row['bytes_s']} / {row['load_s']} "
        f"| {row['count_max_over_mean']}, {row['bytes_max_over_mean']}, {row['load_max_over_mean']} |",
        flush=True,
    )


def _summary(rows: list[dict[str, Any]]) -> None:
    """How much the bytes plan saves against each other plan: median and worst case over the cases."""
    print()
    for other in ("range", "cooperative-sticky", "count"):
        saved = [1 - r["bytes"] / r[other] for r in rows if r[other] is not None and r[other] > 0]
        never_above = all(r[other] is None or r["bytes"] <= r[other] * (1 + 1e-12) for r in rows)
        if saved:
            print(
                f"bytes plan vs {other}: cross-rack bytes/s lower by {100 * statistics.median(saved):.1f}% "
                f"(median), {100 * min(saved):.1f}% (least); never above: {never_above}"
            )


if __name__ == "__main__":
    sys.exit(main())
