"""Benchmark the /metrics exposition at about 10,000 series, in each negotiated format, and the agent's start.

Run:  .venv/bin/python bench/bench_metrics.py [--groups 900] [--repeat 21] [--starts 7]

The agent's series of ``--groups`` consumer groups on 3 racks (per group: plan
generation, cross-rack partitions and ratio, live cross-rack and assigned
partitions, the alert state, and assigned partitions per rack and locality:
11 series), plus every other metric, its zero-initialised counters, both
histograms and the process metrics; once without and once with a ``cluster``
label.  Each answer ``/metrics`` can give: the text format 0.0.4 and
OpenMetrics, plain and gzipped (``Metrics.exposition``: prometheus_client writes
them from the agent's collector).  Baseline, same group series and labels:
prometheus_client's own labelled Gauges and ``generate_latest``.  Prints the
median CPU time of one exposition (``time.process_time``: robust to other load
on the machine), its bytes, and the ratio to the baseline.  Then the cost of
the agent's imports: CPU time and peak RSS of a fresh interpreter that
imports ``rackplan.agent.runtime.loop`` (medians of ``--starts``), and of one
that also imports prometheus_client and h11 alone.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from functools import partial
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prometheus_client import CollectorRegistry, Gauge, generate_latest

from bench.common import timed
from rackplan.agent.metrics.registry import METRICS, Metrics

RACKS = ("az-a", "az-b", "az-c")
GROUP_GAUGES = (
    "rackplan_plan_generation",
    "rackplan_cross_rack_partitions",
    "rackplan_cross_rack_ratio",
    "rackplan_live_cross_rack_partitions",
    "rackplan_live_assigned_partitions",
    "rackplan_alerts_firing",
)


def series(groups: int) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of every per-group series of ``groups`` groups."""
    out: list[tuple[str, dict[str, str], float]] = []
    for i in range(groups):
        g = {"kind": "consumer", "group": f"payments-{i:05d}"}
        for j, name in enumerate(GROUP_GAUGES):
            out.append((name, g, float(i * 7 + j)))
        for rack in RACKS:
            for locality in ("local", "cross_rack"):
                out.append(("rackplan_assigned_partitions", {**g, "rack": rack, "locality": locality}, 12.0))
    return out


def ours(data: list[tuple[str, dict[str, str], float]], cluster: str | None) -> Metrics:
    m = Metrics(cluster=cluster)
    for name, labels, value in data:
        m.set(name, value, labels)
    for v in (0.003, 0.04, 0.2, 1.5):
        m.observe("rackplan_cycle_duration_seconds", v)
        m.observe("rackplan_poll_duration_seconds", v)
    return m


def theirs(data: list[tuple[str, dict[str, str], float]], cluster: str | None) -> CollectorRegistry:
    """The same group series as prometheus_client's own labelled Gauges."""
    reg = CollectorRegistry()
    extra = ("cluster",) if cluster else ()
    gauges = {
        name: Gauge(name, help_text, (*extra, *labels), registry=reg)
        for name, (kind, help_text, labels) in METRICS.items()
        if name in GROUP_GAUGES or name == "rackplan_assigned_partitions"
    }
    for name, labels, value in data:
        gauges[name].labels(**({"cluster": cluster} if cluster else {}), **labels).set(value)
    return reg


FORMATS = (
    ("text 0.0.4", None, None),
    ("text 0.0.4, gzip", None, "gzip"),
    ("OpenMetrics", "application/openmetrics-text", None),
    ("OpenMetrics, gzip", "application/openmetrics-text", "gzip"),
)
#: CPU time of the import (``time.process_time``: robust to other load) and the peak RSS of the interpreter
#: (``VmHWM``: ``ru_maxrss`` would be inherited from the parent across fork and exec)
IMPORT = (
    "import time; t = time.process_time(); import {module}; t = time.process_time() - t; "
    "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1]; print(t, hwm)"
)


def start_cost(module: str, starts: int) -> tuple[float, float]:
    """Median CPU seconds of importing ``module`` in a fresh interpreter, and its median peak RSS (MiB)."""
    walls, rss = [], []
    for _ in range(starts):
        out = subprocess.run(
            [sys.executable, "-c", IMPORT.format(module=module)], capture_output=True, text=True, check=True
        ).stdout.split()
        walls.append(float(out[0]))
        rss.append(int(out[1]) / 1024)
    return statistics.median(walls), statistics.median(rss)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=900)
    ap.add_argument("--repeat", type=int, default=21, help="timed expositions per figure (median)")
    ap.add_argument("--starts", type=int, default=7, help="fresh interpreters per import figure (median)")
    args = ap.parse_args(argv)
    data = series(args.groups)
    print(
        f"{len(data):,} group series ({args.groups} groups) + the agent's other series; medians of {args.repeat}"
    )
    print(f"{'exposition':<40}{'series':>8}{'bytes':>11}{'CPU ms':>9}{'Gauges CPU ms':>15}{'ratio':>7}")
    for cluster in (None, "prod-eu-1"):
        m = ours(data, cluster)
        b = timed(partial(generate_latest, theirs(data, cluster)), args.repeat)
        for name, accept, encoding in FORMATS:
            t = timed(partial(m.exposition, accept, encoding), args.repeat)
            text = m.render(accept)
            lines = sum(1 for line in text.splitlines() if not line.startswith("#"))
            label = f"{name}, {'with' if cluster else 'no'} cluster label"
            print(
                f"{label:<40}{lines:>8,}{len(t.result.body):>11,}{t.cpu * 1e3:>9.1f}"
                f"{b.cpu * 1e3:>15.1f}{b.cpu / t.cpu:>7.2f}"
            )
    print(f"\nimports in a fresh interpreter, medians of {args.starts}: CPU ms, peak RSS MiB")
    for module in ("sys", "prometheus_client, h11", "rackplan.agent.runtime.loop"):
        wall, rss = start_cost(module, args.starts)
        print(f"  import {module:<38}{wall * 1e3:>8.1f} ms{rss:>8.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
