"""Prometheus naming conventions of every metric, the exposition format, and series bookkeeping."""

from __future__ import annotations

import gzip
import http.client
import math
import os
import platform
import re
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families

from rackplan.agent.alerts import webhook
from rackplan.agent.cluster import diff
from rackplan.agent.metrics.declared import COUNTER, GAUGE, HISTOGRAM
from rackplan.agent.metrics.process_stats import PROCESS_METRICS, process_values
from rackplan.agent.metrics.registry import (
    BUCKETS,
    METRICS,
    NOT_ZERO_INITIALISED,
    ZERO_SERIES,
    Metrics,
)
from rackplan.agent.protocol import alerts, plans, registrations

NAME = re.compile(r"rackplan_[a-z][a-z0-9_]*[a-z0-9]")
#: unit suffixes that are not base units
NOT_BASE_UNITS = ("_ms", "_milliseconds", "_minutes", "_hours", "_percent", "_kilobytes", "_megabytes")
#: labels whose values would be unbounded or identify clients
FORBIDDEN_LABELS = {"member", "member_id", "client", "client_id", "process_id", "host", "instance_id"}


@pytest.mark.parametrize("name", sorted(METRICS))
def test_names_follow_prometheus_conventions(name: str) -> None:
    kind, help_text, labels = METRICS[name]
    assert NAME.fullmatch(name), name
    assert kind in (COUNTER, GAUGE, HISTOGRAM)
    assert (kind == HISTOGRAM) == (name in BUCKETS), "histograms, and only they, have buckets"
    assert name.endswith("_total") == (kind == COUNTER), "counters, and only counters, end in _total"
    assert not any(name.removesuffix("_total").endswith(s) for s in NOT_BASE_UNITS), "base units only"
    words = name.removesuffix("_total").split("_")
    if {"duration", "age", "timestamp"}.intersection(words):
        assert words[-1] == "seconds", "times in seconds"
    if {"ratio", "fraction"}.intersection(words):
        assert words[-1] == "ratio", "0..1 ratios end in _ratio"
    assert help_text and (help_text[0].isupper() or help_text[0].isdigit()) and help_text.endswith(".")
    assert not FORBIDDEN_LABELS.intersection(labels)
    assert all(re.fullmatch(r"[a-z_]+", label) for label in labels)


def test_exposition_format() -> None:
    m = Metrics()
    m.inc("rackplan_polls_total", {"result": "ok"})
    m.inc("rackplan_polls_total", {"result": "ok"})
    m.set("rackplan_cross_rack_ratio", 0.125, {"kind": "consumer", "group": 'we"ird\\name'})
    m.set_function("rackplan_snapshot_age_seconds", lambda: 3.5)
    text = m.render()
    assert "# HELP rackplan_polls_total Metadata polls, by result (ok, failed).\n" in text
    assert "# TYPE rackplan_polls_total counter\n" in text
    assert 'rackplan_polls_total{result="ok"} 2.0\n' in text
    assert 'rackplan_cross_rack_ratio{group="we\\"ird\\\\name",kind="consumer"} 0.125\n' in text
    assert "rackplan_snapshot_age_seconds 3.5\n" in text
    m.set_function("rackplan_snapshot_age_seconds", lambda: None)
    assert "\nrackplan_snapshot_age_seconds " not in m.render()  # no snapshot yet: no sample
    for name in METRICS:
        assert f"# TYPE {name} " in text


def test_labels_must_match_the_declaration() -> None:
    m = Metrics()
    with pytest.raises(ValueError, match="labels"):
        m.inc("rackplan_polls_total", {"member_id": "m-1"})
    with pytest.raises(ValueError, match="labels"):
        m.set("rackplan_cross_rack_ratio", 1.0, {"group": "g"})


def test_a_groups_series_are_replaced_and_removed_together() -> None:
    m = Metrics()
    g = {"kind": "consumer", "group": "g"}
    h = {"kind": "consumer", "group": "h"}

    def lab(d: dict[str, str]) -> tuple[tuple[str, str], ...]:
        return tuple(sorted(d.items()))

    m.replace(
        "rackplan_assigned_partitions",
        g,
        {lab({**g, "rack": "a", "locality": "local"}): 3, lab({**g, "rack": "b", "locality": "local"}): 1},
    )
    m.replace("rackplan_assigned_partitions", h, {lab({**h, "rack": "a", "locality": "local"}): 5})
    m.replace("rackplan_assigned_partitions", g, {lab({**g, "rack": "c", "locality": "cross_rack"}): 2})
    assert sorted(dict(k)["rack"] for k in m.series("rackplan_assigned_partitions")) == ["a", "c"]
    m.set("rackplan_alerts_firing", 1, g)
    m.remove("rackplan_assigned_partitions", g)
    m.remove("rackplan_alerts_firing", g)
    assert list(m.series("rackplan_assigned_partitions")) == [lab({**h, "rack": "a", "locality": "local"})]
    assert m.series("rackplan_alerts_firing") == {}
    m.replace("rackplan_brokers", {}, {(("rack", "a"),): 2})
    m.replace("rackplan_brokers", {}, {(("rack", "b"),): 1})
    assert m.series("rackplan_brokers") == {(("rack", "b"),): 1.0}


