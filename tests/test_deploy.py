"""deploy/: the Helm chart checked by ``helm lint`` and its renders by kubeconform, what the renders say, and the image.

kubeconform validates every render, strictly (a key the kind does not have is an error), against
the schemas of Kubernetes' own OpenAPI document (``K8S_VERSION`` in the Makefile) and of the
Prometheus Operator's CRDs (deploy/schemas, made by ``make crd-schemas``); without
``-ignore-missing-schemas``, so a kind without a schema fails too.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import go_tools, promtool

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "deploy" / "helm" / "rackplan"
MANIFESTS = ROOT / "deploy" / "kubernetes" / "rackplan.yaml"
RULES = ROOT / "monitoring" / "prometheus" / "rules" / "rackplan.yml"
DOCKERFILE = ROOT / "Dockerfile"

#: value sets rendered and validated: the defaults, the other readiness mode, every optional part
RENDERS: dict[str, tuple[str, ...]] = {
    "defaults": (),
    "alive": ("--set", "readiness=alive"),
    "everything": (
        "--set",
        "readiness=alive",
        "--set",
        "metrics.serviceMonitor.enabled=true",
        "--set-string",
        "credentials.kafka-password=s3cret",
        "--set",
        "extraArgs[0]=--no-such-flag-is-passed-through",
    ),
    "no-operator": (
        "--set",
        "metrics.podMonitor.enabled=false",
        "--set",
        "metrics.prometheusRule.enabled=false",
        "--set",
        "existingSecret=made-elsewhere",
    ),
}


#: as `make deploy-manifests` renders: the Kubernetes version of the schemas (the chart needs 1.27 or later)
TEMPLATE_ARGS = ("--namespace", "rackplan", "--kube-version", go_tools.k8s_version())


def helm_template(*args: str) -> str:
    result = go_tools.run("helm", "template", "rackplan", CHART, *TEMPLATE_ARGS, *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def render(*args: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(helm_template(*args)) if d]


def kind(docs: list[dict[str, Any]], k: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == k]


def one(docs: list[dict[str, Any]], k: str) -> dict[str, Any]:
    found = kind(docs, k)
    assert len(found) == 1, f"{len(found)} {k}"
    return found[0]


def kubeconform(manifests: str) -> tuple[int, str]:
    location = "{{ .Group }}/{{ .ResourceKind }}_{{ .ResourceAPIVersion }}.json"
    result = go_tools.run(
        "kubeconform",
        "-strict",
        "-summary",
        "-schema-location",
        f"{go_tools.core_schemas()}/{location}",
        "-schema-location",
        f"{go_tools.CRD_SCHEMAS}/{location}",
        "-",
        stdin=manifests,
    )
    return result.returncode, result.stdout + result.stderr


# ---- the real tools ---------------------------------------------------------------------------------


@pytest.mark.parametrize("values", ["defaults", "alive"])
def test_helm_lint_is_clean(values: str) -> None:
    result = go_tools.run("helm", "lint", "--strict", CHART, *RENDERS[values])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 chart(s) linted, 0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("values", sorted(RENDERS))
def test_every_render_passes_kubeconform_strictly(values: str) -> None:
    manifests = helm_template(*RENDERS[values])
    code, out = kubeconform(manifests)
    assert code == 0, out
    kinds = len([d for d in yaml.safe_load_all(manifests) if d])
    assert f"{kinds} resources found" in out and "Invalid: 0, Errors: 0, Skipped: 0" in out, out


@pytest.mark.parametrize(
    ("path", "key"),
    [
        (("spec", "template", "spec", "containers", 0), "readinesProbe"),  # a misspelt field
        (("spec",), "replica"),
    ],
)
def test_kubeconform_refuses_a_misspelt_field(path: tuple[str | int, ...], key: str) -> None:
    """The validation above can fail: the schemas are strict, so a field Kubernetes would drop is an error."""
    docs = render()
    deployment: Any = one(docs, "Deployment")
    node = deployment
    for step in path:
        node = node[step]
    node[key] = 1
    code, out = kubeconform(yaml.safe_dump_all(docs))
    assert code == 1 and f"additional properties '{key}' not allowed" in out, out


def test_kubeconform_refuses_a_wrong_type_in_an_operator_kind() -> None:
    docs = render()
    one(docs, "PodMonitor")["spec"]["podMetricsEndpoints"][0]["port"] = ["http"]
    code, out = kubeconform(yaml.safe_dump_all(docs))
    assert code == 1 and "PodMonitor" in out, out


def test_the_plain_manifests_are_the_chart_rendered() -> None:
    """deploy/kubernetes/rackplan.yaml is `make deploy-manifests`: regenerate it when the chart changes."""
    assert MANIFESTS.read_text() == helm_template(), "run `make deploy-manifests`"


def test_an_unknown_readiness_mode_is_refused_by_name() -> None:
    result = go_tools.run("helm", "template", "rackplan", CHART, *TEMPLATE_ARGS, "--set", "readiness=ready")
    assert result.returncode != 0
    assert 'readiness: "ready" is neither "leader" nor "alive"' in result.stderr


# ---- what the renders say ----------------------------------------------------------------------------


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (c,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert isinstance(c, dict)
    return c


def test_two_agents_without_the_supervisor_probed_on_the_agents_endpoints() -> None:
    docs = render()
    deployment = one(docs, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    c = container(docs)
    assert c["args"][:4] == ["rackplan", "agent", "run", "--no-supervisor"], "the kubelet restarts, visibly"
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    env = {e["name"]: e for e in c["env"]}
    assert env["RACKPLAN_HA__AGENT_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["RACKPLAN_HTTP__HOST"]["value"] == "0.0.0.0"
    # leader readiness: only the leader is ever ready, so no rolling update and no disruption budget
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert kind(docs, "PodDisruptionBudget") == []
    service = one(docs, "Service")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]


def test_alive_readiness_rolls_one_pod_at_a_time_under_a_disruption_budget() -> None:
    docs = render(*RENDERS["alive"])
    deployment = one(docs, "Deployment")
    assert container(docs)["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert deployment["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}
    pdb = one(docs, "PodDisruptionBudget")["spec"]
    assert pdb["maxUnavailable"] == 1 and pdb["unhealthyPodEvictionPolicy"] == "AlwaysAllow"
    assert pdb["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]


def test_the_probed_paths_answer_as_the_chart_expects_from_a_leader_and_a_standby() -> None:
    """/healthz is 200 on either agent (liveness never kills a standby); /readyz is 503 until ready."""
    from rackplan.agent.cycle.status import StatusView
    from rackplan.agent.runtime.http import route

    class NoMetrics:
        def render(self) -> str:
            return ""

    c = container(render())
    live, ready = c["livenessProbe"]["httpGet"]["path"], c["readinessProbe"]["httpGet"]["path"]
    standby, leader = StatusView(ready=False), StatusView(ready=True)
    assert route(standby, NoMetrics(), live)[0] == 200
    assert route(standby, NoMetrics(), ready)[0] == 503
    assert route(leader, NoMetrics(), ready)[0] == 200


def test_the_settings_file_is_one_the_agent_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ConfigMap's file with the chart's environment, through the agent's own settings loader."""
    import os

    from rackplan.agent.settings.sections import Settings

    docs = render("--set-string", "credentials.kafka-password=s3cret")
    config = one(docs, "ConfigMap")["data"]["rackplan.yaml"]
    path = tmp_path / "rackplan.yaml"
    path.write_text(config)
    for k in list(os.environ):
        if k.startswith("RACKPLAN_"):
            monkeypatch.delenv(k)
    c = container(docs)
    for e in c["env"]:
        monkeypatch.setenv(e["name"], e.get("value", "rackplan-7d9c-x2"))
    assert c["args"][-2:] == ["--config", "/etc/rackplan/rackplan.yaml"]
    settings = Settings.load(str(path))
    assert settings.http.host == "0.0.0.0" and settings.http.port == 9464
    assert settings.ha.enabled and settings.ha.agent_id == "rackplan-7d9c-x2"
    assert settings.kafka.bootstrap_servers == "kafka:9092"
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    assert mounts["settings"] == "/etc/rackplan" and mounts["credentials"] == "/run/secrets/rackplan"
    secret = one(docs, "Secret")
    assert secret["stringData"] == {"kafka-password": "s3cret"}
    volumes = {v["name"]: v for v in one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert volumes["credentials"]["secret"]["secretName"] == secret["metadata"]["name"]


def test_the_documented_install_sets_what_it_says() -> None:
    """docs/deploy.md's ``helm install`` line, split as a shell splits it, rendered with ``helm template``: its
    ``--set`` values reach the settings file and the Secret (a bare comma in a value is helm's separator)."""
    import shlex

    text = (ROOT / "docs" / "deploy.md").read_text(encoding="utf-8").replace("\\\n", " ")
    words = shlex.split(next(line for line in text.splitlines() if line.startswith("helm install ")))
    assert words[:4] == ["helm", "install", "rackplan", "deploy/helm/rackplan"], words
    args, rest = [], iter(words[4:])
    for word in rest:
        value = next(rest)
        if word not in (
            "-f",
            "--namespace",
        ):  # the reader's own values file; TEMPLATE_ARGS name the namespace
            args += [word, value]
    docs = render(*args)
    settings = yaml.safe_load(one(docs, "ConfigMap")["data"]["rackplan.yaml"])
    assert settings["kafka"]["bootstrap_servers"] == "b1:9092,b2:9092", settings["kafka"]
    assert one(docs, "Secret")["stringData"] == {"kafka-password": "$KAFKA_PASSWORD"}
    assert container(docs)["image"].startswith("registry.example/rackplan:")


def test_an_existing_secret_is_mounted_and_none_is_made() -> None:
    docs = render("--set", "existingSecret=made-elsewhere", "--set-string", "credentials.x=ignored")
    assert kind(docs, "Secret") == []
    volumes = {v["name"]: v for v in one(docs, "Deployment")["spec"]["template"]["spec"]["volumes"]}
    assert volumes["credentials"]["secret"]["secretName"] == "made-elsewhere"


def test_the_pods_run_as_the_images_non_root_user_read_only() -> None:
    spec = one(render(), "Deployment")["spec"]["template"]["spec"]
    user = re.search(r"^USER (\d+):(\d+)$", DOCKERFILE.read_text(), re.M)
    assert user, "the image runs as a numeric user"
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] == int(user.group(1)) != 0
    assert spec["automountServiceAccountToken"] is False
    sc = spec["containers"][0]["securityContext"]
    assert (
        sc["readOnlyRootFilesystem"]
        and not sc["allowPrivilegeEscalation"]
        and sc["capabilities"]["drop"] == ["ALL"]
    )


