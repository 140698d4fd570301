"""KIP-1071 Streams assignors on the broker, skewed traffic: Kafka's ``sticky`` against rackplan's plugin.

    .venv/bin/python -m bench.bench_streams_server_assignor [--warmup 5] [--runs 9] [--shape TASKS MEMBERS] [--tags]
        [--host-tag] [--no-racks]

Needs Java 17 and Maven.  Compiles clients/java's tests and runs
``dev.rackplan.kafka.streams.StreamsAssignorBench`` in one JVM: for each shape (100 tasks on 10 members,
1,000 on 50, 2,000 on 200; ten sub-topologies, half stateful, one standby; every partition's one replica
in one rack, the racks holding 50 / 30 / 20% of them; Zipf-like bytes/s), Kafka 4.4's
``StickyTaskAssignor``, rackplan's ``RackplanStreamsTaskAssignor`` by counts and the same weighing the
agent's traffic (a filled ``TrafficStore``) are timed on ``assign(GroupSpec, TopologyDescriber)`` (the
thread's CPU time, warmed up, the median of the timed runs), fresh and after a member joined (the group
holding the assignor's own fresh answer).  Printed per case: both times, and after the join the actives'
cross-rack partitions, cross-rack bytes/s (share of all they read) and moves.  docs/performance.md
quotes a run.  ``--tags``: every member also carries the client tag ``zone`` (one of three, independent of
its rack) and the group sets ``rack.aware.assignment.tags=zone``; ``--host-tag`` (with ``--tags``): also the
tag ``host``, one value a member (``rack.aware.assignment.tags=zone,host``).  ``--no-racks``: no member has
a rack.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from typing import Any

from bench.bench_server_assignor import classpath


def run(
    warmup: int,
    runs: int,
    shape: list[int] | None,
    tags: bool = False,
    host: bool = False,
    no_racks: bool = False,
) -> list[dict[str, Any]]:
    cmd = ["java", "-Xmx2g", "-cp", classpath(), "dev.rackplan.kafka.streams.StreamsAssignorBench"]
    cmd += ["tags"] if tags else []
    cmd += ["host"] if tags and host else []
    cmd += ["norack"] if no_racks else []
    cmd += [str(warmup), str(runs), *([str(shape[0]), str(shape[1])] if shape else [])]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| tasks | members | CPU ms fresh: sticky / rackplan / +traffic | CPU ms join: sticky / rackplan / "
        "+traffic | cross-rack partitions: sticky / rackplan / +traffic | cross-rack bytes/s (% of all): sticky / "
        "rackplan / +traffic | moves on join: sticky / rackplan / +traffic |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    by: dict[tuple[int, int], dict[str, dict[str, Any]]] = {}
    for r in rows:
        by.setdefault((r["tasks"], r["members"]), {})[r["assignor"]] = r
    for (t, m), a in by.items():
        k, c, w = a["sticky"], a["rackplan"], a["rackplan+traffic"]
        pct = [100 * x["cross_rack_bytes_per_s"] / max(x["bytes_per_s"], 1e-9) for x in (k, c, w)]
        lines.append(
            f"| {t:,} | {m:,} | {k['fresh_ms']:.2f} / {c['fresh_ms']:.2f} / {w['fresh_ms']:.2f} | "
            f"{k['join_ms']:.2f} / {c['join_ms']:.2f} / {w['join_ms']:.2f} | "
            f"{k['cross_rack']:,} / {c['cross_rack']:,} / {w['cross_rack']:,} | "
            f"{pct[0]:.1f}% / {pct[1]:.1f}% / {pct[2]:.1f}% | "
            f"{k['moves_on_join']:,} / {c['moves_on_join']:,} / {w['moves_on_join']:,} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--runs", type=int, default=9)
    p.add_argument("--shape", type=int, nargs=2, metavar=("TASKS", "MEMBERS"))
    p.add_argument("--tags", action="store_true", help="members with a client tag the group names")
    p.add_argument("--host-tag", action="store_true", help="with --tags: also a tag with one value a member")
    p.add_argument("--no-racks", action="store_true", help="no member has a rack")
    args = p.parse_args(argv)
    print(table(run(args.warmup, args.runs, args.shape, args.tags, args.host_tag, args.no_racks)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
