"""Benchmark the /metrics exposition at about 10,000 series against prometheus_client.

Run:  .venv/bin/python bench/bench_metrics.py [--groups 900] [--repeat 21]

The agent's series of ``--groups`` consumer groups on 3 racks (per group: plan
generation, cross-rack partitions and ratio, live cross-rack and assigned
partitions, the alert state, and assigned partitions per rack and locality:
11 series), plus every other metric, its zero-initialised counters, both
histograms and the process metrics; once without and once with a ``cluster``
label.  Baseline, same series and same labels: prometheus_client's
``generate_latest`` over a registry of Gauges, when the package is importable
(it is not a dependency of rackplan: ``pip install prometheus_client`` to
compare).  Prints the median CPU time of one exposition (``time.process_time``: robust to
other load on the machine) and the ratio.
"""

from __future__ import annotations

import argparse
import sys
from functools import partial
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

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


def theirs(data: list[tuple[str, dict[str, str], float]], cluster: str | None) -> Any:
    from prometheus_client import CollectorRegistry, Gauge  # not a dependency: the baseline only

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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=900)
    ap.add_argument("--repeat", type=int, default=21, help="timed expositions per figure (median)")
    args = ap.parse_args(argv)
    data = series(args.groups)
    try:
        from prometheus_client import generate_latest
    except ImportError:
        generate_latest = None
    print(
        f"{len(data):,} group series ({args.groups} groups) + the agent's other series; medians of {args.repeat}"
    )
    print(
        f"{'exposition':<34}{'series':>8}{'bytes':>10}{'CPU ms':>9}{'prometheus_client CPU ms':>26}{'ratio':>7}"
    )
    for cluster in (None, "prod-eu-1"):
        m = ours(data, cluster)
        t = timed(m.render, args.repeat)
        lines = sum(1 for line in t.result.splitlines() if not line.startswith("#"))
        label = "with cluster label" if cluster else "without cluster label"
        base, ratio = "-", "-"
        if generate_latest is not None:
            reg = theirs(data, cluster)
            b = timed(partial(generate_latest, reg), args.repeat)
            base, ratio = f"{b.cpu * 1e3:.1f}", f"{b.cpu / t.cpu:.1f}"
        print(f"{label:<34}{lines:>8,}{len(t.result):>10,}{t.cpu * 1e3:>9.1f}{base:>26}{ratio:>7}")
    if generate_latest is None:
        print("prometheus_client not importable: baseline not measured (pip install prometheus_client)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
