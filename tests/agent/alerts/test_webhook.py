"""The Alertmanager webhook: API v2 payloads, bounded retries with jitter, failures counted, never blocking."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import io
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from rackplan.agent.alerts.webhook import (
    ALERTNAME,
    WebhookNotifier,
    alertmanager_alert,
    default_agent_url,
    rfc3339,
    with_cluster_label,
)
from rackplan.agent.core.logging import configure, get_logger
from rackplan.agent.metrics.registry import Metrics
from rackplan.agent.protocol.alerts import FIRING, RESOLVED, UNFIXABLE, UNFIXABLE_ALERTNAME, AlertEvent
from rackplan.agent.settings.errors import describe_error
from rackplan.agent.settings.sections import HttpSettings, Settings, WebhookSettings


def event(status: str = FIRING, key: str = "consumer/payments", at: float = 1000.0, started: float = 1000.0) -> AlertEvent:  # fmt: skip
    return AlertEvent(key, status, 0.1, 0.5, 0.05, 0.25, "replica racks changed: orders-3", at, started)


class Receiver:
    """A local HTTP server on a free loopback port; ``answers`` are the statuses of the next requests."""

    def __init__(self, answers: list[int] | None = None, default: int = 200, delay_s: float = 0.0) -> None:
        self.answers = list(answers or [])
        self.default = default
        self.delay_s = delay_s
        self.bodies: list[Any] = []
        self.raw: list[bytes] = []
        self.headers: list[dict[str, str]] = []
        self.times: list[float] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver.lock:
                    receiver.times.append(time.monotonic())
                    receiver.bodies.append(json.loads(body))
                    receiver.raw.append(body)
                    receiver.headers.append(dict(self.headers))
                    code = receiver.answers.pop(0) if receiver.answers else receiver.default
                if receiver.delay_s:
                    time.sleep(receiver.delay_s)
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/api/v2/alerts"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Callable[..., Receiver]]:
    made: list[Receiver] = []

    def make(*args: Any, **kw: Any) -> Receiver:
        r = Receiver(*args, **kw)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def notifier(
    url: str, metrics: Metrics, clock: Callable[[], float] = lambda: 1000.0, **kw: Any
) -> WebhookNotifier:
    """``clock``: the time of each request (a firing alert's ``endsAt`` counts from it)."""
    settings = WebhookSettings(
        **{
            "url": url,
            "timeout_s": 1.0,
            "max_attempts": 3,
            "backoff_initial_s": 0.05,
            "backoff_max_s": 0.2,
            **kw,
        }
    )
    return WebhookNotifier(settings, metrics, get_logger("t"), firing_ttl_s=240, rng=lambda: 1.0, clock=clock)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_cluster_name_becomes_the_cluster_label_unless_set() -> None:
    bare = WebhookSettings(url="http://am/")
    assert with_cluster_label(bare, None) is bare
    labelled = alertmanager_alert(event(), with_cluster_label(bare, "eu-1"), now=0, firing_ttl_s=1)
    assert labelled["labels"]["cluster"] == "eu-1"
    explicit = WebhookSettings(url="http://am/", labels={"cluster": "prod"})
    assert with_cluster_label(explicit, "eu-1").labels["cluster"] == "prod"


def test_an_alert_with_measured_traffic_says_what_it_costs() -> None:
    s = WebhookSettings(url="http://am:9093/api/v2/alerts")
    priced = dataclasses.replace(event(), cross_rack_bytes_per_s=1e6, cross_rack_dollars_per_month=52.56)
    annotations = alertmanager_alert(priced, s, now=2000.0, firing_ttl_s=240)["annotations"]
    assert annotations["summary"].endswith("; cross-rack reads cost $52.56 a month")
    assert annotations["cross_rack_dollars_per_month"] == "52.56"
    assert (
        "cross_rack_dollars_per_month"
        not in alertmanager_alert(event(), s, now=0, firing_ttl_s=1)["annotations"]
    )


def test_payload_is_alertmanager_api_v2() -> None:
    s = WebhookSettings(
        url="http://am:9093/api/v2/alerts", labels={"cluster": "prod"}, generator_url="http://x/v1/groups"
    )
    firing = alertmanager_alert(event(), s, now=2000.0, firing_ttl_s=240)
    resolved = alertmanager_alert(event(RESOLVED, at=3000.0), s, now=3000.0, firing_ttl_s=240)
    # The same labels identify the alert in both states; Alertmanager dedupes on them.
    assert firing["labels"] == resolved["labels"] == {
        "alertname": ALERTNAME, "cluster": "prod", "group": "payments", "kind": "consumer", "severity": "warning"
    }  # fmt: skip
    assert firing["startsAt"] == resolved["startsAt"] == "1970-01-01T00:16:40.000Z"
    assert firing["endsAt"] == rfc3339(2240.0)  # in the future: re-sent while it fires
    assert resolved["endsAt"] == rfc3339(3000.0)  # when it resolved
    assert firing["generatorURL"] == "http://x/v1/groups"
    assert all(isinstance(v, str) for v in firing["annotations"].values())  # a LabelSet: strings only
    assert firing["annotations"]["description"] == "replica racks changed: orders-3"
    assert "50.0%" in firing["annotations"]["summary"]
    assert set(firing) == {"labels", "annotations", "startsAt", "endsAt", "generatorURL"}
    assert "generatorURL" not in alertmanager_alert(event(), WebhookSettings(url="http://a/"), 0, 1)
    # RFC 3339 as Alertmanager parses it
    assert dt.datetime.fromisoformat(firing["endsAt"]).tzinfo is not None


def test_delivered_as_a_json_array(receiver: Callable[..., Receiver]) -> None:
    r = receiver()
    m = Metrics()
    n = notifier(r.url, m, headers={"Authorization": "Bearer t0ken"})
    t0 = time.monotonic()
    assert n.notify([event(), event(key="streams/clicks")], [], now=1000.0) == 2
    assert time.monotonic() - t0 < 0.05  # queued, not sent, on the loop's thread
    assert n.wait_idle(5)
    assert len(r.bodies) == 1 and isinstance(r.bodies[0], list) and len(r.bodies[0]) == 2
    assert r.headers[0]["Content-Type"] == "application/json"
    assert r.headers[0]["Authorization"] == "Bearer t0ken"
    assert m.get("rackplan_webhook_attempts_total", {"result": "ok"}) == 1
    n.close(1)


def test_retried_with_backoff_until_accepted(receiver: Callable[..., Receiver]) -> None:
    r = receiver(answers=[503, 500])
    m = Metrics()
    n = notifier(r.url, m)
    n.notify([event()], [], now=1000.0)
    assert n.wait_idle(5)
    assert len(r.bodies) == 3 and r.bodies[0] == r.bodies[2]
    gaps = [b - a for a, b in zip(r.times, r.times[1:], strict=False)]
    assert gaps[0] >= 0.045 and gaps[1] >= 0.095  # exponential: 0.05 then 0.1 (rng 1.0: full cap)
    assert m.get("rackplan_webhook_attempts_total", {"result": "error"}) == 2
    assert m.get("rackplan_webhook_attempts_total", {"result": "ok"}) == 1
    assert m.series("rackplan_webhook_failures_total") == {}
    n.close(1)


def test_failing_endpoint_is_counted_after_bounded_retries(receiver: Callable[..., Receiver]) -> None:
    r = receiver(default=500)
    m = Metrics()
    n = notifier(r.url, m)
    n.notify([event()], [], now=1000.0)
    assert n.wait_idle(5)
    assert len(r.bodies) == 3  # max_attempts, no more
    assert m.get("rackplan_webhook_failures_total", {"reason": "http_5xx"}) == 1
    assert m.get("rackplan_webhook_attempts_total", {"result": "error"}) == 3
    n.close(1)


def test_rejected_batches_are_not_retried(receiver: Callable[..., Receiver]) -> None:
    r = receiver(default=400)
    m = Metrics()
    n = notifier(r.url, m)
    n.notify([event()], [], now=1000.0)
    assert n.wait_idle(5)
    assert len(r.bodies) == 1
    assert m.get("rackplan_webhook_failures_total", {"reason": "http_4xx"}) == 1
    n.close(1)


def test_too_many_requests_is_retried(receiver: Callable[..., Receiver]) -> None:
    r = receiver(answers=[429])
    n = notifier(r.url, Metrics())
    n.notify([event()], [], now=1000.0)
    assert n.wait_idle(5) and len(r.bodies) == 2
    n.close(1)


def test_unreachable_endpoint_is_counted() -> None:
    m = Metrics()
    n = notifier(f"http://127.0.0.1:{free_port()}/api/v2/alerts", m)
    n.notify([event()], [], now=1000.0)
    assert n.wait_idle(5)
    assert m.get("rackplan_webhook_failures_total", {"reason": "connection"}) == 1
    n.close(1)


def test_a_hanging_endpoint_times_out_and_never_blocks_the_loop(receiver: Callable[..., Receiver]) -> None:
    r = receiver(delay_s=1.0)
    m = Metrics()
    n = notifier(r.url, m, timeout_s=0.1, max_attempts=2)
    t0 = time.monotonic()
    for i in range(3):
        n.notify([event(key=f"consumer/g{i}")], [], now=1000.0 + i)
    assert time.monotonic() - t0 < 0.05
    assert n.wait_idle(10)
    assert m.get("rackplan_webhook_failures_total", {"reason": "timeout"}) == 3
    n.close(1)


def test_a_full_queue_drops_the_oldest_batch(receiver: Callable[..., Receiver]) -> None:
    r = receiver(delay_s=0.3)
    m = Metrics()
    n = notifier(r.url, m, queue_size=1)
    for i in range(4):
        n.notify([event(key=f"consumer/g{i}")], [], now=1000.0 + i)
    assert n.wait_idle(10)
    dropped = m.get("rackplan_webhook_failures_total", {"reason": "queue_full"})
    assert dropped >= 1 and len(r.bodies) + dropped == 4
    assert r.bodies[-1][0]["labels"]["group"] == "g3"  # the newest batch survives
    n.close(1)


def test_firing_alerts_are_resent_while_they_fire(receiver: Callable[..., Receiver]) -> None:
    r = receiver()
    t = [0.0]
    n = notifier(r.url, Metrics(), clock=lambda: t[0], resend_interval_s=60)
    fired = event(at=0.0, started=0.0)
    assert n.notify([fired], [fired], now=0.0) == 1
    assert n.wait_idle(5)
    assert n.notify([], [fired], now=30.0) == 0  # too soon
    t[0] = 61.0
    assert n.notify([], [fired], now=61.0) == 1  # Alertmanager would otherwise let it expire
    assert n.wait_idle(5)
    resolved = event(RESOLVED, at=70.0, started=0.0)
    t[0] = 70.0
    assert n.notify([resolved], [], now=70.0) == 1
    assert n.wait_idle(5)
    alerts = [a for body in r.bodies for a in body]
    assert [a["endsAt"] for a in alerts] == [rfc3339(240.0), rfc3339(301.0), rfc3339(70.0)]
    n.close(1)


def test_close_delivers_what_is_queued_without_waiting_out_backoff(receiver: Callable[..., Receiver]) -> None:
    r = receiver(answers=[500])
    n = notifier(r.url, Metrics(), backoff_initial_s=30, backoff_max_s=30, max_attempts=2)
    n.notify([event()], [], now=1000.0)
    deadline = time.monotonic() + 5
    while not r.bodies and time.monotonic() < deadline:
        time.sleep(0.01)
    t0 = time.monotonic()
    n.close(5)
    assert time.monotonic() - t0 < 2 and len(r.bodies) == 2


def test_settings_validate_and_never_leak_secrets() -> None:
    s = Settings.model_validate(
        {
            "webhook": {
                "url": "https://user:pw@am.example:9093/api/v2/alerts",
                "headers": {"Authorization": "Bearer s3"},
            }
        }
    )
    assert "pw" not in repr(s) and "s3" not in repr(s)
    red = s.redacted()["webhook"]
    assert red["url"] == "https://***@am.example:9093/api/v2/alerts"
    assert red["headers"] == {"Authorization": "***"}
    for bad in ({"url": "ftp://x"}, {"url": "http://x", "labels": {"alertname": "x"}},
                {"url": "http://x", "labels": {"bad-name": "x"}}, {"url": "http://x", "max_attempts": 0}):  # fmt: skip
        with pytest.raises(ValidationError):
            Settings.model_validate({"webhook": bad})


class Recorder:
    """Answers every request (any method) with ``code`` and ``location``; records method, path and headers."""

    def __init__(self, code: int = 200, location: str | None = None, tls: Any = None) -> None:
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def _any(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                recorder.requests.append((self.command, self.path, dict(self.headers), body))
                self.send_response(code)
                if location is not None:
                    self.send_header("Location", location)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_url_credentials_become_basic_auth_and_the_host_is_the_host() -> None:
    """Issue 11 F: ``user:password@`` was taken for the host name; every alert was dropped."""
    r = Recorder()
    m = Metrics()
    try:
        n = notifier(f"http://alert%40ops:p%3Ass@127.0.0.1:{r.port}/api/v2/alerts", m)
        n.notify([event()], [], now=1000.0)
        assert n.wait_idle(5)
        n.close(1)
    finally:
        r.close()
    (method, path, headers, body) = r.requests[0]
    assert (method, path) == ("POST", "/api/v2/alerts") and json.loads(body)[0]["labels"][
        "group"
    ] == "payments"
    assert headers["Host"] == f"127.0.0.1:{r.port}"
    assert headers["Authorization"] == "Basic " + base64.b64encode(b"alert@ops:p:ss").decode()
    assert m.get("rackplan_webhook_attempts_total", {"result": "ok"}) == 1


def test_a_redirect_is_a_failure_never_followed() -> None:
    """Issue 11 E: a 302 turned the POST into a GET, forwarded Authorization, dropped the body, counted ok."""
    target = Recorder()
    redirector = Recorder(302, location=f"http://127.0.0.1:{target.port}/steal")
    m = Metrics()
    buf = io.StringIO()
    configure("json", "info", stream=buf)
    try:
        n = notifier(
            f"http://127.0.0.1:{redirector.port}/api/v2/alerts", m, headers={"Authorization": "Bearer s3"}
        )
        n.notify([event()], [], now=1000.0)
        assert n.wait_idle(5)
        n.close(1)
    finally:
        target.close()
        redirector.close()
    assert len(redirector.requests) == 1  # not retried: a redirect will not go away
    assert target.requests == []  # never followed: no request, no Authorization there
    assert m.get("rackplan_webhook_failures_total", {"reason": "http_3xx"}) == 1
    assert m.get("rackplan_webhook_attempts_total", {"result": "ok"}) == 0
    assert "redirects are not followed" in buf.getvalue() and "s3" not in buf.getvalue()


def test_auth_header_from_a_secret_file_read_at_every_delivery(tmp_path: Path) -> None:
    secret = tmp_path / "am-auth"
    secret.write_text("Bearer first\n", encoding="utf-8")
    r = Recorder()
    try:
        n = notifier(
            f"http://127.0.0.1:{r.port}/api/v2/alerts", Metrics(), header_files={"Authorization": secret}
        )
        n.notify([event()], [], now=1000.0)
        assert n.wait_idle(5)
        secret.write_text("Bearer rotated\n", encoding="utf-8")
        n.notify([event(key="consumer/other")], [], now=1001.0)
        assert n.wait_idle(5)
        n.close(1)
    finally:
        r.close()
    assert [h["Authorization"] for _, _, h, _ in r.requests] == ["Bearer first", "Bearer rotated"]
    s = Settings.model_validate(
        {"webhook": {"url": "http://x", "header_files": {"Authorization": str(secret)}}}
    )
    assert "rotated" not in json.dumps(s.redacted()) and "rotated" not in repr(s)
    with pytest.raises(ValidationError, match=r"webhook\.header_files[\s\S]*Authorization: no such file"):
        Settings.model_validate(
            {"webhook": {"url": "http://x", "header_files": {"Authorization": "/nonexistent"}}}
        )


def _openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)


def _cert(d: Path, name: str, ca: str | None, san: str) -> tuple[Path, Path]:
    key, pem = d / f"{name}.key", d / f"{name}.pem"
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key)
    if ca is None:
        _openssl("req", "-x509", *ec, "-out", pem, "-days", "1", "-subj", f"/CN={name}")
        return pem, key
    csr, ext = d / f"{name}.csr", d / f"{name}.ext"
    ext.write_text(f"subjectAltName={san}\n", encoding="utf-8")
    _openssl("req", *ec, "-out", csr, "-subj", f"/CN={name}")
    _openssl("x509", "-req", "-in", csr, "-CA", d / f"{ca}.pem", "-CAkey", d / f"{ca}.key",
             "-CAcreateserial", "-out", pem, "-days", "1", "-extfile", ext)  # fmt: skip
    return pem, key


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    _cert(d, "ca", None, "")
    _cert(d, "server", "ca", "IP:127.0.0.1")
    _cert(d, "client", "ca", "DNS:rackplan")
    return d


