"""The agent's loop: poll, diff, debounce, re-plan what a change touched, publish, alert.

One cycle per ``poll_interval_s``.  A failed poll keeps the last good
snapshot and publishes nothing; a change must be seen in
``change_persist_polls`` consecutive polls before any plan changes; a plan
counts as published only once the brokers confirmed it.  ``stop`` (set by
SIGTERM/SIGINT) ends the loop after the current cycle, and :meth:`Agent.close`
flushes the producer.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .alerts import AlertEvent, AlertState
from .diff import Debounce, SnapshotDiff, diff
from .http import AgentHttpServer
from .kafka_io import PlanTooLargeError, Publisher, PublishError, TopicSpec, ensure_topics, read_back
from .logging import get_logger, kafka_logger
from .metadata import MetadataError, Snapshot, known_racks, poll_snapshot
from .metrics import Metrics
from .planner import PlanSkipped, Registration, current_locality, plan_for, registrations, scope_fingerprint
from .plans import PlanBook, PlanRecord, encode_value, utc_now_iso
from .settings import Settings

PLAN_TOPIC_PARTITIONS = 1
ALERT_TOPIC_PARTITIONS = 1

Racks = dict[int, str | None]


class AgentError(RuntimeError):
    """The agent cannot run (e.g. its plan topic does not exist and cannot be created)."""


@dataclass
class CycleReport:
    """What one cycle did; the demo and the tests read it."""

    ok: bool
    snapshot: Snapshot | None = None
    change: SnapshotDiff | None = None
    pending_polls: int = 0
    confirmed: bool = False
    published: list[PlanRecord] = field(default_factory=list)
    tombstoned: list[str] = field(default_factory=list)
    alerts: list[AlertEvent] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    error: str = ""
    duration_s: float = 0.0


def topic_specs(settings: Settings) -> list[TopicSpec]:
    compact = {"cleanup.policy": "compact", "max.message.bytes": str(settings.plan_max_message_bytes)}
    return [
        TopicSpec(settings.plan_topic, PLAN_TOPIC_PARTITIONS, compact),
        TopicSpec(settings.alerts_topic, ALERT_TOPIC_PARTITIONS, {"cleanup.policy": "delete"}),
    ]


class Agent:
    def __init__(
        self,
        settings: Settings,
        *,
        create_missing_topics: Callable[[list[TopicSpec]], None] | None = None,
        clock: Callable[[], float] = time.time,
        on_cycle: Callable[[CycleReport], None] | None = None,
        serve_http: bool = False,
    ) -> None:
        """``create_missing_topics`` creates topics the brokers would not (the embedded cluster).

        ``serve_http``: run the HTTP server of ``settings.http`` while :meth:`run` runs.
        """
        from confluent_kafka.admin import AdminClient

        self.settings = settings
        self.log = get_logger("rackplan.agent")
        self.client_config = settings.kafka.client_config()
        admin_config: dict[str, Any] = {**self.client_config, "logger": kafka_logger()}
        self.admin = AdminClient(admin_config)
        self.create_missing_topics = create_missing_topics
        self.clock = clock
        self.on_cycle = on_cycle
        self.stop = threading.Event()
        self.book = PlanBook()
        self.regs: list[Registration] = registrations(settings)
        self.alerts = AlertState(settings.alerts)
        self.publisher: Publisher | None = None
        self.known: dict[int, str] = {}
        self.acted: tuple[Snapshot, Racks] | None = None
        self.last_good: Snapshot | None = None
        self.debounce: Debounce[tuple[Snapshot, Racks]] = Debounce(
            settings.change_persist_polls, lambda a, b: diff(a[0], b[0], a[1], b[1]).empty
        )
        #: keys that must be (re)considered next cycle: failed publishes, skipped registrations
        self._retry: set[str] = set()
        self._skip_logged: dict[str, str] = {}
        #: reasons of plans whose publish failed, reused when they are retried
        self._unpublished_reason: dict[str, str] = {}
        self._pending_tombstones: list[str] = []
        self.ready = False
        self.metrics = Metrics()
        self.serve_http = serve_http
        self.http: AgentHttpServer | None = None
        #: the agent's own topics are not watched: its writes move their leaders and offsets
        self.own_topics = frozenset(
            {settings.plan_topic, settings.alerts_topic, settings.registrations_topic}
        )

    # ---- start-up ---------------------------------------------------------------

    def start(self) -> None:
        """Make sure the topics exist, replay the plan topic, open the producer, tombstone the unregistered."""
        s = self.settings
        timeout = s.metadata.request_timeout_s
        fallback = self.create_missing_topics
        missing = ensure_topics(self.admin, topic_specs(s), timeout, self.log, fallback=fallback is not None)
        if missing and fallback is not None:
            fallback(missing)
            self.log.info("topics created through the embedded cluster", topics=[m.name for m in missing])
            missing = [
                m for m in missing if m.name not in set(self.admin.list_topics(timeout=timeout).topics)
            ]
        if any(m.name == s.plan_topic for m in missing):
            raise AgentError(
                f"plan topic {s.plan_topic!r} does not exist; see the logged command to create it"
            )
        records = read_back(self.client_config, s.plan_topic, s.io_timeout_s, self.log)
        self.book.replay(records)
        self.log.info(
            "plan topic replayed",
            topic=s.plan_topic,
            records=len(records),
            live_plans=len(self.book.live_keys()),
        )
        self.publisher = Publisher(self.client_config, s.plan_max_message_bytes, kafka_logger())
        registered = {r.key for r in self.regs}
        stale = [k for k in self.book.live_keys() if k not in registered]
        if stale:
            self.publisher.publish_many(s.plan_topic, [(k, None) for k in stale], s.io_timeout_s)
            for k in stale:
                self.book.apply(k, None)
            self.log.info("tombstoned plans of unregistered groups", keys=stale)
        self._pending_tombstones = stale
        self._retry = {r.key for r in self.regs}
        for key in self.book.live_keys():
            rec = self.book.latest(key)
            if rec is not None:
                kind, name = key.split("/", 1)
                labels = {"kind": kind, "group": name}
                self.metrics.set("rackplan_cross_rack_partitions", rec.locality_after.cross_rack, labels)
                self.metrics.set("rackplan_cross_rack_ratio", rec.locality_after.fraction, labels)
        self.ready = True
        self.metrics.set("rackplan_ready", 1)

    def _sleep(self, seconds: float) -> None:
        self.stop.wait(seconds)  # a stop request cuts a retry backoff short

    # ---- one cycle --------------------------------------------------------------

    def run_once(self) -> CycleReport:
        t0 = time.monotonic()
        report = self._cycle()
        report.duration_s = time.monotonic() - t0
        m = self.metrics
        m.inc("rackplan_polls_total", {"result": "ok" if report.ok else "failed"})
        m.set("rackplan_poll_duration_seconds", report.duration_s)
        if report.snapshot is not None:
            m.set("rackplan_snapshot_timestamp_seconds", report.snapshot.taken_at)
        if report.confirmed:
            m.inc("rackplan_changes_confirmed_total")
        for rec in report.published:
            kind, name = rec.key.split("/", 1)
            m.inc("rackplan_plans_published_total", {"kind": kind})
            m.set(
                "rackplan_cross_rack_partitions", rec.locality_after.cross_rack, {"kind": kind, "group": name}
            )
            m.set("rackplan_cross_rack_ratio", rec.locality_after.fraction, {"kind": kind, "group": name})
        for ev in report.alerts:
            m.inc("rackplan_alerts_total", {"status": ev.status})
        m.set("rackplan_alerts_firing", len(self.alerts.firing()))
        if self._pending_tombstones:
            report.tombstoned, self._pending_tombstones = self._pending_tombstones, []
        if self.on_cycle is not None:
            self.on_cycle(report)
        return report

    def _cycle(self) -> CycleReport:
        s = self.settings

        def retrying(attempt: int, delay: float, err: MetadataError) -> None:
            self.log.warning(
                "metadata poll failed; retrying", attempt=attempt, delay_s=round(delay, 3), error=str(err)
            )

        try:
            snap = poll_snapshot(
                self.admin, s.metadata, sleep=self._sleep, on_retry=retrying, exclude=self.own_topics
            )
        except MetadataError as e:
            age = None if self.last_good is None else round(self.clock() - self.last_good.taken_at, 3)
            self.log.error(
                "metadata poll failed; keeping the last good snapshot", error=str(e), snapshot_age_s=age
            )
            return CycleReport(ok=False, error=str(e))
        self.known = known_racks(self.known, snap)
        racks = snap.resolve_racks(self.known)
        self.last_good = snap
        report = CycleReport(ok=True, snapshot=snap)
        change: SnapshotDiff | None = None
        previous: tuple[Snapshot, Racks] | None = None
        if self.acted is None:
            self.acted = (snap, racks)
            self.log.info(
                "first snapshot",
                brokers=len(snap.brokers),
                topics=len(snap.topics),
                partitions=snap.partition_count(),
            )
        else:
            d = diff(self.acted[0], snap, self.acted[1], racks)
            confirmed = self.debounce.observe(not d.empty, (snap, racks))
            report.change = None if d.empty else d
            report.pending_polls = self.debounce.pending_polls
            if confirmed is not None:
                previous, self.acted = self.acted, confirmed
                change = d
                report.confirmed = True
                self.log.info("metadata change confirmed", changes=d.counts(), reason=d.reason(limit=5))
            elif not d.empty:
                self.log.info(
                    "metadata change seen; waiting for it to persist",
                    changes=d.counts(),
                    seen_polls=self.debounce.pending_polls,
                    required_polls=self.debounce.polls,
                )
        candidates = [
            r
            for r in self.regs
            if r.key in self._retry or (change is not None and not change.touched_topics.isdisjoint(r.topics))
        ]
        self._retry = set()
        acted_snap, acted_racks = self.acted
        records: list[tuple[PlanRecord, Registration]] = []
        for reg in candidates:
            rec = self._plan(reg, acted_snap, acted_racks, change, report)
            if rec is not None:
                records.append((rec, reg))
        replaced = self._publish(records, report)
        self._evaluate_alerts(records, replaced, change, previous, acted_snap, acted_racks, report)
        return report

    def _plan(
        self,
        reg: Registration,
        snap: Snapshot,
        racks: Racks,
        change: SnapshotDiff | None,
        report: CycleReport,
    ) -> PlanRecord | None:
        last = self.book.latest(reg.key)
        fp = scope_fingerprint(snap, racks, reg.topics, reg.fetch_mode)
        if (
            last is not None
            and last.cluster_fingerprint == fp
            and last.registration_fingerprint == reg.fingerprint
        ):
            return None  # the plan of record still holds
        try:
            result = plan_for(snap, racks, reg, last)
        except Exception as e:  # an assignor bug must not stop the plans of other groups
            report.skipped[reg.key] = str(e) or repr(e)
            self.metrics.inc("rackplan_plan_failures_total")
            if self._skip_logged.get(reg.key) != report.skipped[reg.key]:  # once per distinct reason
                if isinstance(e, PlanSkipped):
                    self.log.warning("plan skipped", key=reg.key, reason=str(e))
                else:
                    self.log.error("planning failed", key=reg.key, error=repr(e), exc_info=True)
                self._skip_logged[reg.key] = report.skipped[reg.key]
            self._retry.add(reg.key)
            return None
        self._skip_logged.pop(reg.key, None)
        if last is None:
            reason = "initial plan"
        elif last.registration_fingerprint != reg.fingerprint:
            reason = "registration changed"
        elif change is not None:
            reason = change.reason(reg.topics, leaders=reg.fetch_mode == "leader") or "cluster changed"
        elif reg.key in self._unpublished_reason:
            reason = self._unpublished_reason[reg.key]
        else:
            reason = "cluster changed while the agent was away"
        return PlanRecord(
            key=reg.key,
            generation=self.book.next_generation(reg.key),
            cluster_fingerprint=fp,
            registration_fingerprint=reg.fingerprint,
            reason=reason,
            created_at=utc_now_iso(self.clock()),
            document=result.document,
            moved=result.moved,
            fetch_mode=reg.fetch_mode,
            locality_before=result.before,
            locality_after=result.after,
        )

    def _publish(
        self, records: list[tuple[PlanRecord, Registration]], report: CycleReport
    ) -> dict[str, PlanRecord | None]:
        """Publish each plan, confirmed; returns the plans of record they replaced."""
        replaced: dict[str, PlanRecord | None] = {}
        if not records:
            return replaced
        assert self.publisher is not None, "start() first"
        s = self.settings
        for rec, _reg in records:
            try:
                self.publisher.publish(s.plan_topic, rec.key, encode_value(rec), s.io_timeout_s)
            except PlanTooLargeError as e:
                self.log.error("plan too large to publish", key=rec.key, error=str(e))
                report.skipped[rec.key] = str(e)
                continue
            except PublishError as e:
                self.log.error("plan not confirmed; will retry", key=rec.key, error=str(e))
                self.metrics.inc("rackplan_publish_failures_total")
                self._retry.add(rec.key)
                self._unpublished_reason[rec.key] = rec.reason
                continue
            self._unpublished_reason.pop(rec.key, None)
            replaced[rec.key] = self.book.latest(rec.key)
            self.book.apply(rec.key, rec)
            report.published.append(rec)
            before = rec.locality_before
            self.log.info(
                "plan published",
                key=rec.key,
                generation=rec.generation,
                moved=rec.moved,
                reason=rec.reason,
                cross_rack_before=None if before is None else before.cross_rack,
                cross_rack_after=rec.locality_after.cross_rack,
                cross_rack_fraction_before=None if before is None else round(before.fraction, 4),
                cross_rack_fraction_after=round(rec.locality_after.fraction, 4),
            )
        return replaced

    def _evaluate_alerts(
        self,
        records: list[tuple[PlanRecord, Registration]],
        replaced: dict[str, PlanRecord | None],
        change: SnapshotDiff | None,
        previous: tuple[Snapshot, Racks] | None,
        snap: Snapshot,
        racks: Racks,
        report: CycleReport,
    ) -> None:
        now = self.clock()
        published = {r.key for r in report.published}
        events: list[AlertEvent] = []
        regs = {r.key: r for r in self.regs}
        # A confirmed change: the group's assignment (its plan before this cycle) under old vs new metadata.
        if change is not None and previous is not None:
            new_plans = {rec.key: rec for rec, _ in records if rec.key in published}
            for reg in self.regs:
                if change.touched_topics.isdisjoint(reg.topics):
                    continue
                rec = new_plans.get(reg.key)
                old = replaced.get(reg.key) if rec is not None else self.book.latest(reg.key)
                if old is None:
                    continue
                before = current_locality(previous[0], previous[1], reg, old)
                now_loc = current_locality(snap, racks, reg, old)
                ev = self.alerts.evaluate(
                    reg.key,
                    before,
                    now_loc,
                    None if rec is None else rec.locality_after,
                    change.reason(reg.topics, limit=5),
                    now,
                )
                if ev is not None:
                    events.append(ev)
        # Firing alerts resolve once the group's plan of record is local enough again.
        for key in self.alerts.firing():
            if key in published or key not in regs:
                continue
            latest = self.book.latest(key)
            if latest is None:
                continue
            loc = current_locality(snap, racks, regs[key], latest)
            ev = self.alerts.evaluate(key, loc, loc, loc, "", now)
            if ev is not None:
                events.append(ev)
        for ev in events:
            report.alerts.append(ev)
            self.log.warning("locality alert", **ev.as_json())
        if events and self.publisher is not None:
            try:
                self.publisher.publish_many(
                    self.settings.alerts_topic,
                    [(ev.key, json.dumps(ev.as_json(), separators=(",", ":")).encode()) for ev in events],
                    self.settings.io_timeout_s,
                )
            except PublishError as e:
                self.log.error("alerts not published", error=str(e))
                self.metrics.inc("rackplan_publish_failures_total")

    # ---- running ----------------------------------------------------------------

    def run(self) -> int:
        """Run until :attr:`stop` is set; returns the process exit code."""
        try:
            if self.serve_http:
                self.http = AgentHttpServer(self, self.settings.http.host, self.settings.http.port)
                self.http.start()
                self.log.info("http serving", host=self.settings.http.host, port=self.http.port)
            self.start()
            while not self.stop.is_set():
                t0 = time.monotonic()
                try:
                    self.run_once()
                except Exception as e:  # keep serving; the next cycle starts from the last good state
                    self.log.error("cycle failed", error=repr(e), exc_info=True)
                self.stop.wait(max(0.0, self.settings.poll_interval_s - (time.monotonic() - t0)))
        finally:
            self.close()
        return 0

    def close(self) -> None:
        if self.http is not None:
            self.http.close()
            self.http = None
        if self.publisher is not None:
            left = self.publisher.flush(self.settings.io_timeout_s)
            if left:
                self.log.error("records left unconfirmed at shutdown", count=left)
            self.publisher = None
        self.log.info("agent stopped")
