"""Secrets never reach a log (issue 11 E): the "agent starting" line, every event, librdkafka's lines."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from rackplan.agent.core.logging import configure, get_logger, kafka_logger, log_librdkafka
from rackplan.agent.core.redact import is_secret_key, mask_text, mask_tree, redact_url
from rackplan.agent.settings.sections import Settings

SECRETS = ["Cl1entS3cret", "T0kenValue", "Us3rPassw0rd", "H3aderValue", "Jaa5Pw", "Extens10n", "F1le"]


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    yield
    configure("json", "warning", stream=sys.__stderr__)


def full_settings() -> Settings:
    return Settings.model_validate(
        {
            "kafka": {
                "config": {
                    "security.protocol": "SASL_SSL",
                    "sasl.mechanism": "OAUTHBEARER",
                    "sasl.oauthbearer.method": "oidc",
                    "sasl.oauthbearer.config": "clientId=rackplan clientSecret=Cl1entS3cret scope=kafka",
                    "sasl.oauthbearer.extensions": "logicalCluster=lkc-1,identityPoolId=Extens10n",
                    "sasl.jaas.config": 'PlainLoginModule required username="u" password="Jaa5Pw";',
                    "client.id": "rackplan",
                }
            },
            "webhook": {
                "url": "https://am:Us3rPassw0rd@am.example:9093/api/v2/alerts?token=T0kenValue",
                "headers": {"X-Scope-OrgID": "H3aderValue"},
                "agent_url": "http://rackplan:9464/?sig=F1le",
            },
        }
    )


def test_agent_starting_line_shows_no_secret() -> None:
    s = full_settings()
    for fmt in ("json", "console"):
        buf = io.StringIO()
        configure(fmt, "info", stream=buf)
        get_logger("rackplan.agent").info("agent starting", settings=s.redacted())
        text = buf.getvalue()
        assert [x for x in SECRETS if x in text] == [], fmt
        assert "agent starting" in text and "rackplan" in text and "am.example:9093" in text  # still useful
    red = s.redacted()
    assert red["kafka"]["config"]["sasl.oauthbearer.config"] == "***"
    assert red["kafka"]["config"]["client.id"] == "rackplan"
    assert red["webhook"]["url"] == "https://***@am.example:9093/api/v2/alerts?token=***"
    assert red["webhook"]["headers"] == {"X-Scope-OrgID": "***"}


def test_every_event_is_masked_even_unredacted_settings() -> None:
    """A log call that forgets :meth:`Settings.redacted` still leaks nothing a key or a pattern names."""
    s = full_settings()
    buf = io.StringIO()
    configure("json", "debug", stream=buf)
    log = get_logger("t")
    log.info("oops", config=s.kafka.client_config(), url=s.webhook.url)
    log.error(
        "fetch failed",
        error="POST https://u:Us3rPassw0rd@h/x?token=T0kenValue failed: 401",
        token="T0kenValue",
    )
    log.warning("librdkafka says clientSecret=Cl1entS3cret is invalid")
    kafka_logger().error("%s [%s] %s", "OAUTHBEARER", "rdkafka#1", "bad config: clientSecret=Cl1entS3cret")
    log_librdkafka(3, "SASL", "embedded", "password=Jaa5Pw rejected")
    text = buf.getvalue()
    assert [x for x in SECRETS if x in text] == []
    events = [json.loads(line) for line in text.splitlines()]
    assert len(events) == 5
    assert events[0]["config"]["client.id"] == "rackplan"
    assert events[1]["token"] == "***" and events[1]["error"] == "POST https://***@h/x?token=*** failed: 401"


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("sasl.oauthbearer.config", True),
        ("sasl.oauthbearer.client.secret", True),
        ("sasl.oauthbearer.extensions", True),
        ("Authorization", True),
        ("X-Api-Key", True),
        ("token", True),
        ("access_token", True),
        ("clientSecret", True),
        ("ssl.keystore.location", False),
        ("secret_files", False),
        ("header_files", False),
        ("sasl.oauthbearer.method", False),
        ("key", False),
        ("group", False),
    ],
)
def test_secret_bearing_keys(key: str, secret: bool) -> None:
    assert is_secret_key(key) is secret


def test_secret_file_paths_stay_readable(tmp_path: Path) -> None:
    pw = tmp_path / "pw"
    pw.write_text("Us3rPassw0rd\n", encoding="utf-8")
    s = Settings.model_validate(
        {
            "kafka": {"secret_files": {"sasl.password": str(pw)}},
            "webhook": {"header_files": {"Authorization": str(pw)}},
        }
    )
    red = s.redacted()
    assert red["kafka"]["secret_files"] == {"sasl.password": str(pw)}  # where the secret is, not the secret
    assert red["webhook"]["header_files"] == {"Authorization": str(pw)}
    assert "Us3rPassw0rd" not in json.dumps(red)


def test_redact_url_masks_credentials_query_and_fragment() -> None:
    assert redact_url("http://am:9093/api/v2/alerts") == "http://am:9093/api/v2/alerts"
    assert redact_url("https://u:p@h/x?a=1&token=t#frag") == "https://***@h/x?a=***&token=***#***"
    assert redact_url("http://u@h:1/") == "http://***@h:1/"
    assert mask_text("jaas: password='p w' user=u") == "jaas: password=*** user=u"


_token = st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=4, max_size=20).map(
    lambda t: "Zq" + t
)


@given(secret=_token, name=st.sampled_from(["clientSecret", "token", "password", "api_key", "Authorization"]))
def test_any_secret_pair_in_any_text_is_masked(secret: str, name: str) -> None:
    text = f"connect failed ({name}={secret}) on https://user:{secret}@host/x?{name}={secret}"
    assert secret not in json.dumps(mask_tree({"error": text}))


def test_the_real_agent_starting_line(tmp_path: Path) -> None:
    """``rackplan agent run`` itself: its first log line names the settings, never their secrets."""
    config = tmp_path / "rackplan.yaml"
    s = full_settings()
    doc = {
        "kafka": {"bootstrap_servers": "127.0.0.1:1", "config": dict(s.kafka.config)},
        "webhook": {"url": s.webhook.url, "headers": dict(s.webhook.headers)},
        "http": {"port": 0},
        "log": {"format": "json"},
    }
    config.write_text(yaml.safe_dump(doc), encoding="utf-8")
    cmd = [sys.executable, "-c", "import sys; from rackplan.cli import main; sys.exit(main())"]
    p = subprocess.Popen(
        [*cmd, "agent", "run", "--no-supervisor", "--config", str(config)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
    )
    try:
        assert p.stdout is not None
        first = p.stdout.readline()
    finally:
        p.kill()
        p.wait(10)
    event = json.loads(first)
    assert event["event"] == "agent starting"
    assert event["settings"]["kafka"]["config"]["sasl.oauthbearer.config"] == "***"
    assert [x for x in SECRETS if x in first] == []