def test_webhook_tls_with_a_private_ca_and_a_client_certificate(pki: Path) -> None:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki / "server.pem", pki / "server.key")
    ctx.load_verify_locations(pki / "ca.pem")
    ctx.verify_mode = ssl.CERT_REQUIRED  # mutual TLS: no client certificate, no answer
    r = Recorder(tls=ctx)
    url = f"https://127.0.0.1:{r.port}/api/v2/alerts"
    mutual = {"ca_file": pki / "ca.pem", "cert_file": pki / "client.pem", "key_file": pki / "client.key"}
    cases = {"mutual": mutual, "no client cert": {"ca_file": pki / "ca.pem"}, "system CAs": {}}
    results = {}
    try:
        for name, tls in cases.items():
            m = Metrics()
            n = notifier(url, m, tls=tls, max_attempts=1)
            n.notify([event()], [], now=1000.0)
            assert n.wait_idle(10)
            n.close(1)
            results[name] = (
                m.get("rackplan_webhook_attempts_total", {"result": "ok"}),
                m.get("rackplan_webhook_failures_total", {"reason": "connection"}),
            )
    finally:
        r.close()
    assert results == {"mutual": (1, 0), "no client cert": (0, 1), "system CAs": (0, 1)}
    assert len(r.requests) == 1
    with pytest.raises(ValidationError, match=r"webhook\.tls[\s\S]*ca_file"):
        Settings.model_validate({"webhook": {"url": url, "tls": {"ca_file": str(pki / "missing.pem")}}})
    with pytest.raises(ValidationError, match=r"key_file needs cert_file"):
        Settings.model_validate({"webhook": {"url": url, "tls": {"key_file": str(pki / "client.key")}}})


