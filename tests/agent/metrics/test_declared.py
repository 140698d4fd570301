"""Metrics declared once as objects (agent/metrics/declared.py); call sites name them by object, never by string."""

from __future__ import annotations

import ast
from pathlib import Path

import rackplan.agent
from rackplan.agent.metrics import declared
from rackplan.agent.metrics.declared import DECLARED, Metric
from rackplan.agent.metrics.registry import METRICS, Metrics

ROOT = Path(__file__).resolve().parents[3]
AGENT = Path(rackplan.agent.__file__).resolve().parent


def test_each_object_is_named_after_its_metric_and_declared_once() -> None:
    objects = {k: v for k, v in vars(declared).items() if isinstance(v, Metric)}
    assert {k: v.name.removeprefix("rackplan_").upper() for k, v in objects.items()} == {
        k: k for k in objects
    }
    assert sorted(objects.values(), key=str) == sorted(DECLARED, key=str), "every object in DECLARED, once"
    assert list(METRICS) == [m.name for m in DECLARED], (
        "the registry's table is the declared one, in its order"
    )


def test_an_object_and_its_name_address_the_same_series() -> None:
    m = Metrics(process=False)
    m.inc(declared.POLLS_TOTAL, {"result": "ok"})
    m.inc("rackplan_polls_total", {"result": "ok"})
    assert (
        m.get(declared.POLLS_TOTAL, {"result": "ok"}) == 2 == m.get("rackplan_polls_total", {"result": "ok"})
    )


def test_every_declared_metric_is_exposed_and_documented() -> None:
    text = Metrics(process=False).render()
    docs = (ROOT / "docs" / "agent.md").read_text(encoding="utf-8") + (
        ROOT / "docs" / "monitoring.md"
    ).read_text(encoding="utf-8")
    for m in DECLARED:
        assert f"# HELP {m.name} {m.help}\n" in text and f"# TYPE {m.name} {m.type}\n" in text, m.name
        assert m.name in docs, f"{m.name} is not in docs/agent.md or docs/monitoring.md"


def test_no_agent_module_names_a_metric_by_a_string() -> None:
    # Outside the metrics package, a metric is an object of ``declared``: a string naming one is a typo
    # waiting to happen (the series would silently never appear, or fail only at run time).
    found = []
    for path in sorted(AGENT.rglob("*.py")):
        rel = path.relative_to(AGENT).as_posix()
        if rel.startswith("metrics/"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in METRICS:
                found.append((rel, node.lineno, node.value))
    assert found == []