# ---- monitoring ------------------------------------------------------------------------------------------


def test_the_prometheus_rule_is_the_monitoring_rules_file() -> None:
    """One source: the PrometheusRule's groups are monitoring/prometheus/rules/rackplan.yml's, whatever it says."""
    rule = one(render(), "PrometheusRule")
    assert rule["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]
    assert (CHART / "files" / "rackplan-rules.yml").resolve() == RULES.resolve(), "a link, not a copy"


def test_a_changed_rules_file_changes_the_prometheus_rule(tmp_path: Path) -> None:
    """The agreement above is not a coincidence of two copies: the chart reads the file when it renders."""
    import shutil

    chart = tmp_path / "rackplan"
    shutil.copytree(CHART, chart, symlinks=False)
    changed = yaml.safe_load(RULES.read_text())
    changed["groups"][0]["rules"][0]["for"] = "7m"
    (chart / "files" / "rackplan-rules.yml").write_text(yaml.safe_dump(changed))
    result = go_tools.run("helm", "template", "rackplan", chart, *TEMPLATE_ARGS)
    assert result.returncode == 0, result.stderr
    rule = one([d for d in yaml.safe_load_all(result.stdout) if d], "PrometheusRule")
    assert rule["spec"]["groups"][0]["rules"][0]["for"] == "7m"


def test_the_rendered_rules_pass_promtool(tmp_path: Path) -> None:
    path = tmp_path / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": one(render(), "PrometheusRule")["spec"]["groups"]}))
    result = promtool.run("check", "rules", path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("monitor", ["PodMonitor", "ServiceMonitor"])
def test_the_monitors_give_the_job_label_the_rules_select(monitor: str) -> None:
    docs = render("--set", "metrics.serviceMonitor.enabled=true")
    spec = one(docs, monitor)["spec"]
    if monitor == "PodMonitor":
        labels = one(docs, "Deployment")["spec"]["template"]["metadata"]["labels"]
    else:
        (metrics,) = [s for s in kind(docs, "Service") if s["spec"].get("clusterIP") == "None"]
        assert metrics["spec"]["publishNotReadyAddresses"] is True, "the standby is scraped too"
        labels = metrics["metadata"]["labels"]
        assert spec["selector"]["matchLabels"].items() <= labels.items()
    assert labels[spec["jobLabel"]] == "rackplan"
    assert 'job="rackplan"' in RULES.read_text()


# ---- the image ---------------------------------------------------------------------------------------------


def dockerfile() -> dict[str, list[str]]:
    """Dockerfile instruction -> its arguments (continuation lines joined)."""
    out: dict[str, list[str]] = {}
    for line in DOCKERFILE.read_text().replace("\\\n", " ").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            out.setdefault(word.upper(), []).append(rest.strip())
    return out


def test_the_image_checks_health_runs_as_non_root_and_is_labelled() -> None:
    d = dockerfile()
    (check,) = d["HEALTHCHECK"]
    assert "/healthz" in check and "/readyz" not in check, "a standby is healthy"
    (user,) = d["USER"]
    assert re.fullmatch(r"[1-9]\d*:[1-9]\d*", user), "numeric and not root"
    labels = " ".join(d["LABEL"])
    for key in ("title", "description", "version", "revision", "licenses"):
        assert f"org.opencontainers.image.{key}=" in labels, key
    assert json.loads(d["CMD"][0]) == ["rackplan", "agent", "run"], "the supervisor outside Kubernetes"
