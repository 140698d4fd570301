"""Settings: YAML + environment (env wins, nested merge), registrations checked, secrets masked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from rackplan.agent.core.redact import is_secret_key, mask_config
from rackplan.agent.settings.errors import SettingsError, describe_error, describe_errors
from rackplan.agent.settings.sections import Settings
from rackplan.agent.settings.yaml_file import MAX_SETTINGS_BYTES, MAX_YAML_NODES

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


def test_a_secret_file_from_the_environment_names_its_property_with_dots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = tmp_path / "password"
    secret.write_text("s3cr3t\n")
    monkeypatch.setenv("RACKPLAN_KAFKA__SECRET_FILES__SASL_PASSWORD", str(secret))
    s = Settings.load()
    assert s.kafka.secret_files == {"sasl.password": secret}
    assert s.kafka.client_config()["sasl.password"] == "s3cr3t"
    assert "sasl_password" not in s.kafka.client_config()


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

    text = (Path(__file__).resolve().parents[3] / "docs" / "settings.md").read_text(encoding="utf-8")

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


# ---- strictness (issue 12): unknown variables, nonsense values, the file itself -------------------------


def _error(doc: dict[str, Any] | None = None, path: Path | None = None) -> str:
    """The one line ``rackplan agent run`` prints for these settings."""
    try:
        if path is not None:
            Settings.load(path)
        else:
            Settings.model_validate(doc or {})
    except (ValueError, ValidationError) as e:
        line = describe_error(e)
        assert "\n" not in line
        return line
    raise AssertionError(f"accepted: {doc or path}")


@pytest.mark.parametrize(
    "name",
    ["RACKPLAN_POLL_INTERVALL_S", "RACKPLAN_HTTP_PORT", "RACKPLAN_KAFAK__BOOTSTRAP_SERVERS", "RACKPLAN_"],
)
def test_an_unknown_rackplan_variable_is_refused_naming_it(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(name, "5")
    with pytest.raises(SettingsError) as e:
        Settings.load()
    assert str(e.value).startswith(f"{name}: unknown environment variable")


def test_variables_that_are_not_agent_settings_are_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "RACKPLAN_CONFIG",
        "RACKPLAN_DEBUG",
        "RACKPLAN_SPARK__MASTER",
        "RACKPLAN_FLEET__PRICE_PER_GB",
    ):
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("rackplan_poll_interval_s", "5")  # names are case-insensitive
    assert Settings.load().poll_interval_s == 5


@pytest.mark.parametrize(
    ("variable", "where", "meant"),
    [
        ("RACKPLAN_HTTP__PORTT", "http.portt", "port"),
        ("RACKPLAN_WEBHOOK__URLL", "webhook.urll", "url"),
        ("RACKPLAN_HA__ENABLD", "ha.enabld", "enabled"),
    ],
)
def test_a_nested_variable_typo_is_refused_naming_the_key_and_the_variable(
    variable: str, where: str, meant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, "1")
    with pytest.raises(ValidationError) as e:
        Settings.load()
    assert describe_errors(e.value, Settings) == [
        f"{where}: unknown key; did you mean {meant}? (environment variable {variable})"
    ]


@pytest.mark.parametrize(
    ("doc", "where"),
    [
        ({"poll_interval_s": float("inf")}, "poll_interval_s: Input should be a finite number"),
        ({"poll_interval_s": float("nan")}, "poll_interval_s: Input should be a finite number"),
        ({"poll_interval_s": "-inf"}, "poll_interval_s: Input should be a finite number"),
        ({"poll_interval_s": 1e-9}, "poll_interval_s: Input should be greater than or equal to 0.1"),
        ({"poll_interval_s": 1e12}, "poll_interval_s: at most 604800 seconds"),
        ({"plan_max_message_bytes": 2**40}, "plan_max_message_bytes: Input should be less than or equal to"),
        (
            {"alerts": {"cross_rack_threshold": float("nan")}},
            "alerts.cross_rack_threshold: Input should be a",
        ),
        ({"webhook": {"timeout_s": 1e-9}}, "webhook.timeout_s: 0 or at least 0.01 seconds"),
        ({"followers": {"check_interval_s": 1e-6}}, "followers.check_interval_s: 0 or at least 0.01"),
        ({"metadata": {"backoff_max_s": float("inf")}}, "metadata.backoff_max_s: Input should be a finite"),
        ({"registrations": {"ttl_s": 1e300}}, "registrations.ttl_s: at most 604800 seconds"),
        ({"webhook": {"max_attempts": 10**12}}, "webhook.max_attempts: Input should be less than or equal"),
        ({"webhook": {"queue_size": 10**12}}, "webhook.queue_size: Input should be less than or equal"),
        ({"kafka": {"config": {"linger.ms": float("nan")}}}, "kafka.config.linger.ms: "),
        ({"kafka": {"startup_timeout_s": 0.5}}, "kafka.startup_timeout_s: Input should be greater than or"),
        ({"http": {"host": "not a host!"}}, "http.host: 'not a host!' is neither an IP address nor a host"),
        ({"http": {"host": ""}}, "http.host: "),
        ({"http": {"port": 70000}}, "http.port: Input should be less than or equal to 65535"),
        ({"kafka": {"bootstrap_servers": "b1:9092,b 2:9092"}}, "kafka.bootstrap_servers: 'b 2:9092': not a"),
        (
            {"kafka": {"bootstrap_servers": "b1:0"}},
            "kafka.bootstrap_servers: 'b1:0': port '0' is not 1-65535",
        ),
        ({"kafka": {"bootstrap_servers": "b1:http"}}, "kafka.bootstrap_servers: 'b1:http': port 'http'"),
        ({"kafka": {"bootstrap_servers": ""}}, "kafka.bootstrap_servers: '': not a host name or address"),
    ],
)
def test_nonsense_values_are_refused_naming_the_setting(doc: dict[str, Any], where: str) -> None:
    assert _error(doc).startswith(where)


@pytest.mark.parametrize(
    ("value", "key", "ok"),
    [
        ("b1:9092,b2:9092", "kafka.bootstrap_servers", True),
        ("SASL_SSL://b1.example.com:9093", "kafka.bootstrap_servers", True),
        ("[::1]:9092,10.0.0.1", "kafka.bootstrap_servers", True),
        ("0.0.0.0", "http.host", True),
        ("::", "http.host", True),
        ("agent-0.rackplan.svc.cluster.local", "http.host", True),
        ("-bad.example", "http.host", False),
    ],
)
def test_addresses_that_are_fine(value: str, key: str, ok: bool) -> None:
    section, name = key.split(".")
    doc = {section: {name: value}}
    if ok:
        assert Settings.model_validate(doc) is not None
    else:
        assert _error(doc).startswith(key)


def test_zero_still_means_never_where_it_did() -> None:
    s = Settings.model_validate({"registrations": {"ttl_s": 0}, "alerts": {"cooldown_s": 0}})
    assert s.registrations.ttl_s == 0 and s.alerts.cooldown_s == 0


def _secret_cases(tmp_path: Path) -> list[tuple[dict[str, str], str]]:
    """(environment, secret) pairs whose settings are invalid *because of* the secret-bearing value."""
    return [
        ({"RACKPLAN_WEBHOOK__URL": "ftp://u:pw-s3cr3t@h/x"}, "pw-s3cr3t"),
        ({"RACKPLAN_WEBHOOK__URL": "gopher://h/x?token=tok-s3cr3t"}, "tok-s3cr3t"),
        ({"RACKPLAN_WEBHOOK__HEADERS": '{"Authorization": ["Bearer hdr-s3cr3t"]}'}, "hdr-s3cr3t"),
        ({"RACKPLAN_KAFKA__CONFIG": '{"sasl.password": {"x": "kc-s3cr3t"}}'}, "kc-s3cr3t"),
        ({"RACKPLAN_KAFKA": '{"config": {"sasl.jaas.config": ["jaas-s3cr3t"]}}'}, "jaas-s3cr3t"),
        ({"RACKPLAN_WEBHOOK": '{"url": "ftp://a:wh-s3cr3t@h", "surprise": "sur-s3cr3t"}'}, "s3cr3t"),
        ({"RACKPLAN_KAFKA__SECRET_FILES": '{"sasl.password": ["sf-s3cr3t"]}'}, "sf-s3cr3t"),
    ]


def test_settings_errors_never_echo_a_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pydantic prints ``input_value=...``; issue 11 E: ``ftp://u:pw@h/x`` printed ``pw``."""
    for env, secret in _secret_cases(tmp_path):
        with monkeypatch.context() as m:
            for k, v in env.items():
                m.setenv(k, v)
            with pytest.raises(ValidationError) as e:
                Settings.load()
            assert secret in str(e.value) or secret in repr(e.value.errors()), (
                env
            )  # pydantic's own text leaks
            line = describe_error(e.value)
            assert secret not in line, (env, line)
            assert line.split(":")[0] in {"webhook.url", "webhook.headers.Authorization", "kafka.config.sasl.password",
                                          "kafka.config.sasl.jaas.config", "webhook.surprise",
                                          "kafka.secret_files.sasl.password"}, line  # fmt: skip


