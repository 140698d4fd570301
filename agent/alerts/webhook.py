"""Locality alerts to Alertmanager's API v2 (``POST /api/v2/alerts``), off the poll loop.

Format: the body is a JSON array of *postable alerts*, as Alertmanager's
OpenAPI ``postableAlerts`` defines them (labels, annotations, startsAt,
endsAt, generatorURL).  Alertmanager identifies an alert by its labels
(``alertname``, ``kind``, ``group`` plus the configured extra labels), so the
firing and the resolved alert of a group carry the same labels:

- firing: ``startsAt`` = when it fired, ``endsAt`` = 4 × the resend
  interval after the request that carries it (a batch that waited in the queue or
  retried is not sent with an ``endsAt`` already past, which Alertmanager reads as
  resolved).  Alertmanager expects clients to send active alerts again and
  again; a firing alert is re-sent every ``resend_interval_s`` while it
  fires, so it stays active only as long as the agent keeps saying so.
- resolved: the same labels with ``endsAt`` = when it resolved.

Every alert carries a ``severity`` label and a ``runbook_url`` annotation;
``generatorURL`` is the group's own ``/v1/groups/<kind>/<name>`` view.  An
*unfixable* report is sent once and never re-sent (it expires at ``endsAt``).

Transport (:mod:`.transport`): redirects are never followed (a 3xx is a failed
delivery, not retried: urllib would turn the POST into a GET and send
``Authorization`` to wherever the answer points); ``user:password@`` in the
URL becomes a Basic ``Authorization`` header; ``https://`` uses ``webhook.tls``;
a request gets ``webhook.timeout_s`` for the whole of it, and at most 64 KiB of
its answer's body are read.

Delivery never blocks the poll loop: :meth:`WebhookNotifier.notify` only
queues a batch; one worker thread posts it with a per-request deadline,
retrying connection errors, timeouts, 408, 429 and 5xx with bounded
exponential backoff and jitter.  Other 4xx answers are not retried.  A batch
given up on (or dropped because the queue is full) is counted in
``rackplan_webhook_failures_total{reason}``; every request in
``rackplan_webhook_attempts_total{result}``.  Header values are secrets: the
settings refuse one HTTP cannot carry (CR, LF), a header file is checked at
every delivery, and no failure is logged with an exception's message or
traceback that could quote one (:mod:`rackplan.agent.settings.headers`).
"""

from __future__ import annotations

import collections
import datetime as dt
import random
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..cluster.metadata import jittered_delays
from ..core.errors import AgentError
from ..core.redact import redact_url
from ..metrics import declared as metric
from ..metrics.registry import Metrics
from ..protocol.alerts import (
    ALERTNAME,
    FIRING,
    RESOLVED,
    UNFIXABLE,
    UNFIXABLE_ALERTNAME,
    AlertEvent,
    encode_webhook_body,
)
from ..protocol.plans import split_key
from ..settings.headers import HeaderValueError, read_header_file
from ..settings.sections import HttpSettings, WebhookSettings
from .transport import Post, WebhookError, split_credentials, urllib_poster
from .transport import _attempt as _attempt  # the classification, as tests and older callers name it

__all__ = [
    "ALERTNAME",
    "UNFIXABLE_ALERTNAME",
    "Post",
    "WebhookError",
    "WebhookNotifier",
    "alertmanager_alert",
    "rfc3339",
]
_KIND_TITLES = {"consumer": "consumer group", "streams": "Streams app"}

#: why a batch is dropped before or around its requests (the requests' own reasons: :func:`_attempt`)
BATCH_FAILURE_REASONS = ("queue_full", "header_file", "header_value", "internal")


class HeaderFileError(AgentError):
    """A header file whose content cannot be sent; ``problem`` names why, never the value."""

    def __init__(self, header: str, path: Path, problem: str) -> None:
        super().__init__(f"{header}: {problem}")
        self.header = header
        self.path = path
        self.problem = problem


def _where(e: BaseException) -> str:
    """``file.py:123 in function`` of the innermost frame: where a bug is, without its message."""
    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return "?"
    code = tb.tb_frame.f_code
    return f"{Path(code.co_filename).name}:{tb.tb_lineno} in {code.co_name}"


def rfc3339(ts: float) -> str:
    """UTC with millisecond precision, as Alertmanager prints its own times."""
    t = dt.datetime.fromtimestamp(ts, tz=dt.UTC)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _pct(f: float | None) -> str:
    return "-" if f is None else f"{f:.1%}"


def group_view_url(agent_url: str, key: str) -> str:
    """The agent's ``/v1`` view of one group: where an alert's ``generatorURL`` points."""
    kind, name = split_key(key)
    return f"{agent_url.rstrip('/')}/v1/groups/{urllib.parse.quote(kind, safe='')}/{urllib.parse.quote(name, safe='')}"


