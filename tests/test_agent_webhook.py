"""The Alertmanager webhook: API v2 payloads, bounded retries with jitter, failures counted, never blocking."""

from __future__ import annotations

import datetime as dt
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from pydantic import ValidationError

from agent.alerts import FIRING, RESOLVED, AlertEvent
from agent.logging import get_logger
from agent.metrics import Metrics
from agent.settings import Settings, WebhookSettings
from agent.webhook import ALERTNAME, WebhookNotifier, alertmanager_alert, rfc3339


def event(status: str = FIRING, key: str = "consumer/payments", at: float = 1000.0, started: float = 1000.0) -> AlertEvent:  # fmt: skip
    return AlertEvent(key, status, 0.1, 0.5, 0.05, 0.25, "replica racks changed: orders-3", at, started)


class Receiver:
    """A local HTTP server on a free loopback port; ``answers`` are the statuses of the next requests."""

    def __init__(self, answers: list[int] | None = None, default: int = 200, delay_s: float = 0.0) -> None:
        self.answers = list(answers or [])
        self.default = default
        self.delay_s = delay_s
        self.bodies: list[Any] = []
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


def notifier(url: str, metrics: Metrics, **kw: Any) -> WebhookNotifier:
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
    return WebhookNotifier(settings, metrics, get_logger("t"), firing_ttl_s=240, rng=lambda: 1.0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_payload_is_alertmanager_api_v2() -> None:
    s = WebhookSettings(
        url="http://am:9093/api/v2/alerts", labels={"cluster": "prod"}, generator_url="http://x/v1/groups"
    )
    firing = alertmanager_alert(event(), s, now=2000.0, firing_ttl_s=240)
    resolved = alertmanager_alert(event(RESOLVED, at=3000.0), s, now=3000.0, firing_ttl_s=240)
    # The same labels identify the alert in both states; Alertmanager dedupes on them.
    assert firing["labels"] == resolved["labels"] == {
        "alertname": ALERTNAME, "cluster": "prod", "group": "payments", "kind": "consumer"
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
    n = notifier(r.url, Metrics(), resend_interval_s=60)
    fired = event(at=0.0, started=0.0)
    assert n.notify([fired], [fired], now=0.0) == 1
    assert n.notify([], [fired], now=30.0) == 0  # too soon
    assert n.notify([], [fired], now=61.0) == 1  # Alertmanager would otherwise let it expire
    resolved = event(RESOLVED, at=70.0, started=0.0)
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