# ---- samples from the start ------------------------------------------------------------------------


def samples(text: str) -> dict[str, float]:
    """``name{labels}`` -> value of every sample line of an exposition."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, _, value = line.rpartition(" ")
            out[series] = float(value)
    return out


def names_with_samples(text: str) -> set[str]:
    return {re.split(r"[{ ]", line, maxsplit=1)[0] for line in text.splitlines() if not line.startswith("#")}


def test_every_counter_has_a_sample_from_the_start() -> None:
    text = Metrics().render()
    present = names_with_samples(text)
    for name, (kind, _, labels) in METRICS.items():
        if kind != COUNTER:
            continue
        if labels and name not in ZERO_SERIES:
            assert name in NOT_ZERO_INITIALISED, f"{name}: no zero series and no reason why"
            continue
        assert name in present, f"{name} has no sample before its first event"
    for name, sets in ZERO_SERIES.items():
        assert METRICS[name][0] == COUNTER
        for label_values in sets:
            assert sorted(label_values) == sorted(METRICS[name][2])
            lab = ",".join(f'{k}="{v}"' for k, v in sorted(label_values.items()))
            assert samples(text)[f"{name}{{{lab}}}"] == 0
    assert set(NOT_ZERO_INITIALISED) <= set(METRICS)


def test_an_event_adds_to_the_zero_series_not_a_second_one() -> None:
    m = Metrics()
    m.inc("rackplan_polls_total", {"result": "failed"})
    m.inc("rackplan_registrations_expired_total", by=3)
    text = m.render()
    assert text.count('rackplan_polls_total{result="failed"}') == 1
    assert samples(text)['rackplan_polls_total{result="failed"}'] == 1
    assert samples(text)['rackplan_polls_total{result="ok"}'] == 0
    assert samples(text)["rackplan_registrations_expired_total"] == 3
    assert m.series("rackplan_polls_total") == {(("result", "failed"),): 1.0}, (
        "zeros are rendered, not stored"
    )


def test_zero_series_are_the_label_values_the_code_uses() -> None:
    """The declared label values equal the constants of the modules that count them."""

    def values(name: str, label: str) -> set[str]:
        return {d[label] for d in ZERO_SERIES[name]}

    kinds = {plans.CONSUMER, plans.STREAMS}
    changes = {diff.REPLICA_RACKS, diff.LEADER_RACK, diff.TOPIC_ADDED, diff.TOPIC_REMOVED}
    changes |= {diff.PARTITIONS_ADDED, diff.PARTITIONS_REMOVED, diff.BROKER_RACK}
    assert values("rackplan_metadata_changes_total", "change") == changes
    assert values("rackplan_registration_records_skipped_total", "reason") == set(registrations.SKIP_REASONS)
    assert {alerts.FIRING, alerts.RESOLVED} <= values("rackplan_alerts_total", "status")
    for name in ("rackplan_plans_published_total", "rackplan_plan_failures_total"):
        assert values(name, "kind") == kinds
    # the webhook's failure reasons, from the function that classifies each attempt
    seen = set(webhook.BATCH_FAILURE_REASONS)
    for outcome in (302, 404, 503, TimeoutError("slow"), ConnectionRefusedError("refused"),
                    http.client.BadStatusLine("SSH-2.0"), ValueError("Invalid header value")):  # fmt: skip

        def post(*_a: Any, outcome: Any = outcome) -> int:
            if isinstance(outcome, Exception):
                raise outcome
            return int(outcome)

        with pytest.raises(webhook.WebhookError) as e:
            webhook._attempt(post, "http://x.invalid/", b"[]", {}, 1.0)
        seen.add(e.value.reason)
    assert values("rackplan_webhook_failures_total", "reason") == seen


# ---- histograms --------------------------------------------------------------------------------------


@given(st.lists(st.floats(min_value=0, max_value=500, allow_nan=False), max_size=50))
def test_histogram_buckets_count_every_observation_at_or_below_their_bound(values: list[float]) -> None:
    m = Metrics(process=False)
    for v in values:
        m.observe("rackplan_cycle_duration_seconds", v)
    buckets, total, count = m.histogram("rackplan_cycle_duration_seconds")
    bounds = (*BUCKETS["rackplan_cycle_duration_seconds"], math.inf)
    assert buckets == [sum(1 for v in values if v <= b) for b in bounds]
    assert count == len(values) and total == pytest.approx(sum(values))
    lines = samples(m.render())
    for b, n in zip(bounds, buckets, strict=True):
        le = "+Inf" if b == math.inf else repr(b)
        assert lines[f'rackplan_cycle_duration_seconds_bucket{{le="{le}"}}'] == n
    assert lines["rackplan_cycle_duration_seconds_count"] == len(values)
    assert lines["rackplan_cycle_duration_seconds_sum"] == pytest.approx(sum(values))


def test_histograms_exist_before_the_first_observation() -> None:
    text = Metrics(process=False).render()
    for name, (kind, *_) in METRICS.items():
        if kind == HISTOGRAM:
            assert f"# TYPE {name} histogram\n" in text
            assert f'{name}_bucket{{le="+Inf"}} 0.0\n' in text and f"{name}_count 0.0\n" in text


# ---- build info, cluster label, process metrics -------------------------------------------------------


def test_build_info_names_the_package_and_python_versions() -> None:
    lines = samples(Metrics(process=False).render())
    key = f'rackplan_build_info{{python="{platform.python_version()}",version="{metadata.version("rackplan")}"}}'
    assert lines[key] == 1


def test_cluster_label_on_every_sample() -> None:
    m = Metrics(cluster='prod "eu"')
    m.set("rackplan_cross_rack_ratio", 0.5, {"kind": "consumer", "group": "g"})
    m.observe("rackplan_poll_duration_seconds", 0.2)
    m.set_function("rackplan_snapshot_age_seconds", lambda: 2.0)
    text = m.render()
    body = [line for line in text.splitlines() if not line.startswith("#")]
    assert body and all('cluster="prod \\"eu\\""' in line for line in body), "every sample, escaped"
    parsed = [s for f in text_string_to_metric_families(text) for s in f.samples]
    assert len(parsed) == len(body) and all(s.labels["cluster"] == 'prod "eu"' for s in parsed)
    assert 'rackplan_cross_rack_ratio{cluster="prod \\"eu\\"",group="g",kind="consumer"} 0.5' in body
    assert 'rackplan_poll_duration_seconds_bucket{cluster="prod \\"eu\\"",le="0.25"} 1.0' in body
    assert 'rackplan_snapshot_age_seconds{cluster="prod \\"eu\\""} 2.0' in body
    assert 'process_open_fds{cluster="prod \\"eu\\""}' in text
    assert "cluster=" not in Metrics().render(), "no cluster_name: no cluster label"


def test_the_agent_labels_its_metrics_with_cluster_name() -> None:
    from rackplan.agent.testing import FakeAdmin
    from tests.agent.cycle.test_run import cycle, group, make_agent

    agent, _, _ = make_agent(FakeAdmin({"t": [[1]]}), [group("g")], cluster_name="eu-1")
    cycle(agent)
    assert 'rackplan_polls_total{cluster="eu-1",result="ok"} 1.0\n' in agent.metrics.render()


def test_process_metrics_agree_with_the_kernel_and_the_standard_library() -> None:
    if not Path("/proc/self/stat").exists():
        pytest.skip("process metrics beyond CPU time need /proc (Linux)")
    before = process_values()
    assert set(before) == set(PROCESS_METRICS)
    t = os.times()
    assert before["process_cpu_seconds_total"] == pytest.approx(t.user + t.system, abs=0.05)
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:  # burn CPU: the counter moves by as much
        pass
    assert process_values()["process_cpu_seconds_total"] - before["process_cpu_seconds_total"] >= 0.25
    deltas = []
    for _ in range(5):  # another thread of the test process may open or close a file meanwhile: retry
        base = process_values()["process_open_fds"]
        with open(__file__) as f1, open(__file__) as f2:
            deltas.append(process_values()["process_open_fds"] - base)
            assert f1.fileno() != f2.fileno()
        if deltas[-1] == 2:
            break
    assert deltas[-1] == 2, deltas
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    rss_kb = int(status["VmRSS"].split()[0])
    assert before["process_resident_memory_bytes"] == pytest.approx(rss_kb * 1024, rel=0.2)
    elapsed = int(
        subprocess.run(
            ["ps", "-o", "etimes=", "-p", str(os.getpid())], capture_output=True, text=True, check=True
        ).stdout
    )
    assert before["process_start_time_seconds"] == pytest.approx(time.time() - elapsed, abs=2.0)
    import resource

    assert before["process_max_fds"] == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    text = Metrics().render()
    for name, (kind, _) in PROCESS_METRICS.items():
        assert f"# TYPE {name} {kind}\n" in text and f"\n{name} " in text


# ---- promtool on the real endpoint ---------------------------------------------------------------------


@pytest.mark.parametrize("cluster", [None, "eu-1"])
def test_promtool_accepts_the_agents_metrics_endpoint(cluster: str | None) -> None:
    """The agent's /metrics over HTTP, after plans, a change, an alert and a webhook post, passes promtool's
    parser and linter (which rejects, e.g., a counter without ``_total`` or a malformed label)."""
    import urllib.request

    from rackplan.agent.runtime.http import AgentHttpServer
    from rackplan.agent.testing import FakeAdmin
    from tests import promtool
    from tests.agent.cycle.test_run import cycle, group, make_agent

    promtool.promtool()
    admin = FakeAdmin({"t": [[3], [3]], "u": [[1], [2]]})
    extra = {} if cluster is None else {"cluster_name": cluster}
    agent, _, _ = make_agent(admin, [group("bad"), group("good", topics=["u"])], posts=[], **extra)
    cycle(agent)
    admin.topics = {"t": [[1], [2]], "u": [[1], [2]]}
    cycle(agent)
    admin.down = True
    cycle(agent)
    server = AgentHttpServer(agent.status, agent.metrics, "127.0.0.1", 0)
    server.start()
    url = f"http://127.0.0.1:{server.port}/metrics"
    openmetrics = {"Accept": "application/openmetrics-text; version=1.0.0", "Accept-Encoding": "gzip"}
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            body = resp.read().decode()
        with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})) as resp:
            gzipped = gzip.decompress(resp.read()).decode()
        with urllib.request.urlopen(urllib.request.Request(url, headers=openmetrics), timeout=10) as resp:
            om = gzip.decompress(resp.read()).decode()
    finally:
        server.close()
        agent.close()
    # the OpenMetrics answer by prometheus_client's strict parser (promtool's check reads the text format only)
    names = {f.name for f in parse_openmetrics(om)}  # type: ignore[no-untyped-call]
    assert om.endswith("# EOF\n") and {"rackplan_polls", "rackplan_cycle_duration_seconds"} <= names
    gz = promtool.run("check", "metrics", stdin=gzipped)
    assert gz.returncode == 0 and "rackplan_polls_total{" in gzipped, gz.stdout + gz.stderr
    assert "rackplan_polls_total{" in body and "rackplan_cycle_duration_seconds_bucket" in body
    result = promtool.run("check", "metrics", stdin=body)
    assert result.returncode == 0, result.stdout + result.stderr
    broken = body.replace("rackplan_polls_total", "rackplan_polls", 3)
    assert promtool.run("check", "metrics", stdin=broken).returncode != 0, "promtool lints, not only parses"


def _documented_metrics() -> dict[str, set[str]]:
    """docs/agent.md's metrics table (HTTP): each metric name of a row -> the labels the row names."""
    doc = (Path(__file__).parents[3] / "docs" / "agent.md").read_text(encoding="utf-8")
    rows: dict[str, set[str]] = {}
    for line in doc.splitlines():
        if not line.startswith("| `rackplan_"):
            continue
        names, labels = line.split("|")[1:3]
        for name in re.findall(r"`(rackplan_[a-z0-9_]+)`", names):
            rows[name] = set(re.findall(r"`([a-z_]+)`", labels))
    return rows


def test_the_metrics_table_lists_every_metric_with_its_labels() -> None:
    """monitoring.md: "agent.md lists every metric"; eight were missing from its table, three of them in the
    shipped alerting rules (rackplan_live_unknown_rack_partitions, ...).  Found by a hunt."""
    rows = _documented_metrics()
    ours = {n for n in METRICS if n.startswith("rackplan_")}
    assert sorted(ours - rows.keys()) == [], "metrics missing from docs/agent.md's table"
    assert sorted(rows.keys() - ours) == [], "rows of metrics that do not exist"
    assert {n: set(METRICS[n][2]) for n in ours} == {n: rows[n] for n in ours}