def default_agent_url(http: HttpSettings) -> str:
    """The agent's own HTTP address; a wildcard bind address is replaced by this host's name."""
    host = http.host
    if host in ("", "0.0.0.0", "::"):
        host = socket.getfqdn()
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{http.port}"


def with_cluster_label(settings: WebhookSettings, cluster: str | None) -> WebhookSettings:
    """The webhook settings with ``cluster=<cluster_name>`` among the extra labels.

    Alertmanager routes and silences by label; the agent's own metrics carry
    ``cluster`` once ``cluster_name`` is set, so its alerts do too.  A
    ``cluster`` label set explicitly in ``webhook.labels`` wins.
    """
    if not cluster or "cluster" in settings.labels:
        return settings
    return settings.model_copy(update={"labels": {**settings.labels, "cluster": cluster}})


def _summary(event: AlertEvent) -> str:
    """The alert's one line; an unfixable report quotes the floor no assignment beats (the plan's balance or
    assignor may cost more: it is quoted beside)."""
    what = f"{_KIND_TITLES.get(event.kind, event.kind)} {event.name}"
    if event.status == UNFIXABLE:
        return (
            f"{what}: even the best assignment reads {_pct(event.planned if event.best is None else event.best)} "
            f"of partitions cross-rack (threshold {_pct(event.threshold)}, now {_pct(event.current)}, "
            f"its plan {_pct(event.planned)}); no assignment fixes it, replica placement or member racks must change"
        )
    return (
        f"{what}: {_pct(event.current)} of partitions read cross-rack "
        f"(threshold {_pct(event.threshold)}, before {_pct(event.previous)})"
    )


def alertmanager_alert(
    event: AlertEvent,
    settings: WebhookSettings,
    now: float,
    firing_ttl_s: float,
    agent_url: str | None = None,
) -> dict[str, Any]:
    """One postable alert (Alertmanager API v2) for a firing, resolved or unfixable event.

    ``generatorURL`` is the group's ``/v1/groups/<kind>/<name>`` view at
    ``webhook.agent_url``; else the static ``webhook.generator_url``; else the
    view at ``agent_url`` (the agent's own HTTP address).
    """
    labels = {
        **settings.labels,
        "alertname": event.alertname,
        "kind": event.kind,
        "group": event.name,
        "severity": event.severity,
    }
    annotations = {
        "summary": _summary(event),
        "description": event.reason,
        "cross_rack_fraction_before": f"{event.previous:.6f}",
        "cross_rack_fraction_now": f"{event.current:.6f}",
        "threshold": f"{event.threshold:.6f}",
    }
    if event.runbook_url:
        annotations["runbook_url"] = event.runbook_url
    if event.planned is not None:
        annotations["cross_rack_fraction_planned"] = f"{event.planned:.6f}"
    if event.best is not None:
        annotations["cross_rack_fraction_floor"] = f"{event.best:.6f}"
    if (dollars := event.cross_rack_dollars_per_month) is not None:  # measured traffic (docs/agent.md)
        annotations["summary"] += f"; cross-rack reads cost ${dollars:,.2f} a month"
        annotations["cross_rack_dollars_per_month"] = f"{dollars:.2f}"
    alert: dict[str, Any] = {
        "labels": dict(sorted(labels.items())),
        "annotations": dict(sorted(annotations.items())),
        "startsAt": rfc3339(event.started_at),
        "endsAt": rfc3339(event.at if event.status == RESOLVED else now + firing_ttl_s),
    }
    if settings.agent_url:
        alert["generatorURL"] = group_view_url(settings.agent_url, event.key)
    elif settings.generator_url:  # a static link, as before webhook.agent_url existed
        alert["generatorURL"] = settings.generator_url
    elif agent_url:
        alert["generatorURL"] = group_view_url(agent_url, event.key)
    return alert