def test_generator_url_is_the_groups_own_view() -> None:
    ev = event(key="consumer/pay ments")
    s = WebhookSettings(url="http://am/", agent_url="http://rackplan:9464/")
    assert (
        alertmanager_alert(ev, s, 0, 1)["generatorURL"]
        == "http://rackplan:9464/v1/groups/consumer/pay%20ments"
    )
    derived = alertmanager_alert(ev, WebhookSettings(url="http://am/"), 0, 1, agent_url="http://h:1")
    assert derived["generatorURL"] == "http://h:1/v1/groups/consumer/pay%20ments"
    static = WebhookSettings(url="http://am/", generator_url="http://x/v1/groups")
    assert (
        alertmanager_alert(ev, static, 0, 1, agent_url="http://h:1")["generatorURL"] == "http://x/v1/groups"
    )
    assert default_agent_url(HttpSettings(host="0.0.0.0", port=9464)) == f"http://{socket.getfqdn()}:9464"
    assert default_agent_url(HttpSettings(host="::1", port=1)) == "http://[::1]:1"


def test_severity_label_runbook_annotation_and_unfixable_sent_once(receiver: Callable[..., Receiver]) -> None:
    r = receiver()
    n = notifier(r.url, Metrics(), resend_interval_s=60)
    fired = AlertEvent(
        "consumer/a", FIRING, 0, 0.5, 0.0, 0.25, "x", 0, 0, "critical", "rb.md#rackplancrossracklocality"
    )
    unfix = AlertEvent(
        "consumer/b", UNFIXABLE, 1, 1, 1, 0.25, "y", 0, 0, "info", "rb.md#rackplanlocalityunfixable"
    )
    assert n.notify([fired, unfix], [fired], now=0.0) == 2
    assert n.notify([], [fired], now=61.0) == 1  # the firing one is re-sent; the unfixable report is not
    assert n.notify([], [fired], now=122.0) == 1
    assert n.wait_idle(5)
    n.close(1)
    alerts = [a for body in r.bodies for a in body]
    assert [(a["labels"]["alertname"], a["labels"]["severity"]) for a in alerts] == [
        (ALERTNAME, "critical"), (UNFIXABLE_ALERTNAME, "info"), (ALERTNAME, "critical"), (ALERTNAME, "critical")
    ]  # fmt: skip
    assert alerts[0]["annotations"]["runbook_url"] == "rb.md#rackplancrossracklocality"
    assert "no assignment fixes it" in alerts[1]["annotations"]["summary"]


