"""The monitoring kit (monitoring/): rules, their unit tests, Alertmanager, Prometheus and Grafana files, the
runbook, and the compose services that run them.  promtool and amtool (``make promtool``) do the parsing; the
metric names every query uses are checked against the agent's own exposition, so a renamed metric fails here.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from rackplan.agent.alerts import webhook
from rackplan.agent.metrics.registry import METRICS, Metrics
from tests import go_tools, promtool

ROOT = Path(__file__).resolve().parent.parent
KIT = ROOT / "monitoring"
RULES = KIT / "prometheus" / "rules" / "rackplan.yml"
RULE_TESTS = KIT / "prometheus" / "tests" / "rackplan.test.yml"
PROMETHEUS = KIT / "prometheus" / "prometheus.yml"
ALERTMANAGER = KIT / "alertmanager" / "alertmanager.yml"
DASHBOARD = KIT / "grafana" / "dashboards" / "rackplan.json"
DATASOURCES = KIT / "grafana" / "provisioning" / "datasources" / "prometheus.yml"
DASHBOARD_PROVIDERS = KIT / "grafana" / "provisioning" / "dashboards" / "rackplan.yml"
RUNBOOK = ROOT / "docs" / "runbook.md"

#: series Prometheus makes itself, not the agent
PROMETHEUS_SERIES = {"up", "ALERTS", "ALERTS_FOR_STATE"}
#: the agent's own alerts (its webhook) and their states that have a runbook section of their own
#: (RackplanLocalityUnfixable: the "unfixable" report of a group whose best plan is above the threshold)
AGENT_ALERT_ANCHORS = {webhook.ALERTNAME.lower(), "rackplanlocalityunfixable"}


def exposed_names() -> set[str]:
    """Every series name the agent exposes: its ``# TYPE`` lines, with a histogram's three series."""
    names = set()
    for line in Metrics().render().splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"} if kind == "histogram" else {name}
    return names