class WebhookNotifier:
    """Queues alert batches and posts them from one worker thread."""

    def __init__(
        self,
        settings: WebhookSettings,
        metrics: Metrics,
        log: Any,
        *,
        firing_ttl_s: float,
        post: Post | None = None,
        rng: Callable[[], float] = random.random,
        agent_url: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``post``: how to POST (default: urllib with the TLS settings); ``agent_url``: see :func:`alertmanager_alert`;
        ``clock``: the time of each request, from which a firing or unfixable alert's ``endsAt`` counts."""
        if settings.url is None:
            raise ValueError("webhook.url is not set")
        self.settings = settings
        #: the URL without credentials; they become the Basic Authorization header
        self.url, self._basic_auth = split_credentials(settings.url)
        self.agent_url = agent_url
        self.metrics = metrics
        self.log = log
        self.firing_ttl_s = firing_ttl_s
        self._post = post if post is not None else urllib_poster(settings)
        self._rng = rng
        self._clock = clock
        #: the events of each batch, rendered at each request (:meth:`_body`)
        self._queue: collections.deque[list[AlertEvent]] = collections.deque()
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
        """Queue this cycle's events and the firing alerts due for a resend; returns alerts queued.

        ``now`` schedules the resends; each alert's ``endsAt`` is the delivery's (:meth:`_body`)."""
        batch: list[AlertEvent] = []
        sent: set[str] = set()
        for ev in events:
            batch.append(ev)
            sent.add(ev.key)
            if ev.status == RESOLVED:
                self._last_sent.pop(ev.key, None)
            elif ev.status == FIRING:
                self._last_sent[ev.key] = now
            # unfixable: reported once, never re-sent (it expires at endsAt in Alertmanager)
        for ev in firing:
            if ev.key in sent or now - self._last_sent.get(ev.key, -1e18) < self.settings.resend_interval_s:
                continue
            batch.append(ev)
            self._last_sent[ev.key] = now
        if batch:
            self._enqueue(batch)
        return len(batch)

    def _enqueue(self, batch: list[AlertEvent]) -> None:
        with self._cond:
            if len(self._queue) >= self.settings.queue_size:
                dropped = self._queue.popleft()
                self.metrics.inc(metric.WEBHOOK_FAILURES_TOTAL, {"reason": "queue_full"})
                self.log.error("webhook queue full; oldest alert batch dropped", alerts=len(dropped))
            self._queue.append(batch)
            self.metrics.set(metric.WEBHOOK_QUEUE_BATCHES, len(self._queue))
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
                self.metrics.set(metric.WEBHOOK_QUEUE_BATCHES, len(self._queue))
            try:
                self._deliver(batch)
            except Exception as e:  # a bug here must not kill the worker, nor drop alerts uncounted
                self.metrics.inc(metric.WEBHOOK_FAILURES_TOTAL, {"reason": "internal"})
                # Neither the message nor a traceback: either may quote a header value (a secret).
                self.log.error(
                    "webhook delivery crashed; alerts dropped",
                    alerts=len(batch),
                    error=type(e).__name__,
                    where=_where(e),
                )
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _body(self, batch: list[AlertEvent]) -> bytes:
        """The batch as this request sends it: a firing or unfixable alert's ``endsAt`` counts from now."""
        now = self._clock()
        return encode_webhook_body(
            [alertmanager_alert(ev, self.settings, now, self.firing_ttl_s, self.agent_url) for ev in batch]
        )

    def _deliver(self, batch: list[AlertEvent]) -> bool:
        s = self.settings
        try:
            headers = self._headers()
        except OSError as e:
            self.metrics.inc(metric.WEBHOOK_FAILURES_TOTAL, {"reason": "header_file"})
            self.log.error("webhook header file unreadable; alerts dropped", alerts=len(batch), error=str(e))
            return False
        except HeaderFileError as e:  # rotated to a value HTTP cannot carry: named, never shown
            self.metrics.inc(metric.WEBHOOK_FAILURES_TOTAL, {"reason": "header_value"})
            self.log.error(
                "webhook header file holds an unsendable value; alerts dropped",
                alerts=len(batch),
                header=e.header,
                path=str(e.path),
                problem=e.problem,
            )
            return False
        delays = jittered_delays(s.max_attempts, s.backoff_initial_s, s.backoff_max_s, self._rng)
        for attempt in range(s.max_attempts):
            try:
                _attempt(self._post, self.url, self._body(batch), headers, s.timeout_s)
            except WebhookError as e:
                self.metrics.inc(metric.WEBHOOK_ATTEMPTS_TOTAL, {"result": "error"})
                last = attempt == len(delays) or not e.retry or self._stop.is_set()
                if last:
                    self.metrics.inc(metric.WEBHOOK_FAILURES_TOTAL, {"reason": e.reason})
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
            self.metrics.inc(metric.WEBHOOK_ATTEMPTS_TOTAL, {"result": "ok"})
            self.log.debug("webhook delivered", alerts=len(batch), attempts=attempt + 1)
            return True
        return False  # pragma: no cover

    def _headers(self) -> dict[str, str]:
        """Content type, credentials of the URL, ``headers``, then ``header_files`` (read now: rotation)."""
        s = self.settings
        headers = {"Content-Type": "application/json", "User-Agent": "rackplan-agent"}
        if self._basic_auth is not None:
            headers["Authorization"] = self._basic_auth
        headers.update(s.headers)
        for name, path in sorted(s.header_files.items()):
            try:
                headers[name] = read_header_file(path)
            except HeaderValueError as e:
                raise HeaderFileError(name, path, str(e)) from None
        return headers

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
        """Deliver what is queued within ``timeout_s`` in all (no backoff waits), then stop the worker."""
        deadline = time.monotonic() + timeout_s
        self._hurry.set()
        if not self.wait_idle(timeout_s):
            self.log.error("webhook: alert batches left undelivered at shutdown", batches=self.pending())
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join(max(0.0, deadline - time.monotonic()))