def test_delivered_bodies_are_postable_alerts_in_canonical_json(receiver: Callable[..., Receiver]) -> None:
    """The body validates as Alertmanager's postableAlerts (the protocol model) and is compact, keys sorted."""
    from pydantic import TypeAdapter

    from rackplan.agent.protocol.alerts import encode_webhook_body
    from rackplan.agent.protocol.models import WebhookBody

    r = receiver()
    n = notifier(r.url, Metrics(), agent_url="http://agent:9464", labels={"team": "kafka"})
    unfix = AlertEvent(
        "consumer/pay/ments", UNFIXABLE, 0.5, 0.6, 0.55, 0.25, "racks", 1000.0, 990.0, "critical"
    )
    assert n.notify([event(), event(RESOLVED, key="streams/clicks"), unfix], [], now=1000.0) == 3
    assert n.wait_idle(5)
    n.close(1)
    (body,) = r.bodies
    alerts = TypeAdapter(WebhookBody).validate_json(encode_webhook_body(body))
    assert [(a.labels["kind"], a.labels["group"], a.labels["alertname"]) for a in alerts] == [
        ("consumer", "payments", "RackplanCrossRackLocality"),
        ("streams", "clicks", "RackplanCrossRackLocality"),
        ("consumer", "pay/ments", UNFIXABLE_ALERTNAME),
    ]
    assert alerts[2].generatorURL == "http://agent:9464/v1/groups/consumer/pay%2Fments"
    assert all(a.labels["team"] == "kafka" and a.labels["severity"] for a in alerts)
    assert r.raw[0] == encode_webhook_body(body)  # what went over the wire: compact, keys sorted
    assert r.raw[0] == json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


