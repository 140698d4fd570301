"""Settings errors (issue 28): every problem of a file at once, one line each, in the docs' words."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from rackplan.agent.settings.contract_checks import CLIENT_KEYS
from rackplan.agent.settings.errors import SettingsError, describe_error, describe_errors
from rackplan.agent.settings.sections import Settings
from rackplan.agent.settings.wording import allowed_keys, did_you_mean, env_variable, reword

ROOT = Path(__file__).resolve().parents[3]

#: three mistakes in three places: a value that is no number, a nested typo, a typo inside a registration
THREE_MISTAKES = """\
poll_interval_s: soon
http:
  portt: 8080
consumer_groups:
  - group_id: g
    members:
      - member_id: m1
        rak: az-a
        topics: [t]
"""

THREE_LINES = [
    "poll_interval_s: expected a number, got 'soon'",
    "http.portt: unknown key; did you mean port?",
    "consumer_groups[0].members[0].rak: unknown key; did you mean rack?",
]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in list(os.environ):
        if k.startswith("RACKPLAN_"):
            monkeypatch.delenv(k)


def _lines(path: Path) -> list[str]:
    with pytest.raises(ValueError) as e:
        Settings.load(path)
    return describe_errors(e.value, Settings)


def test_a_file_with_three_mistakes_gives_three_lines_naming_each_key(tmp_path: Path) -> None:
    # Before: the registration check was a model check, skipped while any other key was bad, so one
    # run named two of the three; pydantic's own words ("Extra inputs are not permitted") were printed.
    p = tmp_path / "rackplan.yaml"
    p.write_text(THREE_MISTAKES, encoding="utf-8")
    assert _lines(p) == THREE_LINES


def test_every_registration_problem_is_named_not_only_the_first(tmp_path: Path) -> None:
    p = tmp_path / "rackplan.yaml"
    p.write_text(
        "consumer_groups:\n"
        "  - {group_id: a, fetch_mod: leader, members: [{member_id: m, rak: x, topics: [t]}]}\n"
        "  - {group_id: b, members: [], fetch_mode: nearest}\n"
        "streams_apps:\n"
        "  - {application_id: s, subtopologies: [], clients: [{process_id: p, rack: a, tpyo: 1}]}\n",
        encoding="utf-8",
    )
    assert _lines(p) == [
        "consumer_groups[0].fetch_mod: unknown key; did you mean fetch_mode?",
        "consumer_groups[0].members[0].rak: unknown key; did you mean rack?",
        "consumer_groups[1].fetch_mode: expected nearest-replica or leader, got 'nearest'",
        "streams_apps[0].clients[0].tpyo: unknown key; expected one of " + ", ".join(sorted(CLIENT_KEYS)),
    ]


def test_a_yaml_boolean_is_no_number(tmp_path: Path) -> None:
    """YAML reads ``yes`` and ``on`` as booleans, and pydantic took them for 1 (``http.port: yes`` was
    port 1, found by an adversarial hunt); a boolean setting still takes them."""
    p = tmp_path / "rackplan.yaml"
    p.write_text(
        "http:\n  port: yes\npoll_interval_s: true\nmetadata:\n  request_timeout_s: on\n",
        encoding="utf-8",
    )
    said = "expected a number, got a boolean (YAML reads yes/no, on/off, true/false as one)"
    assert sorted(_lines(p)) == sorted(
        [f"poll_interval_s: {said}", f"http.port: {said}", f"metadata.request_timeout_s: {said}"]
    )
    p.write_text("ha:\n  enabled: no\n", encoding="utf-8")
    assert Settings.load(p).ha.enabled is False


def test_every_duplicate_key_of_the_yaml_is_named(tmp_path: Path) -> None:
    p = tmp_path / "rackplan.yaml"
    p.write_text("http:\n  port: 1\n  port: 2\nlog:\n  level: info\n  level: debug\n", encoding="utf-8")
    assert _lines(p) == [
        f"{p}, line 3, column 3: invalid YAML: while constructing a mapping duplicate key 'port'",
        f"{p}, line 6, column 3: invalid YAML: while constructing a mapping duplicate key 'level'",
    ]


def test_an_unknown_variable_and_a_bad_value_are_named_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = tmp_path / "rackplan.yaml"
    p.write_text("poll_interval_s: soon\n", encoding="utf-8")
    monkeypatch.setenv("RACKPLAN_POLL_INTERVALL_S", "5")
    with pytest.raises(SettingsError) as e:
        Settings.load(p)
    lines = describe_errors(e.value, Settings)
    assert [line.split(":")[0] for line in lines] == ["RACKPLAN_POLL_INTERVALL_S", "poll_interval_s"]


@pytest.mark.parametrize(
    ("doc", "line"),
    [
        ({"poll_intervall_s": 5}, "poll_intervall_s: unknown key; did you mean poll_interval_s?"),
        ({"rack_mapping": [{"rack": "a", "clint_id": "x"}]}, "rack_mapping[0].clint_id: unknown key; did you mean client_id?"),
        ({"webhook": {"tls": {"cafile": "x"}}}, "webhook.tls.cafile: unknown key; did you mean ca_file?"),
        ({"zzz": 1}, "zzz: unknown key"),
        ({"http": {"port": "eighty"}}, "http.port: expected a whole number, got 'eighty'"),
        ({"ha": {"enabled": "maybe"}}, "ha.enabled: expected true or false, got 'maybe'"),
        ({"cluster_name": ""}, "cluster_name: empty: leave cluster_name out for no cluster label"),
        ({"cluster_name": " \t"}, "cluster_name: empty: leave cluster_name out for no cluster label"),
        ({"cluster_name": "eu-1 "}, "cluster_name: leading or trailing whitespace: another agent's 'eu-1' would be another cluster"),
    ],
)  # fmt: skip
def test_a_mistake_is_said_in_the_docs_words(doc: dict[str, object], line: str) -> None:
    with pytest.raises(ValidationError) as e:
        Settings.model_validate(doc)
    assert describe_errors(e.value, Settings) == [line]


def test_a_variable_that_set_a_bad_value_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RACKPLAN_HTTP__PORT", "eighty")
    monkeypatch.setenv("RACKPLAN_HA", '{"enabled": "maybe"}')
    with pytest.raises(ValidationError) as e:
        Settings.load()
    assert describe_errors(e.value, Settings) == [
        "http.port: expected a whole number, got 'eighty' (environment variable RACKPLAN_HTTP__PORT)",
        "ha.enabled: expected true or false, got 'maybe' (environment variable RACKPLAN_HA)",
    ]


@pytest.mark.parametrize(
    ("variables", "lines"),
    [
        (
            {"RACKPLAN_ALERTS__ALLOW": "payments", "RACKPLAN_ALERTS__SEVERITY": "critical"},
            [
                "alerts.allow: RACKPLAN_ALERTS__ALLOW is not valid JSON (a list or a mapping is JSON in the environment)"
            ],
        ),
        (
            {"RACKPLAN_METADATA__EXCLUDE_PREFIXES": "__", "RACKPLAN_WEBHOOK__LABELS": "cluster=prod"},
            [  # every one at once, though pydantic-settings stops at the first
                "metadata.exclude_prefixes: RACKPLAN_METADATA__EXCLUDE_PREFIXES is not valid JSON"
                " (a list or a mapping is JSON in the environment)",
                "webhook.labels: RACKPLAN_WEBHOOK__LABELS is not valid JSON (a list or a mapping is JSON in the environment)",
            ],
        ),
        (
            {"rackplan_kafka": "{bad"},
            ["kafka: rackplan_kafka is not valid JSON (a list or a mapping is JSON in the environment)"],
        ),
    ],
)
def test_a_variable_that_is_no_json_is_named_with_its_key(
    variables: dict[str, str], lines: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``RACKPLAN_ALERTS__ALLOW=payments`` (a list wants JSON) was refused as ``alerts: RACKPLAN_ALERTS (or one
    of its __ keys) is not valid JSON``: neither the key nor the variable, which was not even set, named.
    Found by a hunt."""
    from pydantic_settings import SettingsError as SourceError

    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises((SourceError, ValidationError)) as e:
        Settings.load()
    assert describe_errors(e.value, Settings) == lines


