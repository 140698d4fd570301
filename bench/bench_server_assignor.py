"""KIP-848 server-side assignors on the coordinator's own types: rackplan against Kafka's ``uniform`` and ``range``.

    .venv/bin/python -m bench.bench_server_assignor [--warmup 5] [--runs 9] [--shape MEMBERS PARTITIONS] [--traffic | --hard]

Needs Java 17 and Maven.  Compiles clients/java's tests and runs ``dev.rackplan.kafka.ServerAssignorBench``
in one JVM: for each shape (100 / 1,000 / 5,000 members, 10,000 / 50,000 partitions over 100 topics,
replicas in 2 of 3 racks, members spread over the racks; homogeneous, or heterogeneous with 5 overlapping
subscriptions) each assignor (Kafka 4.4's ``UniformAssignor`` and ``RangeAssignor``, and
``RackplanServerAssignor`` with no plan) is timed on ``assign(GroupSpecImpl, describer)`` (the thread's CPU time: the machine is shared): warmed up, then
the median of the timed runs, for a fresh assignment and for one after a member joined (the group holding
the assignor's own fresh answer).  Printed per case: both times, cross-rack partitions and moves after the
join, and whether the result is balanced by Kafka's rule.  docs/performance.md quotes a run.

``--traffic``: the skewed-traffic case instead (replicas in one rack each, racks holding 50 / 30 / 20% of
the partitions, Zipf-like bytes/s): ``uniform``, rackplan without traffic and rackplan weighing the traffic
(``TrafficStore`` filled as the agent's feed fills it): CPU ms per assign, cross-rack partitions and
cross-rack bytes/s after the join, moves on join.

``--hard``: the hard shapes a hunt found (``dev.rackplan.kafka.ServerAssignorShapes``: many subscriptions,
24 or 70 racks, a subscription per member; most of them one member joining a group that holds ``uniform``'s
assignment, the roll-out's switch): ``uniform`` and rackplan, CPU ms per assign, cross-rack partitions,
moves, and whether rackplan handed the group to ``uniform`` (past 63 racks).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
POM = ROOT / "clients" / "java" / "pom.xml"
TARGET = ROOT / "clients" / "java" / "target"


def classpath() -> str:
    cp_file = TARGET / "bench-classpath.txt"
    subprocess.run(
        [
            "mvn", "-q", "-B", "-o", "-f", str(POM), "test-compile", "dependency:build-classpath",
            f"-Dmdep.outputFile={cp_file}", "-Dmdep.includeScope=test",
        ],
        check=True,
    )  # fmt: skip
    return f"{TARGET / 'test-classes'}:{TARGET / 'classes'}:{cp_file.read_text().strip()}"


def run(
    warmup: int, runs: int, shape: list[int] | None, traffic: bool = False, hard: bool = False
) -> list[dict[str, Any]]:
    cmd = [
        "java",
        "-Xmx2g",
        "-cp",
        classpath(),
        "dev.rackplan.kafka.ServerAssignorShapes" if hard else "dev.rackplan.kafka.ServerAssignorBench",
        *(["traffic"] if traffic else []),
        str(warmup),
        str(runs),
    ]
    if shape:
        cmd += [str(shape[0]), str(shape[1])]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def by_case(rows: list[dict[str, Any]], *fields: str) -> dict[tuple[Any, ...], dict[str, dict[str, Any]]]:
    """The JSON lines grouped by case (the values of ``fields``), then by assignor, in the order printed."""
    by: dict[tuple[Any, ...], dict[str, dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(tuple(r[f] for f in fields), {})[r["assignor"]] = r
    return by


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| members | partitions | subscriptions | uniform CPU ms (fresh / join) | range | rackplan | "
        "rackplan / uniform (join) | cross-rack uniform / rackplan | moves on join uniform / rackplan |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for (m, p, s), a in by_case(rows, "members", "partitions", "subscriptions").items():
        u, g, rp = a["uniform"], a["range"], a["rackplan"]
        lines.append(
            f"| {m:,} | {p:,} | {s} | {u['fresh_ms']:.1f} / {u['join_ms']:.1f} | "
            f"{g['fresh_ms']:.1f} / {g['join_ms']:.1f} | {rp['fresh_ms']:.1f} / {rp['join_ms']:.1f} | "
            f"{rp['join_ms'] / max(u['join_ms'], 1e-9):.1f}x | {u['cross_rack']:,} / {rp['cross_rack']:,} | "
            f"{u['moves_on_join']:,} / {rp['moves_on_join']:,} |"
        )
        if rp["balanced"] is not True:
            lines.append(f"|  |  |  | rackplan NOT balanced: {rp['balanced']} |")
    return "\n".join(lines)


def traffic_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| members | partitions | subscriptions | CPU ms join: uniform / rackplan / +traffic | "
        "cross-rack partitions: uniform / rackplan / +traffic | cross-rack bytes/s (% of all): uniform / "
        "rackplan / +traffic | moves on join: rackplan / +traffic |",
        "|---:|---:|---|---:|---:|---:|---:|",
    ]
    for (m, p, s), a in by_case(rows, "members", "partitions", "subscriptions").items():
        u, c, t = a["uniform"], a["rackplan"], a["rackplan+traffic"]
        pct = [100 * x["cross_rack_bytes_per_s"] / max(x["bytes_per_s"], 1e-9) for x in (u, c, t)]
        lines.append(
            f"| {m:,} | {p:,} | {s} | {u['join_ms']:.1f} / {c['join_ms']:.1f} / {t['join_ms']:.1f} | "
            f"{u['cross_rack']:,} / {c['cross_rack']:,} / {t['cross_rack']:,} | "
            f"{pct[0]:.2f}% / {pct[1]:.2f}% / {pct[2]:.2f}% | {c['moves_on_join']:,} / {t['moves_on_join']:,} |"
        )
        for x in (c, t):
            if x["balanced"] is not True:
                lines.append(f"|  |  |  | {x['assignor']} NOT balanced: {x['balanced']} |")
    return "\n".join(lines)


def hard_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| shape | uniform CPU ms | rackplan CPU ms | rackplan / uniform | cross-rack uniform / rackplan | "
        "moves uniform / rackplan | rackplan handed to uniform |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for (shape,), a in by_case(rows, "shape").items():
        u, rp = a["uniform"], a["rackplan"]
        lines.append(
            f"| {shape} | {u['cpu_ms']:.1f} | {rp['cpu_ms']:.1f} | {rp['cpu_ms'] / max(u['cpu_ms'], 1e-9):.1f}x | "
            f"{u['cross_rack']:,} / {rp['cross_rack']:,} | {u['moves']:,} / {rp['moves']:,} | "
            f"{rp['fell_back'] or 'no'} |"
        )
        if rp["balanced"] is not True:
            lines.append(f"|  | rackplan NOT balanced: {rp['balanced']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--runs", type=int, default=9)
    p.add_argument("--shape", type=int, nargs=2, metavar=("MEMBERS", "PARTITIONS"))
    p.add_argument("--traffic", action="store_true", help="the skewed-traffic case")
    p.add_argument("--hard", action="store_true", help="the hard shapes (many subscriptions or racks)")
    args = p.parse_args(argv)
    if args.hard:
        print(hard_table(run(args.warmup, args.runs, None, hard=True)))
        return 0
    if args.traffic:
        print(traffic_table(run(args.warmup, args.runs, args.shape, traffic=True)))
        return 0
    print(table(run(args.warmup, args.runs, args.shape)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