# ---- issue 24 item 10: header values HTTP cannot carry, failures counted and never a secret -----------


TOKEN = "Bearer t0k3n-s3cr3t"


def _deliver_once(n: WebhookNotifier) -> None:
    n.notify([event()], [], now=1000.0)
    assert n.wait_idle(10)
    n.close(1)


@pytest.mark.parametrize("bad", ["\r\nX-Injected: 1", "\n", "\r", "\x00", "\x7f", "\u2019"])
def test_an_unsendable_header_value_is_refused_at_load_naming_it_not_its_value(bad: str) -> None:
    """Issue 24 #10: CR/LF passed validation; every delivery then raised with the token in its message."""
    doc = {"webhook": {"url": "http://am:9093/", "headers": {"Authorization": TOKEN + bad}}}
    with pytest.raises(ValidationError) as err:
        Settings.model_validate(doc)
    line = describe_error(err.value)
    assert line.startswith("webhook.headers: Authorization: the value holds") and "\n" not in line
    assert "t0k3n" not in line


def test_a_bad_header_name_or_url_is_refused_at_load() -> None:
    for webhook in (
        {"url": "http://am/", "headers": {"Bad Name": "x"}},
        {"url": "http://am/", "headers": {"X-Ok:": "x"}},
        {"url": "http://am/?token=s3cr3t\r\nX: y"},
        {"url": "http://am/ x?token=s3cr3t"},
    ):
        with pytest.raises(ValidationError) as err:
            Settings.model_validate({"webhook": webhook})
        assert describe_error(err.value).startswith(("webhook.headers: ", "webhook.url: "))
        assert "s3cr3t" not in describe_error(err.value)