def test_each_problem_of_a_list_from_a_variable_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    groups = [
        {"group_id": "a", "members": [{"member_id": "m", "rak": "x", "topics": ["t"]}]},
        {"group_id": "b", "members": [], "fetch_mode": "nearest"},
    ]
    monkeypatch.setenv("RACKPLAN_CONSUMER_GROUPS", json.dumps(groups))
    with pytest.raises(ValidationError) as e:
        Settings.load()
    assert describe_errors(e.value, Settings) == [
        "consumer_groups[0].members[0].rak: unknown key; did you mean rack?"
        " (environment variable RACKPLAN_CONSUMER_GROUPS)",
        "consumer_groups[1].fetch_mode: expected nearest-replica or leader, got 'nearest'"
        " (environment variable RACKPLAN_CONSUMER_GROUPS)",
    ]


def test_describe_error_is_the_lines_on_one_line(tmp_path: Path) -> None:
    p = tmp_path / "rackplan.yaml"
    p.write_text(THREE_MISTAKES, encoding="utf-8")
    with pytest.raises(ValueError) as e:
        Settings.load(p)
    assert describe_error(e.value, Settings) == "; ".join(THREE_LINES)


class _Secretive(BaseModel):
    model_config = ConfigDict(extra="forbid")
    api_token_ttl: int = 0
    retries: int = 0


