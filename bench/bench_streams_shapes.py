"""``rackplan assign`` on the Streams shapes that once blew up: time and peak memory, end to end.

    .venv/bin/python -m bench.bench_streams_shapes [--scale 1.0]

Three apps a tester built (session 30; docs/performance.md, "Pathological shapes, bounded"):

* ``lcm``: the sticky assignor, one task, 16,000 clients of distinct int32 ``threads``
  (the loads once compared through ``lcm(threads)``: 677 MB);
* ``own-zone``: high availability, 1,000 clients each with its own ``zone`` tag value, 2,000
  stateful tasks, 2 standbys (the spread flow once had a node per task and value: 1.1 GB);
* ``lags``: high availability, 20,000 tasks on 5,000 clients, each task caught up on one client
  and 50,000 behind on another (the movements once sorted every client per move: 49.5 s).

Each app is written to a file and ``rackplan assign FILE`` runs once in a fresh interpreter (this
venv); wall time, CPU and the child's peak RSS (``wait4``) are printed.  ``--scale`` multiplies
the client and task counts.  Deterministic inputs (seeded).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RACKS = ["a", "b", "c"]
BROKERS = [{"id": i, "rack": RACKS[i % 3]} for i in range(6)]


def lcm_app(clients: int) -> dict[str, Any]:
    threads = [{"process_id": f"p{i}", "threads": 2**31 - 1 - i} for i in range(clients)]
    app = {"application_id": "lcm", "assignor": "sticky", "clients": threads,
           "subtopologies": [{"id": "0", "source_topics": ["in"]}]}  # fmt: skip
    return {"cluster": {"brokers": BROKERS[:1], "topics": {"in": [[0]]}}, "streams_app": app}


def own_zone_app(clients: int, tasks: int) -> dict[str, Any]:
    rng = random.Random(3)
    topics = {t: [rng.sample(range(6), 2) for _ in range(tasks)] for t in ("in", "cl")}
    members = [
        {"process_id": f"p{i:05d}", "rack": RACKS[i % 3], "tags": {"zone": f"z{i}"}} for i in range(clients)
    ]
    app = {"application_id": "zones", "clients": members, "num_standby_replicas": 2,
           "subtopologies": [{"id": "0", "source_topics": ["in"], "changelog_topics": ["cl"]}],
           "rack_aware_assignment_tags": ["zone"], "rack_aware": {"strategy": "min_traffic"}}  # fmt: skip
    return {"cluster": {"brokers": BROKERS, "topics": topics}, "streams_app": app}


def lags_app(clients: int, tasks: int) -> dict[str, Any]:
    rng = random.Random(7)
    topics = {t: [[rng.randrange(6), rng.randrange(6)] for _ in range(tasks)] for t in ("in0", "cl0")}
    members: list[dict[str, Any]] = [
        {"process_id": f"p{i:06d}", "rack": RACKS[i % 3], "threads": 1, "task_lags": {}}
        for i in range(clients)
    ]
    for p in range(tasks):
        a, b = rng.sample(range(clients), 2)
        members[a]["task_lags"][f"0_{p}"] = 0
        members[b]["task_lags"][f"0_{p}"] = 50_000
    app = {"application_id": "lags", "clients": members, "num_standby_replicas": 1,
           "subtopologies": [{"id": "0", "source_topics": ["in0"], "changelog_topics": ["cl0"], "stateful": True}],
           "rack_aware": {"strategy": "min_traffic"}}  # fmt: skip
    return {"cluster": {"brokers": BROKERS, "topics": topics}, "streams_app": app}


def run(path: Path) -> tuple[float, float, float]:
    """Wall s, CPU s and peak RSS MiB of ``rackplan assign path`` in a fresh interpreter."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rackplan", "assign", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(
            f"rackplan assign {path.name} failed: {proc.stderr.read().decode() if proc.stderr else ''}"
        )
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies the client and task counts")
    k = ap.parse_args(argv).scale
    apps = {
        "lcm (16,000 clients)": lcm_app(int(16_000 * k)),
        "own-zone (1,000 clients, 2,000 tasks)": own_zone_app(int(1_000 * k), int(2_000 * k)),
        "lags (5,000 clients, 20,000 tasks)": lags_app(int(5_000 * k), int(20_000 * k)),
    }
    print(f"scale {k:g}\n")
    print_runs("app", apps)
    return 0


def print_runs(what: str, inputs: dict[str, dict[str, Any]]) -> None:
    """A markdown table: each input written to a file and :func:`run` once on it, one row as it ends."""
    print(f"| {what} | wall s | CPU s | peak RSS MiB |\n|---|---|---|---|")
    with tempfile.TemporaryDirectory() as d:
        for name, doc in inputs.items():
            path = Path(d) / "input.json"
            path.write_text(json.dumps(doc))
            wall, cpu, rss = run(path)
            print(f"| {name} | {wall:.2f} | {cpu:.2f} | {rss:.0f} |", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