_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless"}
_KEYWORDS |= {"offset", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression selects (strings, matchers, label lists and ranges removed)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    names = set()
    for m in re.finditer(r"(?<![\w.])([A-Za-z_:][\w:]*)\s*(\()?", e):
        word, call = m.group(1), m.group(2)
        if not call and word.lower() not in _KEYWORDS:
            names.add(word)
    return names


def test_metric_names_finds_selectors_and_only_them() -> None:
    expr = (
        'histogram_quantile(0.9, sum by (job, le) (rate(rackplan_cycle_duration_seconds_bucket{a="x{y}"}[5m])))'
        " > 60 and on (job, instance) rackplan_leader == 1 or vector(0) unless up offset 5m"
    )
    assert metric_names(expr) == {"rackplan_cycle_duration_seconds_bucket", "rackplan_leader", "up"}


def grafana_to_promql(expr: str) -> str:
    """A dashboard query as Prometheus sees it once Grafana substituted its variables."""
    return (
        expr.replace("$__rate_interval", "5m")
        .replace("$__interval", "1m")
        .replace("$cluster", ".*")
        .replace("$group", ".*")
        .replace("$job", "rackplan")
    )


def rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to dashes."""
    out = set()
    for line in markdown.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^\w\- ]", "", title).replace(" ", "-"))
    return out


# ---- Prometheus rules -----------------------------------------------------------------------------------


def test_rules_pass_promtool_check() -> None:
    result = promtool.run("check", "rules", RULES)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules())} rules found" in result.stdout


def test_rules_fire_after_their_hold_down_in_promtool_unit_tests() -> None:
    result = promtool.run("test", "rules", RULE_TESTS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_rule_has_hold_down_severity_runbook_and_known_metrics() -> None:
    runbook = anchors(RUNBOOK.read_text())
    exposed = exposed_names() | PROMETHEUS_SERIES
    names = [r["alert"] for r in rules()]
    assert len(names) == len(set(names)), "one rule per alert name"
    for r in rules():
        name = r["alert"]
        assert re.fullmatch(r"Rackplan[A-Z]\w+", name)
        assert re.fullmatch(r"[1-9]\d*[smh]", r["for"]), f"{name}: a hold-down"
        assert r["labels"]["severity"] in ("critical", "warning", "info"), name
        ann = r["annotations"]
        assert ann["summary"] and ann["description"], name
        path, _, anchor = ann["runbook_url"].partition("#")
        assert path == "docs/runbook.md" and anchor == name.lower(), name
        assert anchor in runbook, f"{name}: no section {anchor!r} in docs/runbook.md"
        assert metric_names(r["expr"]) <= exposed, f"{name}: {metric_names(r['expr']) - exposed}"
        assert metric_names(r["expr"]), name


def sections(markdown: str) -> dict[str, str]:
    """Anchor -> text under that heading (up to the next heading of any level)."""
    out: dict[str, str] = {}
    anchor = None
    for line in markdown.splitlines():
        if line.startswith("#"):
            (anchor,) = anchors(line)
            out[anchor] = ""
        elif anchor is not None:
            out[anchor] += line + "\n"
    return out


def test_runbook_has_a_section_for_every_alert_and_agent_alert() -> None:
    found = sections(RUNBOOK.read_text())
    wanted = {r["alert"].lower() for r in rules()} | AGENT_ALERT_ANCHORS
    assert wanted <= set(found), wanted - set(found)
    for anchor in wanted:  # each says what it means, how to check, what to do
        for part in ("**Means**", "**Check**", "**Do**"):
            assert part in found[anchor], f"{anchor}: no {part}"
    links = re.findall(r"\]\(#([\w-]+)\)", RUNBOOK.read_text())
    assert links and set(links) <= set(found), "links inside the runbook resolve"


# ---- Prometheus and Alertmanager configuration -----------------------------------------------------------


def test_prometheus_config_passes_promtool_and_scrapes_every_agent() -> None:
    result = promtool.run("check", "config", PROMETHEUS)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 1 rule files found" in result.stdout, "the rules are loaded"
    cfg = yaml.safe_load(PROMETHEUS.read_text())
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    agents = {
        f"{name}:{svc['environment']['RACKPLAN_HTTP__PORT']}"
        for name, svc in compose.items()
        if name.startswith("rackplan-agent")
    }
    (job,) = [j for j in cfg["scrape_configs"] if j["job_name"] == "rackplan"]
    assert {t for sc in job["static_configs"] for t in sc["targets"]} == agents
    (am,) = [t for a in cfg["alerting"]["alertmanagers"] for sc in a["static_configs"] for t in sc["targets"]]
    assert (
        am.split(":")[0] in compose
        and f"{am.split(':')[1]}:{am.split(':')[1]}" in compose["alertmanager"]["ports"]
    )


def test_alertmanager_config_passes_amtool() -> None:
    result = subprocess.run(
        [promtool.amtool(), "check-config", str(ALERTMANAGER)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stdout + result.stderr
    cfg = yaml.safe_load(ALERTMANAGER.read_text())
    routed = {r["matchers"][0] for r in cfg["route"]["routes"]}
    assert routed == {'severity="critical"', 'severity="info"'}, (
        "each severity has its route (warning: default)"
    )


# ---- Grafana --------------------------------------------------------------------------------------------

PANEL_TYPES = {"row", "stat", "timeseries", "table", "state-timeline", "heatmap", "gauge", "bargauge"}


def dashboard() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return doc


def test_dashboard_structure() -> None:
    d = dashboard()
    assert isinstance(d["uid"], str) and d["uid"] and d["title"]
    assert isinstance(d["schemaVersion"], int) and d["schemaVersion"] >= 36
    variables = {v["name"] for v in d["templating"]["list"]}
    ds_uid = "${DS_PROMETHEUS}"
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids)), "panel ids unique"
    cells: set[tuple[int, int]] = set()
    for p in d["panels"]:
        assert p["type"] in PANEL_TYPES, p["type"]
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not cells & mine, f"{p['title']} overlaps another panel"
        cells |= mine
        if p["type"] == "row":
            continue
        assert p["title"] and p["datasource"]["uid"] == ds_uid, p["title"]
        refs = [t["refId"] for t in p["targets"]]
        assert refs and len(refs) == len(set(refs)), p["title"]
        for t in p["targets"]:
            assert t["datasource"]["uid"] == ds_uid
            used = set(re.findall(r"\$(\w+)", t["expr"])) - {"__rate_interval", "__interval"}
            assert used <= variables, f"{p['title']}: undefined variables {used - variables}"
    provider = yaml.safe_load(DASHBOARD_PROVIDERS.read_text())["providers"][0]
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["grafana"]
    # container path -> host path of each of Grafana's volumes
    mounts = {v.split(":")[1]: (ROOT / v.split(":")[0]).resolve() for v in compose["volumes"]}
    assert mounts[provider["options"]["path"]] == DASHBOARD.parent
    assert mounts["/etc/grafana/provisioning"] == DATASOURCES.parent.parent


def test_dashboard_imports_into_any_grafana() -> None:
    """No datasource uid and no job of this compose file. Everything names ``${DS_PROMETHEUS}``: Grafana's
    importer replaces it with the datasource it asks for (``__inputs``); provisioned as a file, the
    datasource variable of that name resolves it (to the default datasource until another is picked).
    A ``job`` variable defaults to the rules' ``job="rackplan"``."""
    d = dashboard()
    text = DASHBOARD.read_text()
    compose_uid = yaml.safe_load(DATASOURCES.read_text())["datasources"][0]["uid"]
    assert f'"uid": "{compose_uid}"' not in text
    assert 'job=\\"rackplan\\"' not in text and 'job="rackplan"' not in json.dumps(d)
    variables = {v["name"]: v for v in d["templating"]["list"]}
    (ds_input,) = d["__inputs"]
    assert ds_input["type"] == "datasource" and ds_input["pluginId"] == "prometheus"
    ds = variables[ds_input["name"]]
    assert ds["type"] == "datasource" and ds["query"] == "prometheus" and "current" not in ds
    uses = "${" + ds_input["name"] + "}"
    job = variables["job"]
    assert job["current"]["value"] == "rackplan" and job["datasource"]["uid"] == uses
    for v in d["templating"]["list"]:
        if v["type"] == "query":
            assert v["datasource"]["uid"] == uses, v["name"]
    required = {r["id"] for r in d["__requires"] if r["type"] == "panel"}
    assert required == {p["type"] for p in d["panels"]} - {"row"}


def dashboard_check(path: Path) -> subprocess.CompletedProcess[str]:
    return go_tools.run("dashboard-check", path)


def test_dashboard_loads_in_grafanas_own_model() -> None:
    """grafana-foundation-sdk's strict loader (monitoring/grafana/check): every field known, typed, required."""
    result = dashboard_check(DASHBOARD)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == f"{DASHBOARD}: ok\n"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["panels"][1].update(datasourc={}), "unexpected field 'datasourc'"),
        (lambda d: d["panels"][1]["gridPos"].update(h="8"), "gridPos"),
        (lambda d: d["panels"][1]["options"].pop("reduceOptions"), "reduceOptions"),
        (lambda d: d.update(refresh=30), "refresh"),
    ],
)
def test_dashboard_check_refuses_what_grafanas_model_does_not_have(
    tmp_path: Path, change: Callable[[dict[str, Any]], object], message: str
) -> None:
    """The check above can fail: an unknown field, a wrong type, a missing required option."""
    d = dashboard()
    change(d)
    path = tmp_path / "changed.json"
    path.write_text(json.dumps(d))
    result = dashboard_check(path)
    assert result.returncode == 1 and message in result.stdout, result.stdout + result.stderr


