"""Prometheus naming conventions of every metric, the exposition format, and series bookkeeping."""

from __future__ import annotations

import re

import pytest

from agent.metrics import COUNTER, GAUGE, METRICS, Metrics

NAME = re.compile(r"rackplan_[a-z][a-z0-9_]*[a-z0-9]")
#: unit suffixes that are not base units
NOT_BASE_UNITS = ("_ms", "_milliseconds", "_minutes", "_hours", "_percent", "_kilobytes", "_megabytes")
#: labels whose values would be unbounded or identify clients
FORBIDDEN_LABELS = {"member", "member_id", "client", "client_id", "process_id", "host", "instance_id"}


@pytest.mark.parametrize("name", sorted(METRICS))
def test_names_follow_prometheus_conventions(name: str) -> None:
    kind, help_text, labels = METRICS[name]
    assert NAME.fullmatch(name), name
    assert kind in (COUNTER, GAUGE)
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
    assert 'rackplan_polls_total{result="ok"} 2\n' in text
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
