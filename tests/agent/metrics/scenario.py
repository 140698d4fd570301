"""One registry state touching every kind of series, for comparing expositions across implementations.

tests/agent/metrics/exposition_before*.txt are this state rendered by the hand-written exposition the agent
had before prometheus_client (commit bc661b7), its process and build-info lines left out:
tests/agent/metrics/test_exposition.py checks that today's exposition holds every one of those samples.
"""

from __future__ import annotations

from rackplan.agent.metrics import declared as m
from rackplan.agent.metrics.registry import Metrics

#: group names that need escaping in a label value
GROUPS = ("payments", 'we"ird\\name', "multi\nline")


def populate(metrics: Metrics) -> Metrics:
    """Counters, gauges, a function gauge, histograms and a group's series replaced, deterministically."""
    metrics.inc(m.POLLS_TOTAL, {"result": "ok"}, by=41)
    metrics.inc(m.POLLS_TOTAL, {"result": "failed"})
    metrics.inc(m.REGISTRATIONS_EXPIRED_TOTAL, by=3)
    metrics.inc(m.TOPIC_RACK_CHANGES_TOTAL, {"topic": "orders"}, by=2)
    metrics.inc(m.DESCRIBE_GROUPS_FAILURES_TOTAL, {"reason": "COORDINATOR_NOT_AVAILABLE"})
    metrics.inc(m.RECORDS_SKIPPED_TOTAL, {"topic": "plans", "reason": "not_json"})
    metrics.set(m.READY, 1)
    metrics.set(m.SNAPSHOT_PARTITIONS, 1234)
    metrics.set(m.SNAPSHOT_TIMESTAMP_SECONDS, 1_790_000_000.25)
    metrics.set_function(m.SNAPSHOT_AGE_SECONDS, lambda: 3.5)
    metrics.replace(m.BROKERS, {}, {(("rack", "az-a"),): 2, (("rack", ""),): 1})
    for i, group in enumerate(GROUPS):
        g = {"kind": "consumer", "group": group}
        metrics.set(m.PLAN_GENERATION, 7 + i, g)
        metrics.set(m.CROSS_RACK_PARTITIONS, i, g)
        metrics.set(m.CROSS_RACK_RATIO, i / 8, g)
        metrics.replace(
            m.ASSIGNED_PARTITIONS,
            g,
            {
                tuple(sorted({**g, "rack": rack, "locality": loc}.items())): float(n)
                for n, (rack, loc) in enumerate((("az-a", "local"), ("az-b", "cross_rack")), start=1)
            },
        )
    metrics.set(m.ALERTS_FIRING, 1, {"kind": "streams", "group": "app"})
    for v in (0.003, 0.04, 0.2, 1.5, 300.0):
        metrics.observe(m.CYCLE_DURATION_SECONDS, v)
    metrics.observe(m.POLL_DURATION_SECONDS, 0.01)
    return metrics


def comparable(text: str) -> str:
    """An exposition without the lines that differ between runs: process metrics and build info."""
    return "".join(
        line
        for line in text.splitlines(keepends=True)
        if "process_" not in line and "rackplan_build_info" not in line
    )