def test_a_value_is_echoed_only_when_short_and_not_secret() -> None:
    with pytest.raises(ValidationError) as e:
        _Secretive.model_validate({"api_token_ttl": "tok-s3cr3t", "retries": "x" * 40})
    assert describe_errors(e.value, _Secretive, environ={}) == [
        "api_token_ttl: expected a whole number",
        "retries: expected a whole number",
    ]


def test_did_you_mean_picks_the_closest_key_or_nothing() -> None:
    assert did_you_mean("portt", ["host", "port"]) == "; did you mean port?"
    assert did_you_mean("zzz", ["host", "port"]) == ""


def test_allowed_keys_walk_models_lists_and_optionals() -> None:
    assert allowed_keys(Settings, ["http"]) == sorted(Settings.model_fields["http"].annotation.model_fields)  # type: ignore[union-attr]
    assert "client_id" in (allowed_keys(Settings, ["rack_mapping", 0]) or [])
    assert "ca_file" in (allowed_keys(Settings, ["webhook", "tls"]) or [])
    assert allowed_keys(Settings, ["consumer_groups", 0]) is None  # a plain dict: checked elsewhere
    assert allowed_keys(Settings, ["no_such"]) is None


def test_env_variable_names_only_the_variable_that_holds_the_key() -> None:
    env = {"RACKPLAN_HA": '{"enabled": 1}', "rackplan_http__port": "1"}
    assert env_variable(["http", "port"], env) == "RACKPLAN_HTTP__PORT"
    assert env_variable(["ha", "enabled"], env) == "RACKPLAN_HA"
    assert env_variable(["ha", "group_id"], env) is None  # from the file
    assert env_variable(["poll_interval_s"], env) is None


def test_a_variable_below_the_key_is_named_when_none_holds_it_whole() -> None:
    """``RACKPLAN_CONSUMER_GROUPS__0__GROUP_ID`` makes ``consumer_groups`` a mapping, refused as no list:
    the message named no variable (found by an adversarial hunt)."""
    env = {"RACKPLAN_CONSUMER_GROUPS__1__X": "y", "RACKPLAN_CONSUMER_GROUPS__0__GROUP_ID": "g"}
    assert env_variable(["consumer_groups"], env) == "RACKPLAN_CONSUMER_GROUPS__0__GROUP_ID"
    assert env_variable(["consumer_group"], env) is None


def test_reword_leaves_other_messages_alone() -> None:
    err = {"type": "greater_than_equal", "msg": "Input should be greater than or equal to 0.1"}
    assert reword(err, ["poll_interval_s"], Settings, {}) == "Input should be greater than or equal to 0.1"


def test_the_cli_prints_every_line_and_exits_2_without_a_traceback(tmp_path: Path) -> None:
    p = tmp_path / "rackplan.yaml"
    p.write_text(THREE_MISTAKES, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RACKPLAN_")}
    done = subprocess.run(
        [sys.executable, "-m", "rackplan", "agent", "run", "--config", str(p)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines() == [f"rackplan: error: settings: {line}" for line in THREE_LINES]


@pytest.mark.parametrize("name", ["", "  "])
def test_an_empty_cluster_name_stops_the_agent_naming_the_key(tmp_path: Path, name: str) -> None:
    # A blank name labelled every metric sample, snapshot and alert with nothing to tell the cluster by.
    from tests.agent.runtime.test_startup import refused, run

    config = tmp_path / "rackplan.yaml"
    config.write_text(f'cluster_name: "{name}"\n', encoding="utf-8")
    line = refused(run("agent", "run", "--no-supervisor", config=str(config)))
    assert (
        line == "rackplan: error: settings: cluster_name: empty: leave cluster_name out for no cluster label"
    )
    from_env = run("agent", "run", "--no-supervisor", env={"RACKPLAN_CLUSTER_NAME": name})
    assert refused(from_env) == f"{line} (environment variable RACKPLAN_CLUSTER_NAME)"
