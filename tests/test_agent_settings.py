"""Settings: YAML + environment (env wins, nested merge), registrations checked, secrets masked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agent.settings import Settings, is_secret_key, mask_config

YAML = """
kafka:
  bootstrap_servers: "broker-1:9092"
  config: {sasl.password: hunter2, sasl.mechanism: PLAIN, client.id: rackplan}
poll_interval_s: 5
consumer_groups:
  - {group_id: payments, assignor: rack-optimal,
     members: [{member_id: m-1, rack: az-a, topics: [orders]}]}
"""


@pytest.fixture
def settings_file(tmp_path: Path) -> Path:
    p = tmp_path / "rackplan.yaml"
    p.write_text(YAML, encoding="utf-8")
    return p


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for k in list(os.environ):
        if k.startswith("RACKPLAN_"):
            monkeypatch.delenv(k)


def test_defaults_match_the_contract() -> None:
    s = Settings.load()
    assert s.kafka.bootstrap_servers == "127.0.0.1:9092"
    assert s.poll_interval_s == 30
    assert (s.plan_topic, s.alerts_topic, s.registrations_topic) == (
        "_rackplan.plans",
        "_rackplan.alerts",
        "_rackplan.registrations",
    )
    assert (s.http.host, s.http.port) == ("127.0.0.1", 9464)
    assert s.consumer_groups == () and s.streams_apps == ()
    assert s.change_persist_polls == 2


def test_yaml_file_is_read(settings_file: Path) -> None:
    s = Settings.load(settings_file)
    assert s.kafka.bootstrap_servers == "broker-1:9092"
    assert s.poll_interval_s == 5
    assert s.consumer_groups[0]["group_id"] == "payments"
    assert s.kafka.client_config()["sasl.password"] == "hunter2"


def test_environment_wins_and_merges_nested_keys(
    settings_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RACKPLAN_KAFKA__BOOTSTRAP_SERVERS", "env-broker:9093")
    monkeypatch.setenv("RACKPLAN_POLL_INTERVAL_S", "7.5")
    monkeypatch.setenv("RACKPLAN_HTTP__PORT", "9999")
    monkeypatch.setenv("RACKPLAN_KAFKA__CONFIG__SECURITY_PROTOCOL", "SASL_SSL")
    s = Settings.load(settings_file)
    assert s.kafka.bootstrap_servers == "env-broker:9093"
    assert s.poll_interval_s == 7.5
    assert s.http.port == 9999
    # the file's passthrough config survives an environment override of a sibling key
    assert s.kafka.config["sasl.mechanism"] == "PLAIN"
    assert s.kafka.config["security.protocol"] == "SASL_SSL"


def test_registrations_from_environment_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "RACKPLAN_CONSUMER_GROUPS",
        '[{"group_id": "g", "members": [{"member_id": "m", "rack": null, "topics": ["t"]}]}]',
    )
    s = Settings.load()
    assert s.consumer_groups[0]["group_id"] == "g"


def test_secrets_never_in_repr_or_redacted(settings_file: Path) -> None:
    s = Settings.load(settings_file)
    assert "hunter2" not in repr(s)
    assert "hunter2" not in str(s.redacted())
    assert s.redacted()["kafka"]["config"]["sasl.password"] == "***"
    assert s.redacted()["kafka"]["config"]["client.id"] == "rackplan"


def test_secret_files(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("s3cret\n", encoding="utf-8")
    s = Settings.model_validate({"kafka": {"secret_files": {"sasl.password": str(secret)}}})
    assert s.kafka.client_config()["sasl.password"] == "s3cret"
    assert "s3cret" not in repr(s)


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("sasl.password", True),
        ("ssl.key.password", True),
        ("ssl.key.pem", True),
        ("sasl.oauthbearer.client.secret", True),
        ("sasl.jaas.config", True),
        ("ssl.keystore.password", True),
        ("ssl.key.location", False),
        ("client.id", False),
        ("sasl.mechanism", False),
    ],
)
def test_secret_keys(key: str, secret: bool) -> None:
    assert is_secret_key(key) is secret
    assert (mask_config({key: "v"})[key] == "***") is secret


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        (
            {"consumer_groups": [{"group_id": "g", "assignor": "nope", "members": []}]},
            "consumer_groups[0].assignor",
        ),
        ({"consumer_groups": [{"group_id": "g"}]}, "consumer_groups[0].members"),
        (
            {
                "consumer_groups": [
                    {"group_id": "g", "members": [{"member_id": "m", "topics": ["t"]}]},
                    {"group_id": "g", "members": []},
                ]
            },
            "consumer_groups[1].group_id",
        ),
        (
            {"consumer_groups": [{"group_id": "g", "members": [], "fetch_mode": "closest"}]},
            "consumer_groups[0].fetch_mode",
        ),
        ({"streams_apps": [{"application_id": "a", "clients": []}]}, "streams_apps[0].subtopologies"),
        ({"poll_interval_s": 0}, "poll_interval_s"),
        ({"change_persist_polls": 0}, "change_persist_polls"),
        ({"no_such_key": 1}, "no_such_key"),
    ],
)
def test_bad_settings_name_the_field(doc: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as e:
        Settings.model_validate(doc)
    assert field.split("[")[0] in str(e.value)
    if "[" in field:
        assert field in str(e.value)


def test_file_must_be_a_mapping(tmp_path: Path) -> None:
    p = tmp_path / "x.yaml"
    p.write_text("- 1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="mapping"):
        Settings.load(p)


def test_defaults_of_the_operations_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    s = Settings.load()
    assert s.webhook.url is None and s.webhook.max_attempts == 5 and s.webhook.timeout_s == 5
    assert s.registrations.ttl_s == 300 and s.rack_mapping == ()
    assert s.membership.describe_groups is True
    assert (s.alerts.cross_rack_threshold, s.alerts.worsen_delta) == (0.25, 0.10)
    monkeypatch.setenv("RACKPLAN_WEBHOOK__URL", "http://am:9093/api/v2/alerts")
    monkeypatch.setenv("RACKPLAN_ALERTS__WORSEN_DELTA", "0.2")
    monkeypatch.setenv("RACKPLAN_REGISTRATIONS__TTL_S", "0")
    s = Settings.load()
    assert s.webhook.url == "http://am:9093/api/v2/alerts" and s.alerts.worsen_delta == 0.2
    assert s.registrations.ttl_s == 0


def test_a_consumer_group_may_wait_for_its_members() -> None:
    s = Settings.model_validate({"consumer_groups": [{"group_id": "g", "members": [], "topics": ["orders"]}]})
    assert s.consumer_groups[0]["topics"] == ["orders"]
    with pytest.raises(ValidationError, match=r"consumer_groups\[0\].topics"):
        Settings.model_validate({"consumer_groups": [{"group_id": "g", "members": [], "topics": "orders"}]})


def test_every_key_is_documented() -> None:
    """docs/settings.md names every key (dotted), so a new setting cannot go undocumented."""
    from pydantic import BaseModel

    text = (Path(__file__).resolve().parent.parent / "docs" / "settings.md").read_text(encoding="utf-8")

    def keys(model: type[BaseModel], prefix: str = "") -> list[str]:
        out = []
        for name, f in model.model_fields.items():
            ann = f.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                out += keys(ann, f"{prefix}{name}.")
            else:
                out.append(f"{prefix}{name}")
        return out

    missing = [k for k in keys(Settings) if f"`{k}`" not in text]
    assert missing == []


@pytest.mark.parametrize(
    ("group", "where"),
    [
        (
            {"group_id": "g", "members": [{"member_id": "m", "rak": "az-b", "topics": ["t"]}]},
            "consumer_groups[0].members[0].rak",
        ),
        ({"group_id": "g", "asignor": "range", "members": []}, "consumer_groups[0].asignor"),
    ],
)
def test_a_typo_in_a_consumer_group_is_refused_naming_it(group: dict[str, Any], where: str) -> None:
    """A member-level ``rak: az-b`` used to make the member rack-less and its group look perfectly local."""
    with pytest.raises(ValidationError) as err:
        Settings.model_validate({"consumer_groups": [group]})
    assert f"{where}: unknown key" in str(err.value)