def test_bad_yaml_names_the_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "rackplan.yaml"
    p.write_text("poll_interval_s: 5\nkafka: [\n", encoding="utf-8")
    line = _error(path=p)
    assert line.startswith(f"{p}, line 3, column 1: invalid YAML:"), line
    p.write_text("http:\n  port: 1\n  port: 2\n", encoding="utf-8")
    assert (
        _error(path=p)
        == f"{p}, line 3, column 3: invalid YAML: while constructing a mapping duplicate key 'port'"
    )
    p.write_text("a: &a [*a]\n", encoding="utf-8")
    assert "alias refers to a node that contains it" in _error(path=p)
    p.write_bytes(b"poll_interval_s: \xff\n")
    assert _error(path=p).startswith(f"{p}: not UTF-8")
    assert _error(path=tmp_path / "missing.yaml").startswith(f"{tmp_path / 'missing.yaml'}: cannot read")


def test_yaml_aliases_are_fine_within_bounds(tmp_path: Path) -> None:
    p = tmp_path / "rackplan.yaml"
    p.write_text(
        "consumer_groups:\n"
        "  - {group_id: g, members: [&m {member_id: m1, rack: az-a, topics: [orders]},\n"
        "                            {<<: *m, member_id: m2}]}\n",
        encoding="utf-8",
    )
    members = Settings.load(p).consumer_groups[0]["members"]
    assert [(m["member_id"], m["rack"]) for m in members] == [("m1", "az-a"), ("m2", "az-a")]


