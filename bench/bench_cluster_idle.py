"""The test cluster's idle CPU: what six Kafka JVMs cost the suite's 2 cores with nothing to do.

    .venv/bin/python -m bench.bench_cluster_idle [--settle 20] [--over 30] [--set KEY=VALUE ...]

Starts the integration suite's cluster (``integration.kafka.cluster.KafkaCluster``, the launcher's
test overrides plus any ``--set``), waits ``--settle`` seconds, then reads the JVMs' user and system
CPU from ``/proc/PID/stat`` over ``--over`` seconds and prints it in cores. Session 16 tried
``--set replica.fetch.wait.max.ms=500`` with it (docs/performance.md, "The test suite").
"""

from __future__ import annotations

import argparse
import os
import time

from integration.kafka import cluster as launcher


def cpu_ticks(pids: list[int]) -> int:
    """User plus system clock ticks of ``pids`` so far."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--settle", type=float, default=20.0)
    ap.add_argument("--over", type=float, default=30.0)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    a = ap.parse_args(argv)
    extra = dict(kv.split("=", 1) for kv in a.set)
    launcher.TEST_OVERRIDES = {**launcher.TEST_OVERRIDES, **extra}
    cluster = launcher.KafkaCluster()
    try:
        print(cluster.start().line(), flush=True)
        pids = [n.process.pid for n in cluster.nodes.values() if n.process is not None]
        time.sleep(a.settle)
        before = cpu_ticks(pids)
        time.sleep(a.over)
        cores = (cpu_ticks(pids) - before) / os.sysconf("SC_CLK_TCK") / a.over
        print(
            f"idle CPU of {len(pids)} JVMs over {a.over:.0f} s: {cores:.3f} cores {extra or ''}", flush=True
        )
    finally:
        cluster.close()


if __name__ == "__main__":
    main()