def test_dashboard_queries_parse_and_select_only_exposed_metrics(tmp_path: Path) -> None:
    exprs = [grafana_to_promql(t["expr"]) for p in dashboard()["panels"] for t in p.get("targets", [])]
    exposed = exposed_names() | PROMETHEUS_SERIES
    for e in exprs:
        assert metric_names(e) and metric_names(e) <= exposed, f"{e}: {metric_names(e) - exposed}"
    # promtool parses each query (as a recording rule): Grafana's variables substituted
    doc = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [{"record": f"dashboard:q{i}", "expr": e} for i, e in enumerate(exprs)],
            }
        ]
    }
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump(doc))
    result = promtool.run("check", "rules", path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in result.stdout, "every query parsed"
    used = set().union(*(metric_names(e) for e in exprs))
    for shown in (
        "rackplan_cross_rack_partitions",
        "rackplan_assigned_partitions",
        "rackplan_plan_generation",
        "rackplan_cycle_duration_seconds_bucket",
        "rackplan_poll_duration_seconds_bucket",
        "rackplan_foreign_writers_total",
        "rackplan_alerts_firing",
        "ALERTS",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
    ):
        assert shown in used, f"the dashboard does not show {shown}"


def test_a_renamed_metric_fails_the_name_check() -> None:
    """The check above is real: the agent's exposition without a metric no longer satisfies a query on it."""
    assert "rackplan_plan_generation" in METRICS
    exposed = exposed_names() - {"rackplan_plan_generation"}
    exprs = [grafana_to_promql(t["expr"]) for p in dashboard()["panels"] for t in p.get("targets", [])]
    assert any(not metric_names(e) <= exposed | PROMETHEUS_SERIES for e in exprs)


# ---- compose ---------------------------------------------------------------------------------------------


def test_compose_runs_the_kit_wired_to_the_agents() -> None:
    from integration.kafka.compose import load_compose

    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    assert {"prometheus", "alertmanager", "grafana"} <= set(services)
    for name in ("prometheus", "alertmanager", "grafana"):
        for volume in services[name]["volumes"]:
            assert (ROOT / volume.split(":")[0]).exists(), f"{name}: {volume}"
    for name, svc in services.items():
        if name.startswith("rackplan-agent"):
            env = svc["environment"]
            assert env["RACKPLAN_WEBHOOK__URL"] == "http://alertmanager:9093/api/v2/alerts"
            assert env["RACKPLAN_CLUSTER_NAME"] == json.loads(env["RACKPLAN_WEBHOOK__LABELS"])["cluster"]
    assert len(load_compose().nodes) == 6, "the Kafka part still loads for the local launcher"


# ---- whose group series the dashboard shows ------------------------------------------------------------

#: partitions per member rack, by agent, in three clusters of one job: a leader (a) and its standby (b, with
#: series of an earlier term) in eu-1, an observer alone (o) in us-1, an observer (p) next to an acting agent
#: (c) in ap-1, two observers (q, r: the chart's two replicas in observe mode) in sa-1.  Each agent: (cluster,
#: rackplan_leader, rackplan_observe_only, local partitions).
AGENTS = {
    "a": ("eu-1", 1, 0, 10),
    "b": ("eu-1", 0, 0, 7),
    "o": ("us-1", 0, 1, 5),
    "c": ("ap-1", 1, 0, 3),
    "p": ("ap-1", 0, 1, 4),
    "q": ("sa-1", 0, 1, 6),
    "r": ("sa-1", 0, 1, 6),
}


def test_group_panels_show_the_leader_else_the_observer_never_the_standby(tmp_path: Path) -> None:
    """An observe-only trial shows its group panels, an observer pair's once; an HA pair shows its leader's
    alone (no double count); an observer next to an acting agent is not added to it.  promtool evaluates the dashboard's own query."""
    (expr,) = [
        t["expr"]
        for p in dashboard()["panels"]
        for t in p.get("targets", [])
        if t["expr"].startswith("sum by (rack, locality) (rackplan_assigned_partitions")
    ]
    series = []
    for name, (cluster, leader, observing, local) in AGENTS.items():
        labels = f'job="rackplan", instance="{name}:9464", cluster="{cluster}"'
        series += [
            {"series": f"rackplan_leader{{{labels}}}", "values": f"{leader}x5"},
            {"series": f"rackplan_observe_only{{{labels}}}", "values": f"{observing}x5"},
            {
                "series": f'rackplan_assigned_partitions{{{labels}, kind="consumer", group="g", rack="r1", '
                'locality="local"}',
                "values": f"{local}x5",
            },
        ]
    shown = {"eu-1": 10, "us-1": 5, "ap-1": 3, "sa-1": 6}  # an observer pair's groups once, not 12
    tests = [
        {
            "expr": grafana_to_promql(expr.replace("$cluster", cluster)),
            "eval_time": "4m",
            "exp_samples": [{"labels": '{locality="local", rack="r1"}', "value": value}],
        }
        for cluster, value in shown.items()
    ]
    path = tmp_path / "shown.test.yml"
    path.write_text(
        yaml.safe_dump({"tests": [{"interval": "1m", "input_series": series, "promql_expr_test": tests}]})
    )
    result = promtool.run("test", "rules", path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_group_query_selects_the_shown_agent_alike() -> None:
    """Every dashboard query and alerting rule that picks agents by ``rackplan_leader`` picks them as the
    query above does: the leader's series, an observer's where its job and cluster have no leader."""
    (expr,) = [
        t["expr"]
        for p in dashboard()["panels"]
        for t in p.get("targets", [])
        if t["expr"].startswith("sum by (rack, locality) (rackplan_assigned_partitions")
    ]
    selector = expr[expr.index("and on (job, instance) (") :].removesuffix(")")
    assert "rackplan_observe_only" in selector
    group_exprs = [t["expr"] for p in dashboard()["panels"] for t in p.get("targets", [])]
    # RackplanLocalityAlertStuck: the leader's alone (an observer's groups never take its unpublished plans)
    group_exprs += [
        r["expr"]
        for r in rules()
        if "$labels.group" in r["annotations"]["summary"] and r["alert"] != "RackplanLocalityAlertStuck"
    ]
    picking = [e for e in group_exprs if "and on (job, instance) rackplan_leader" in e or selector in e]
    assert len(picking) >= 14
    (stuck,) = [r["expr"] for r in rules() if r["alert"] == "RackplanLocalityAlertStuck"]
    assert stuck.endswith("and on (job, instance) rackplan_leader == 1"), stuck
    for e in picking:
        assert "and on (job, instance) rackplan_leader" not in e and selector in e, e