def test_a_yaml_alias_bomb_is_refused_fast(tmp_path: Path) -> None:
    """424 bytes of "billion laughs" cost 30 s of CPU before exit 2; now refused before it is built."""
    import time

    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [{','.join([f'*{prev}'] * 9)}]")
    p = tmp_path / "bomb.yaml"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert len(p.read_bytes()) < 450
    t0 = time.process_time()
    line = _error(path=p)
    assert time.process_time() - t0 < 1.0
    assert line == f"{p}: expands to more than {MAX_YAML_NODES} values (YAML aliases?); refused"


@pytest.mark.parametrize(
    ("variable", "value", "line"),
    [
        (
            "RACKPLAN_CONSUMER_GROUPS",
            "nope",
            "consumer_groups: RACKPLAN_CONSUMER_GROUPS (or one of its __ keys)",
        ),
        ("RACKPLAN_KAFKA", "{bad", "kafka: RACKPLAN_KAFKA (or one of its __ keys) is not valid JSON"),
        (
            "RACKPLAN_WEBHOOK__LABELS",
            "{bad",
            "webhook: RACKPLAN_WEBHOOK (or one of its __ keys) is not valid JSON",
        ),
    ],
)
def test_a_variable_that_is_not_json_is_named(
    variable: str, value: str, line: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pydantic_settings import SettingsError as SourceError

    monkeypatch.setenv(variable, value)
    with pytest.raises((SourceError, ValidationError)) as e:
        Settings.load()
    assert describe_error(e.value).startswith(line)


STREAMS_APP = {
    "application_id": "clicks",
    "subtopologies": [{"id": "0", "source_topics": ["clicks"], "changelog_topics": [], "stateful": False}],
    "clients": [{"process_id": "p-1", "rack": "az-a", "threads": 1}],
    "rack_aware": {"strategy": "balance_subtopology"},
}


@pytest.mark.parametrize(
    ("path", "where"),
    [
        ((), "streams_apps[0].num_standbys"),
        (("clients", 0), "streams_apps[0].clients[0].rak"),
        (("subtopologies", 0), "streams_apps[0].subtopologies[0].sources"),
        (("rack_aware",), "streams_apps[0].rack_aware.strategyy"),
    ],
)
def test_a_typo_in_a_streams_app_is_refused_naming_it(path: tuple[Any, ...], where: str) -> None:
    import copy

    app = copy.deepcopy(STREAMS_APP)
    Settings.model_validate({"streams_apps": [app]})  # the entry itself is fine
    target: Any = app
    for step in path:
        target = target[step]
    target[where.rsplit(".", 1)[1]] = 1
    assert _error({"streams_apps": [app]}).startswith(f"{where}: unknown key")


def test_the_agents_clients_refresh_topic_metadata_every_10_s_unless_the_settings_say() -> None:
    """librdkafka keeps a topic it was once told is missing 'gone' until its next periodic refresh
    (5 minutes by default): rackplan's clients refresh every 10 s (rackplan.agent.kafka.metadata_refresh)."""
    from rackplan.agent.kafka.metadata_refresh import METADATA_REFRESH_KEY

    assert Settings.model_validate({}).kafka.client_config()[METADATA_REFRESH_KEY] == 10_000
    mine = Settings.model_validate({"kafka": {"config": {METADATA_REFRESH_KEY: 60_000}}})
    assert mine.kafka.client_config()[METADATA_REFRESH_KEY] == 60_000


# ---- issue 24 #12: a settings file is bounded -------------------------------------------------------


def test_config_dev_zero_stops_at_the_limit() -> None:
    assert _error(path=Path("/dev/zero")) == (
        f"/dev/zero: the settings file is more than the limit of {MAX_SETTINGS_BYTES >> 20} MiB; "
        "reading stopped there"
    )


def test_a_50_mb_settings_file_is_refused_unread(tmp_path: Path) -> None:
    p = tmp_path / "huge.yaml"
    with open(p, "wb") as f:
        f.write(b"poll_interval_s: 5\n")
        f.truncate(50_000_000)
    assert _error(path=p) == f"{p}: the settings file is 50000000 bytes, over the limit of 4 MiB"


def test_a_settings_file_at_the_limit_is_read(tmp_path: Path) -> None:
    p = tmp_path / "padded.yaml"
    head = b"poll_interval_s: 5\n"
    p.write_bytes(head + b"#" * (MAX_SETTINGS_BYTES - len(head)))  # one long comment
    assert Settings.load(p).poll_interval_s == 5
    p.write_bytes(head + b"#" * (MAX_SETTINGS_BYTES + 1 - len(head)))
    assert _error(path=p).endswith("over the limit of 4 MiB")


def test_agent_run_with_config_dev_zero_exits_2_with_one_line() -> None:
    import os
    import resource
    import subprocess
    import sys

    def capped() -> None:  # an unbounded reader dies of MemoryError here, not the host of OOM
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    env = {k: v for k, v in os.environ.items() if not k.startswith("RACKPLAN_")}
    p = subprocess.run(
        [sys.executable, "-m", "rackplan", "agent", "run", "--no-supervisor", "--config", "/dev/zero"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        preexec_fn=capped,
    )
    assert p.returncode == 2, p.stderr
    assert p.stderr.splitlines() == [
        "rackplan: error: settings: /dev/zero: the settings file is more than the limit of 4 MiB; "
        "reading stopped there"
    ]


def test_a_secret_file_that_never_ends_is_refused_at_the_limit() -> None:
    s = Settings.model_validate({"kafka": {"secret_files": {"sasl.password": "/dev/zero"}}})
    with pytest.raises(SettingsError) as e:
        s.kafka.client_config()
    assert str(e.value) == (
        "kafka.secret_files.sasl.password: '/dev/zero' is more than the limit of 4 MiB; reading stopped there"
    )


def test_a_registration_secret_file_that_never_ends_is_refused_at_the_limit(tmp_path: Path) -> None:
    """``registrations.secret_file: /dev/zero`` (a wrong path) was read to its end: MemoryError, exit 1 (the
    host's memory, without a cap), where ``kafka.secret_files`` stop at 4 MiB; and every refusal named the
    key twice (``registrations.secret_file: registrations.secret_file: cannot read``).  Found by a hunt."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, hard))  # an unbounded read dies here, not the host
    try:
        with pytest.raises(ValueError) as e:
            Settings.model_validate({"registrations": {"secret_file": "/dev/zero"}})
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    assert describe_errors(e.value, Settings) == [
        "registrations.secret_file: '/dev/zero' is more than the limit of 4 MiB; reading stopped there"
    ]
    with pytest.raises(ValueError) as e:
        Settings.model_validate({"registrations": {"secret_file": str(tmp_path / "none")}})
    assert describe_errors(e.value, Settings) == [
        f"registrations.secret_file: cannot read {str(tmp_path / 'none')!r}: No such file or directory"
    ]


@pytest.mark.parametrize("shared", ["_rackplan.plans", "_rackplan.alerts", "_rackplan.registrations"])
def test_the_traffic_feed_needs_a_topic_of_its_own(shared: str) -> None:
    """Plan, alert and registration readers take every record of their topic for one of theirs."""
    with pytest.raises(ValueError) as e:
        Settings.model_validate({"traffic_topic": shared})
    (line,) = describe_errors(e.value, Settings)
    assert line.startswith("traffic_topic: must be a topic of its own"), line
    assert Settings.model_validate({"traffic_topic": None}).traffic_topic is None
    assert Settings().traffic_topic == "_rackplan.traffic"


@pytest.mark.parametrize(
    "key", ["plan_topic", "alerts_topic", "registrations_topic", "traffic_topic", "ha.lease_topic"]
)
@pytest.mark.parametrize("name", ["", "bad topic!", ".", "..", "t" * 250, "ü"])
def test_a_topic_setting_must_be_a_kafka_topic_name(key: str, name: str) -> None:
    section, _, field = key.rpartition(".")
    doc: dict[str, Any] = {section: {field: name}} if section else {field: name}
    with pytest.raises(ValidationError) as e:
        Settings.model_validate(doc)
    [line] = describe_errors(e.value, Settings)
    assert line.startswith(f"{key}: not a Kafka topic name"), line


def test_the_longest_kafka_topic_name_is_a_topic_setting() -> None:
    assert Settings.model_validate({"plan_topic": "t._-9" + "x" * 244}).plan_topic.startswith("t._-9")


@pytest.mark.parametrize(
    "url",
    [
        "http://",
        "https://:8080/x",
        "http://127.0.0.1:99999/",
        "http://h:0/",
        "http://h:port/",
        "http://u:p@/x",
    ],
)
def test_a_webhook_url_no_delivery_can_use_is_refused_naming_it(url: str) -> None:
    """No host, or a port outside 1-65535: accepted, every delivery would fail and be retried as a connection
    error, the alerts never sent.  Refused at start, naming ``webhook.url``, never echoing the URL."""
    with pytest.raises(ValidationError) as e:
        Settings.model_validate({"webhook": {"url": url}})
    line = describe_error(e.value)
    assert line.startswith("webhook.url:") and "needs a host" in line and url not in line, line


def test_a_webhook_url_with_a_host_and_a_port_is_kept() -> None:
    for url in [
        "http://am:9093/api/v2/alerts",
        "https://alerts.example.com/api/v2/alerts",
        "http://[::1]:65535/",
    ]:
        assert Settings.model_validate({"webhook": {"url": url}}).webhook.url == url


@pytest.mark.parametrize(
    ("key", "url", "said"),
    [
        ("agent_url", "http://rack plan:9464", "space or control character"),
        ("agent_url", "rackplan:9464", "expected an http:// or https:// URL"),
        ("agent_url", "http://:9464", "needs a host"),
        ("generator_url", "http://grafana/d/rackplan?var-group=a b", "space or control character"),
        ("generator_url", "http://x/\ty", "space or control character"),
    ],
)
def test_a_generator_url_alertmanager_refuses_is_a_settings_error(key: str, url: str, said: str) -> None:
    """Every alert carries ``generatorURL`` (``webhook.agent_url``'s group view, or ``webhook.generator_url``);
    Alertmanager answers 422 to one that is no URI (a space: measured with Alertmanager 0.25), a 4xx that is
    not retried, so every alert batch was dropped (rackplan_webhook_failures_total{reason="http_4xx"}) while
    the settings had loaded.  Found by a hunt."""
    with pytest.raises(ValidationError) as e:
        Settings.model_validate({"webhook": {"url": "http://am:9093/api/v2/alerts", key: url}})
    line = describe_error(e.value)
    assert line.startswith(f"webhook.{key}:") and said in line, line


def test_generator_urls_alertmanager_takes_are_kept() -> None:
    ok = {"agent_url": "https://rackplan.example:9464/", "generator_url": "/v1/groups"}  # a path is a URI
    assert Settings.model_validate({"webhook": ok}).webhook.generator_url == "/v1/groups"