def test_a_label_the_agent_sets_is_refused_in_webhook_labels_severity_too() -> None:
    # webhook.labels {severity: critical} loaded, then every alert went out with severity "warning" (the agent's
    # label wins): a route to the pager on severity=critical never matched, and nothing said why.
    for name in ("alertname", "kind", "group", "severity"):
        with pytest.raises(ValidationError) as err:
            Settings.model_validate({"webhook": {"url": "http://am/", "labels": {name: "x"}}})
        assert describe_error(err.value) == f"webhook.labels: label {name!r} is set by the agent" + (
            " (alerts.severity)" if name == "severity" else ""
        )


def test_agent_run_exits_2_on_a_crlf_header_without_echoing_it(tmp_path: Path) -> None:
    cfg = tmp_path / "rackplan.yaml"
    cfg.write_text(
        json.dumps(
            {
                "kafka": {"bootstrap_servers": "127.0.0.1:1", "startup_timeout_s": 1},
                "webhook": {"url": "http://127.0.0.1:1/", "headers": {"Authorization": TOKEN + "\r\nX: 1"}},
            }
        ),
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("RACKPLAN_")}
    p = subprocess.run(
        [sys.executable, "-m", "rackplan", "agent", "run", "--no-supervisor", "--config", str(cfg)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "rackplan: error: settings: webhook.headers: Authorization: the value holds a control character "
        "(CR) at character 20"
    ]
    assert "t0k3n" not in p.stdout + p.stderr


def test_a_header_file_rotated_to_an_unsendable_value_is_a_counted_failure_never_logged(
    tmp_path: Path,
) -> None:
    secret = tmp_path / "am-auth"
    secret.write_text(TOKEN + "\n", encoding="utf-8")
    r = Recorder()
    m = Metrics()
    buf = io.StringIO()
    configure("json", "info", stream=buf)
    try:
        n = notifier(f"http://127.0.0.1:{r.port}/api/v2/alerts", m, header_files={"Authorization": secret})
        secret.write_text(TOKEN + "\r\nX-Injected: 1\n", encoding="utf-8")  # rotated, badly
        _deliver_once(n)
    finally:
        r.close()
    assert r.requests == []
    assert m.get("rackplan_webhook_failures_total", {"reason": "header_value"}) == 1
    assert m.get("rackplan_webhook_failures_total", {"reason": "internal"}) == 0
    events = [json.loads(line) for line in buf.getvalue().splitlines()]
    (failed,) = [e for e in events if e["level"] == "error"]
    assert failed["event"] == "webhook header file holds an unsendable value; alerts dropped"
    assert failed["header"] == "Authorization" and "CR" in failed["problem"]
    assert "t0k3n" not in buf.getvalue() and "Traceback" not in buf.getvalue()


def test_a_value_http_client_refuses_is_a_counted_failure_without_its_secret(
    tmp_path: Path,
) -> None:
    """Settings built without validation (``model_construct``): the last line of defence at delivery."""
    r = Recorder()
    m = Metrics()
    buf = io.StringIO()
    configure("json", "info", stream=buf)
    try:
        settings = WebhookSettings.model_construct(
            url=f"http://127.0.0.1:{r.port}/api/v2/alerts",
            headers={"Authorization": TOKEN + "\r\nX-Injected: 1"},
            max_attempts=3,
            backoff_initial_s=0.05,
            backoff_max_s=0.05,
        )
        _deliver_once(WebhookNotifier(settings, m, get_logger("t"), firing_ttl_s=240, rng=lambda: 1.0))
    finally:
        r.close()
    assert r.requests == []
    assert m.get("rackplan_webhook_failures_total", {"reason": "invalid_request"}) == 1
    assert m.get("rackplan_webhook_attempts_total", {"result": "error"}) == 1  # not retried: it cannot change
    assert "t0k3n" not in buf.getvalue() and "Traceback" not in buf.getvalue()


def test_a_receiver_that_does_not_speak_http_is_a_counted_failure() -> None:
    srv = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def garbage() -> None:
        srv.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(65536)
                conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")

    t = threading.Thread(target=garbage, daemon=True)
    t.start()
    m = Metrics()
    try:
        _deliver_once(notifier(f"http://127.0.0.1:{srv.getsockname()[1]}/", m, max_attempts=2))
    finally:
        stop.set()
        t.join(5)
        srv.close()
    assert m.get("rackplan_webhook_failures_total", {"reason": "bad_response"}) == 1
    assert m.get("rackplan_webhook_attempts_total", {"result": "error"}) == 2  # retried: it may recover


def test_a_bug_in_delivery_is_counted_and_logged_without_its_message() -> None:
    def broken(url: str, body: bytes, headers: Any, timeout_s: float) -> int:
        raise RuntimeError(f"cannot send {headers['Authorization']}")

    m = Metrics()
    buf = io.StringIO()
    configure("json", "info", stream=buf)
    settings = WebhookSettings(url="http://am.invalid/", headers={"Authorization": TOKEN})
    _deliver_once(WebhookNotifier(settings, m, get_logger("t"), firing_ttl_s=240, post=broken))
    assert m.get("rackplan_webhook_failures_total", {"reason": "internal"}) == 1
    (crashed,) = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert crashed["event"] == "webhook delivery crashed; alerts dropped"
    assert crashed["error"] == "RuntimeError" and "broken" in crashed["where"]
    assert "t0k3n" not in buf.getvalue() and "Traceback" not in buf.getvalue()


def test_a_backlogged_batch_gets_its_ends_at_when_it_is_delivered() -> None:
    """A firing (or unfixable) alert's ``endsAt`` is counted from its delivery, not from when it was queued.

    Rendered at ``notify``, a batch that waited out Alertmanager's outage (retries, batches ahead of it)
    reached it with an ``endsAt`` already past: Alertmanager read the firing alert as resolved (a resolved
    notification, then a new firing one at the next resend) and never showed the unfixable report.  A
    resolved alert keeps ``endsAt`` = when it resolved, however late it goes out.  Found by a hunt."""
    clock = [0.0]
    bodies: list[Any] = []

    def post(url: str, body: bytes, headers: Any, timeout_s: float) -> int:
        if not bodies and clock[0] == 0.0:  # Alertmanager is down until t=1000
            clock[0] = 1000.0
            return 503
        bodies.append(json.loads(body))
        return 200

    s = WebhookSettings(url="http://am:9093/api/v2/alerts", backoff_initial_s=0.01, backoff_max_s=0.01)
    n = WebhookNotifier(
        s, Metrics(), get_logger("t"), firing_ttl_s=240, post=post, rng=lambda: 1.0, clock=lambda: clock[0]
    )
    unfix = AlertEvent("consumer/u", UNFIXABLE, 1, 1, 1, 0.25, "y", 0.0, 0.0)
    n.notify([event(at=0.0, started=0.0)], [], now=0.0)  # retried until Alertmanager is back
    n.notify([event(key="consumer/b", at=0.0, started=0.0), unfix, event(RESOLVED, key="consumer/r", at=0.0)], [], now=0.0)  # fmt: skip
    assert n.wait_idle(5)
    n.close(1)
    ends = {a["labels"]["group"]: a["endsAt"] for body in bodies for a in body}
    assert ends == {
        "payments": rfc3339(1240.0), "b": rfc3339(1240.0), "u": rfc3339(1240.0), "r": rfc3339(0.0)
    }  # fmt: skip


def test_the_unfixable_summary_quotes_the_floor_no_assignment_beats() -> None:
    """The report says no assignment fixes the group; the figure behind that is the floor (partitions no
    member's rack reads locally, balance ignored), which its cost (``; cross-rack reads cost``) is of too.
    Its summary quoted the plan of record instead, "even its best plan reads 50.0%" where the best
    assignment reads 33.3%: the plan's balance (or its assignor) is not what makes the group unfixable.
    Found by a hunt."""
    from rackplan.agent.alerts.rules import AlertState
    from rackplan.agent.protocol.plans import Locality
    from rackplan.agent.settings.sections import AlertSettings

    rules = AlertState(AlertSettings(for_s=0))
    plan, floor = Locality(3, 6), Locality(2, 6)
    ev = rules.evaluate("consumer/g", plan, plan, plan, "", 0.0, best=floor)
    assert ev is not None and ev.status == UNFIXABLE
    alert = alertmanager_alert(ev, WebhookSettings(url="http://am/"), now=0.0, firing_ttl_s=240)
    summary = alert["annotations"]["summary"]
    assert summary.startswith(
        "consumer group g: even the best assignment reads 33.3% of partitions cross-rack"
    )
    assert "(threshold 25.0%, now 50.0%, its plan 50.0%)" in summary
    assert alert["annotations"]["cross_rack_fraction_floor"] == "0.333333"
    assert alert["annotations"]["cross_rack_fraction_planned"] == "0.500000"
