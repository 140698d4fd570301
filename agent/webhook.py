"""Locality alerts to Alertmanager's API v2 (``POST /api/v2/alerts``), off the poll loop.

Format: the body is a JSON array of *postable alerts*, as Alertmanager's
OpenAPI ``postableAlerts`` defines them (labels, annotations, startsAt,
endsAt, generatorURL).  Alertmanager identifies an alert by its labels
(``alertname``, ``kind``, ``group`` plus the configured extra labels), so the
firing and the resolved alert of a group carry the same labels:

- firing: ``startsAt`` = when it fired, ``endsAt`` = now + 4 × the resend
  interval.  Alertmanager expects clients to send active alerts again and
  again; a firing alert is re-sent every ``resend_interval_s`` while it
  fires, so it stays active only as long as the agent keeps saying so.
- resolved: the same labels with ``endsAt`` = when it resolved.

Delivery never blocks the poll loop: :meth:`WebhookNotifier.notify` only
queues a batch; one worker thread posts it with a per-request timeout,
retrying connection errors, timeouts, 408, 429 and 5xx with bounded
exponential backoff and jitter.  Other 4xx answers are not retried.  A batch
given up on (or dropped because the queue is full) is counted in
``rackplan_webhook_failures_total{reason}``; every request in
``rackplan_webhook_attempts_total{result}``.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from .alerts import RESOLVED, AlertEvent
from .metadata import jittered_delays
from .metrics import Metrics
from .settings import WebhookSettings, redact_url

ALERTNAME = "RackplanCrossRackLocality"
_KIND_TITLES = {"consumer": "consumer group", "streams": "Streams app"}

#: what a post returns: the HTTP status; raising means no answer (timeout, connection)
Post = Callable[[str, bytes, Mapping[str, str], float], int]


class WebhookError(Exception):
    """One failed attempt; ``reason`` is the metric label, ``retry`` whether trying again can help."""

    def __init__(self, reason: str, detail: str, retry: bool) -> None:
        super().__init__(detail)
        self.reason = reason
        self.retry = retry


def rfc3339(ts: float) -> str:
    """UTC with millisecond precision, as Alertmanager prints its own times."""
    t = dt.datetime.fromtimestamp(ts, tz=dt.UTC)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _pct(f: float | None) -> str:
    return "-" if f is None else f"{f:.1%}"


def alertmanager_alert(
    event: AlertEvent, settings: WebhookSettings, now: float, firing_ttl_s: float
) -> dict[str, Any]:
    """One postable alert (Alertmanager API v2) for a firing or resolved event."""
    labels = {**settings.labels, "alertname": ALERTNAME, "kind": event.kind, "group": event.name}
    what = f"{_KIND_TITLES.get(event.kind, event.kind)} {event.name}"
    summary = (
        f"{what}: {_pct(event.current)} of partitions read cross-rack "
        f"(threshold {_pct(event.threshold)}, before {_pct(event.previous)})"
    )
    annotations = {
        "summary": summary,
        "description": event.reason,
        "cross_rack_fraction_before": f"{event.previous:.6f}",
        "cross_rack_fraction_now": f"{event.current:.6f}",
        "threshold": f"{event.threshold:.6f}",
    }
    if event.planned is not None:
        annotations["cross_rack_fraction_planned"] = f"{event.planned:.6f}"
    alert: dict[str, Any] = {
        "labels": dict(sorted(labels.items())),
        "annotations": dict(sorted(annotations.items())),
        "startsAt": rfc3339(event.started_at),
        "endsAt": rfc3339(event.at if event.status == RESOLVED else now + firing_ttl_s),
    }
    if settings.generator_url:
        alert["generatorURL"] = settings.generator_url
    return alert


def urllib_post(url: str, body: bytes, headers: Mapping[str, str], timeout_s: float) -> int:
    """POST with the standard library; the status of any answer, an exception when there is none."""
    req = urllib.request.Request(url, data=body, method="POST", headers=dict(headers))
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            resp.read()
            return int(resp.status)
    except urllib.error.HTTPError as e:
        e.close()
        return int(e.code)


def _attempt(post: Post, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float) -> None:
    try:
        status = post(url, body, headers, timeout_s)
    except TimeoutError as e:
        raise WebhookError("timeout", f"no answer within {timeout_s}s: {e}", retry=True) from e
    except urllib.error.URLError as e:
        if isinstance(e.reason, TimeoutError):
            raise WebhookError("timeout", f"no answer within {timeout_s}s", retry=True) from e
        raise WebhookError("connection", str(e.reason), retry=True) from e
    except OSError as e:
        raise WebhookError("connection", str(e), retry=True) from e
    if 200 <= status < 300:
        return
    if status >= 500 or status in (408, 429):
        raise WebhookError(f"http_{status // 100}xx", f"HTTP {status}", retry=True)
    raise WebhookError(f"http_{status // 100}xx", f"HTTP {status} (not retried)", retry=False)


class WebhookNotifier:
    """Queues alert batches and posts them from one worker thread."""

    def __init__(
        self,
        settings: WebhookSettings,
        metrics: Metrics,
        log: Any,
        *,
        firing_ttl_s: float,
        post: Post = urllib_post,
        rng: Callable[[], float] = random.random,
    ) -> None:
        if settings.url is None:
            raise ValueError("webhook.url is not set")
        self.settings = settings
        self.url = settings.url
        self.metrics = metrics
        self.log = log
        self.firing_ttl_s = firing_ttl_s
        self._post = post
        self._rng = rng
        self._queue: collections.deque[list[dict[str, Any]]] = collections.deque()
        self._cond = threading.Condition()
        self._busy = False
        self._stop = threading.Event()
        #: set at shutdown: retries no longer wait out their backoff
        self._hurry = threading.Event()
        self._last_sent: dict[str, float] = {}
        self._thread = threading.Thread(target=self._run, name="rackplan-webhook", daemon=True)
        self._thread.start()

    # ---- the loop's side: never blocks --------------------------------------------

    def notify(self, events: list[AlertEvent], firing: list[AlertEvent], now: float) -> int:
        """Queue this cycle's events and the firing alerts due for a resend; returns alerts queued."""
        batch: list[dict[str, Any]] = []
        sent: set[str] = set()
        for ev in events:
            batch.append(alertmanager_alert(ev, self.settings, now, self.firing_ttl_s))
            sent.add(ev.key)
            if ev.status == RESOLVED:
                self._last_sent.pop(ev.key, None)
            else:
                self._last_sent[ev.key] = now
        for ev in firing:
            if ev.key in sent or now - self._last_sent.get(ev.key, -1e18) < self.settings.resend_interval_s:
                continue
            batch.append(alertmanager_alert(ev, self.settings, now, self.firing_ttl_s))
            self._last_sent[ev.key] = now
        if batch:
            self._enqueue(batch)
        return len(batch)

    def _enqueue(self, batch: list[dict[str, Any]]) -> None:
        with self._cond:
            if len(self._queue) >= self.settings.queue_size:
                dropped = self._queue.popleft()
                self.metrics.inc("rackplan_webhook_failures_total", {"reason": "queue_full"})
                self.log.error("webhook queue full; oldest alert batch dropped", alerts=len(dropped))
            self._queue.append(batch)
            self.metrics.set("rackplan_webhook_queue_batches", len(self._queue))
            self._cond.notify_all()

    # ---- the worker ---------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stop.is_set():
                    self._cond.wait()
                if not self._queue:
                    return
                batch = self._queue.popleft()
                self._busy = True
                self.metrics.set("rackplan_webhook_queue_batches", len(self._queue))
            try:
                self._deliver(batch)
            except Exception as e:  # a bug here must not kill the worker
                self.log.error("webhook delivery crashed", error=repr(e), exc_info=True)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _deliver(self, batch: list[dict[str, Any]]) -> bool:
        s = self.settings
        body = json.dumps(batch, separators=(",", ":"), sort_keys=True).encode()
        headers = {"Content-Type": "application/json", "User-Agent": "rackplan-agent", **s.headers}
        delays = jittered_delays(s.max_attempts, s.backoff_initial_s, s.backoff_max_s, self._rng)
        for attempt in range(s.max_attempts):
            try:
                _attempt(self._post, self.url, body, headers, s.timeout_s)
            except WebhookError as e:
                self.metrics.inc("rackplan_webhook_attempts_total", {"result": "error"})
                last = attempt == len(delays) or not e.retry or self._stop.is_set()
                if last:
                    self.metrics.inc("rackplan_webhook_failures_total", {"reason": e.reason})
                    self.log.error(
                        "webhook delivery failed; alerts dropped",
                        url=redact_url(self.url),
                        alerts=len(batch),
                        attempts=attempt + 1,
                        reason=e.reason,
                        error=str(e),
                    )
                    return False
                self.log.warning(
                    "webhook attempt failed; retrying",
                    url=redact_url(self.url),
                    attempt=attempt + 1,
                    delay_s=round(delays[attempt], 3),
                    reason=e.reason,
                    error=str(e),
                )
                self._hurry.wait(delays[attempt])
                continue
            self.metrics.inc("rackplan_webhook_attempts_total", {"result": "ok"})
            self.log.debug("webhook delivered", alerts=len(batch), attempts=attempt + 1)
            return True
        return False  # pragma: no cover

    # ---- shutdown -----------------------------------------------------------------

    def pending(self) -> int:
        with self._cond:
            return len(self._queue) + (1 if self._busy else 0)

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until every queued batch was delivered or given up on; False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._queue or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self, timeout_s: float) -> None:
        """Deliver what is queued within ``timeout_s`` (no backoff waits), then stop the worker."""
        self._hurry.set()
        if not self.wait_idle(timeout_s):
            self.log.error("webhook: alert batches left undelivered at shutdown", batches=self.pending())
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join(timeout_s)
