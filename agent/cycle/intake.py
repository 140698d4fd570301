"""Registrations in: the registrations topic read and applied, entries expired, the file, topic and discovered
groups merged into the registrations the cycle plans (noting what was added, changed and removed)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ..core.ports import AdminPort
from ..groups.membership import GroupDescriber
from ..groups.registry import decode_registration, merge_registrations, settings_group_refusal
from ..kafka.exceptions import PublishError
from ..kafka.tail import RawRecord, TopicTail
from ..metrics import declared as metric
from ..protocol.registrations import RegistrationRecordError
from ..state.term import CycleReport, Term, Wiring
from .cycle_metrics import forget_metrics


class Intake:
    """The registrations topic's reader (None: no such topic, the settings file is all there is)."""

    def __init__(self, w: Wiring, admin: AdminPort) -> None:
        s = w.settings
        self.w = w
        self.describer = GroupDescriber(
            admin, s.membership, w.metrics, w.log, request_timeout_s=s.metadata.request_timeout_s
        )
        #: consumer groups whose members are discovered (DescribeGroups), not registered
        self.discovery = sorted(g["group_id"] for g in s.consumer_groups if not g.get("members"))
        #: shared secret of signed registrations (registrations.secret_file), None: unsigned accepted
        self.secret = w.secret
        self.tail: TopicTail | None = None

    def open(self, client_config: dict[str, Any], term: Term) -> None:
        """Read the registrations topic (to its end, within ``io_timeout_s``); from then on, what is new."""
        s = self.w.settings
        self.tail = TopicTail(client_config, s.registrations_topic, s.io_timeout_s)
        self.read(term, s.io_timeout_s)
        self.w.log.info(
            "registrations topic replayed",
            topic=s.registrations_topic,
            entries=len(term.store),
            complete=term.reg_synced,
        )

    def close(self) -> None:
        if self.tail is not None:
            self.tail.close()
            self.tail = None

    def read(self, term: Term, timeout_s: float) -> None:
        """Apply new records of the registrations topic, then expire stale entries."""
        w = self.w
        if self.tail is not None:
            self.apply_records(term, timeout_s)
            check_s = min(timeout_s, max(1.0, w.settings.poll_interval_s))
            if term.store.due(int(w.clock() * 1000)) and not self.caught_up(term, check_s):
                # Silence is not absence: a partition whose leader is away (a broker restarting) delivers
                # nothing, and expiring its members would plan without them while they still read.
                w.metrics.inc(metric.REGISTRATION_READ_FAILURES_TOTAL)
                w.log.warning(
                    "registrations topic not confirmed read to its end; nothing expires this cycle",
                    due=term.store.due(int(w.clock() * 1000)),
                )
                return
        expired = term.store.expire(int(w.clock() * 1000))
        if expired:
            w.metrics.inc(metric.REGISTRATIONS_EXPIRED_TOTAL, by=len(expired))
            w.log.info("registrations expired", keys=expired, ttl_s=w.settings.registrations.ttl_s)

    def caught_up(self, term: Term, timeout_s: float) -> bool:
        """Read the registrations topic to its end offsets now; False when that could not be confirmed."""
        assert self.tail is not None
        try:
            raw, complete = self.tail.read_available(timeout_s)
        except PublishError as e:
            self.w.log.info("registrations end offsets unknown", error=str(e))
            return False
        self.apply_raw(term, raw)
        return complete

    def apply_records(self, term: Term, timeout_s: float) -> None:
        assert self.tail is not None
        w = self.w
        complete = True
        try:
            if term.reg_synced:  # the cheap read: what the consumer already fetched
                raw, errors = self.tail.read_new()
                for err in errors:
                    w.log.info("registrations consumer", error=err)
            else:  # read to the end offsets, so that nothing is tombstoned for a record not read yet
                raw, complete = self.tail.read_available(timeout_s)
        except PublishError as e:
            w.metrics.inc(metric.REGISTRATION_READ_FAILURES_TOTAL)
            w.log.warning("registrations topic not readable this cycle", error=str(e))
            return
        self.apply_raw(term, raw)
        if complete:
            term.reg_synced = True
        else:
            w.metrics.inc(metric.REGISTRATION_READ_FAILURES_TOTAL)
            w.log.warning(
                "registrations topic not read to its end in time; the rest follows next cycle",
                timeout_s=timeout_s,
            )

    def apply_raw(self, term: Term, raw: list[RawRecord]) -> None:
        w = self.w
        m = w.metrics
        now_ms = int(w.clock() * 1000)
        skew_ms = int(w.settings.registrations.max_clock_skew_s * 1000)
        for r in raw:
            try:
                entry = decode_registration(
                    r.key, r.value, r.timestamp_ms, secret=self.secret, max_skew_ms=skew_ms
                )
                key = r.key.decode("utf-8") if r.key is not None else ""
                refusal = None if entry is None else settings_group_refusal(w.settings, entry)
                if refusal is not None:
                    raise RegistrationRecordError("settings_group", refusal)
            except RegistrationRecordError as e:
                m.inc(metric.REGISTRATION_RECORDS_TOTAL, {"result": "skipped"})
                m.inc(metric.REGISTRATION_RECORDS_SKIPPED_TOTAL, {"reason": e.reason})
                m.inc(metric.RECORDS_SKIPPED_TOTAL, {"topic": "registrations", "reason": e.reason})
                w.log.warning(
                    "registration record skipped", reason=str(e), partition=r.partition, offset=r.offset
                )
                continue
            if entry is not None and entry.timestamp_ms > now_ms + skew_ms:
                w.log.warning(
                    "registration dated in the future beyond the clock skew; its TTL counts from now",
                    key=key,
                    ahead_s=round((entry.timestamp_ms - now_ms) / 1000, 1),
                )
            term.store.apply(key, entry, now_ms)
            m.inc(metric.REGISTRATION_RECORDS_TOTAL, {"result": "tombstone" if entry is None else "applied"})

    def refresh(self, term: Term, report: CycleReport, describe: Iterable[str]) -> None:
        """Describe ``describe`` groups, merge file + topic + discovered; note what was added, changed, removed."""
        w = self.w
        wanted = sorted(set(describe))
        on = bool(wanted) and self.describer.enabled
        term.real_groups = self.describer.describe(wanted) if on else {}
        on = on and self.describer.enabled  # unsupported: judged on plans of record, as documented
        term.undescribed = frozenset(wanted).difference(term.real_groups) if on else frozenset()
        discovered = {g: term.real_groups[g] for g in self.discovery if g in term.real_groups}
        merge_key = (term.store.version, tuple(sorted(discovered.items())))
        if merge_key == term.merge_key:
            return
        term.merge_key = merge_key
        merged = merge_registrations(w.settings, term.store.entries(), discovered)
        for key, reason in sorted(merged.problems.items()):
            g = term.group(key)
            if g.problem_logged != reason:
                g.problem_logged = reason
                w.log.warning("registration not usable", key=key, reason=reason)
        for g in term.groups.values():
            if g.key not in merged.problems:
                g.problem_logged = None
        term.problems = merged.problems
        old = term.registered()
        new = {r.key: r for r in merged.registrations}
        report.registered = sorted(k for k in new if k not in old)
        report.reregistered = sorted(k for k in new if k in old and old[k].fingerprint != new[k].fingerprint)
        report.unregistered = sorted(k for k in old if k not in new)
        term.regs = merged.registrations
        for key in report.registered:
            term.group(key).retry = term.group(key).initial_pending = True
        for key in report.reregistered:
            term.group(key).retry = True
        now = w.clock()
        for key in report.unregistered:
            g = term.group(key)
            g.retry = g.initial_pending = False
            ev = term.alerts.drop(key, "group unregistered", now)
            if ev is not None:
                report.alerts.append(ev)
            if term.book.latest(key) is not None:
                g.tombstone_pending = True
            forget_metrics(w.metrics, key)
            g.forget_planning()
        if report.registered or report.reregistered or report.unregistered:
            w.log.info(
                "registrations changed",
                added=report.registered,
                changed=report.reregistered,
                removed=report.unregistered,
            )
        counts: dict[tuple[tuple[str, str], ...], float] = {}
        for r in term.regs:
            lab = (("kind", r.kind), ("source", r.source))
            counts[lab] = counts.get(lab, 0) + 1
        w.metrics.replace(metric.REGISTRATIONS, {}, counts)
