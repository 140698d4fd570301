"""Locality alerts: fire when a group's cross-rack fraction crosses a threshold or worsens, resolve on recovery.

Pure state machine per group; the loop sends its events to structlog, the
alerts topic, metrics and the webhook.  Each evaluation puts a group in one of
three conditions, judged against ``planned``, the locality of its plan of
record (the best the agent can do under the current metadata):

- *bad*: its cross-rack fraction is above the threshold while the plan is
  not, or at least ``worsen_delta`` above its baseline (the better-known of
  its fraction before a change and the plan's) with some cross-rack
  partition.  A new plan, or a real assignment that lags behind the plan,
  is something rebalancing fixes: worth a page.
- *unfixable*: above the threshold, and so is the best any assignment can
  do (``best``: partitions no member's rack reads locally; else the plan):
  replica placement or member racks must change, not the assignment.  Reported once,
  as its own event, never re-sent while it stays unfixable.
- *ok*: neither.

Hold-downs (Prometheus' ``for`` and ``keep_firing_for``): a group must be bad
for ``for_s`` before its alert fires (``started_at`` is when it turned bad),
and good again for ``keep_firing_for_s`` before a firing alert resolves; a
group that flips back and forth inside those windows produces no event.  A
group cannot fire again within the cooldown of its last firing.  The loop
re-evaluates every :meth:`AlertState.tracked` group every cycle, so the
hold-downs run out on time without a new change.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass

from ..protocol.alerts import (
    ALERTNAME,
    FIRING,
    RESOLVED,
    UNFIXABLE,
    UNFIXABLE_ALERTNAME,
    AlertEvent,
)
from ..protocol.plans import Locality, PlanKey
from ..settings.sections import AlertSettings

__all__ = [
    "AlertState",
    "runbook_anchor",
]

_OK = "ok"
_BAD = "bad"
#: what float arithmetic may lose in a difference of two fractions (a partition of a billion is 1e-9)
_ROUNDING = 1e-12


@dataclass(slots=True)
class _Pending:
    """A group that turned bad and waits out ``for_s``."""

    since: float
    #: the fraction before it turned bad: the worsening is judged against it
    baseline: float
    reason: str


def runbook_anchor(runbook_url: str, alertname: str) -> str:
    """``docs/runbook.md#rackplancrossracklocality``: the heading's anchor as Markdown renderers make it."""
    return f"{runbook_url}#{alertname.lower()}"


class AlertState:
    def __init__(self, settings: AlertSettings) -> None:
        self.settings = settings
        self._firing: dict[str, AlertEvent] = {}
        #: firing alerts whose group is no longer bad, since when (keep_firing_for_s)
        self._clear_since: dict[str, float] = {}
        #: bad groups waiting out for_s
        self._pending: dict[str, _Pending] = {}
        #: unfixable groups waiting out for_s, since when
        self._unfixable_since: dict[str, float] = {}
        #: unfixable groups reported (once)
        self._unfixable: dict[str, AlertEvent] = {}
        #: reported unfixable groups that no longer are, since when
        self._fixable_since: dict[str, float] = {}
        self._last_fired: dict[str, float] = {}
        #: groups whose firing alert resolved as unfixable: their unfixable report follows, reported or not
        self._report_due: dict[str, None] = {}
        #: firing alerts as they are re-sent: the current locality, reason and price (the loop's, :meth:`hold`)
        self._resend: dict[str, AlertEvent] = {}

    def keep_reports(self, previous: AlertState) -> None:
        """A new leadership term of the same agent: the groups ``previous`` reported unfixable stay reported
        (reported once; every term reported them again), with their clocks; firing alerts start afresh."""
        for key, ev in previous._unfixable.items():
            self._unfixable[key] = ev
            if key in previous._fixable_since:
                self._fixable_since[key] = previous._fixable_since[key]
            if key in previous._report_due:
                self._report_due[key] = None

    def watched(self, key: str) -> bool:
        """Allow/deny patterns match the group id or application id (the part after the slash)."""
        name = PlanKey.split(key).name or key
        s = self.settings
        if any(fnmatch.fnmatchcase(name, p) for p in s.deny):
            return False
        return any(fnmatch.fnmatchcase(name, p) for p in s.allow)

    def firing(self) -> list[str]:
        return sorted(self._firing)

    def firing_events(self) -> list[AlertEvent]:
        """The firing event of every group whose alert fires, by key, with its current values (locality,
        reason, price): what a re-sent alert carries."""
        return [self._resend.get(k, self._firing[k]) for k in sorted(self._firing)]

    def unfixable(self) -> list[str]:
        """Groups reported unfixable (and still so)."""
        return sorted(self._unfixable)

    def tracked(self) -> list[str]:
        """Groups to evaluate every cycle: firing, reported unfixable, or in a hold-down."""
        return sorted({*self._firing, *self._pending, *self._unfixable_since, *self._unfixable})

    def state(self, key: str) -> str:
        """``firing``, ``pending``, ``unfixable`` or ``ok``: what /v1/groups shows."""
        if key in self._firing:
            return FIRING
        if key in self._pending:
            return "pending"
        if key in self._unfixable:
            return UNFIXABLE
        return "pending" if key in self._unfixable_since else _OK  # its unfixable report waits out for_s

    def _condition(
        self, baseline: float, current: Locality, planned: float | None, best: float | None
    ) -> str:
        s = self.settings
        base = baseline if planned is None else max(baseline, planned)
        # "at least worsen_delta": 3/20 - 1/20 is 0.09999999999999999, and 0.1 as a float not quite a tenth
        worse = current.cross_rack > 0 and current.fraction - base >= s.worsen_delta - _ROUNDING
        floor = planned if best is None else best
        if floor is not None and floor > s.cross_rack_threshold:
            # No plan gets under the threshold: only lagging behind the best plan is actionable.
            return _BAD if worse else (UNFIXABLE if current.fraction > s.cross_rack_threshold else _OK)
        return _BAD if worse or current.fraction > s.cross_rack_threshold else _OK

    def _event(self, key: str, status: str, baseline: float, current: float, planned: float | None,
               reason: str, now: float, started: float) -> AlertEvent:  # fmt: skip
        s = self.settings
        severity = s.unfixable_severity if status == UNFIXABLE else s.severity
        name = UNFIXABLE_ALERTNAME if status == UNFIXABLE else ALERTNAME
        return AlertEvent(
            key, status, baseline, current, planned, s.cross_rack_threshold, reason, now, started,
            severity, runbook_anchor(s.runbook_url, name),
        )  # fmt: skip

    def evaluate(
        self,
        key: str,
        previous: Locality,
        current: Locality,
        planned: Locality | None,
        reason: str,
        now: float,
        best: Locality | None = None,
    ) -> AlertEvent | None:
        """Compare a group's locality before and after a change; an event when the alert state flips.

        On the initial state and on re-evaluations (nothing to compare with)
        pass ``previous == current``; a group in a hold-down keeps the baseline
        it had when it turned bad.  ``best``: the floor no assignment beats
        (:func:`rackplan.agent.planning.fixable.best_locality`); without it, ``planned`` is taken
        for the best the group can get.
        """
        if not self.watched(key):
            return None
        planned_f = None if planned is None else planned.fraction
        best_f = None if best is None else best.fraction
        fired = self._firing.get(key)
        pending = self._pending.get(key)
        if fired is not None:
            baseline = fired.previous
        else:
            baseline = previous.fraction if pending is None else pending.baseline
        cond = self._condition(baseline, current, planned_f, best_f)
        self._track_unfixable(key, cond, now)
        if fired is not None:
            return self._while_firing(key, fired, cond, current, planned_f, reason, now)
        if cond == UNFIXABLE:
            self._pending.pop(key, None)
            return self._report_unfixable(key, baseline, current, planned_f, best_f, reason, now)
        if cond == _OK:
            self._pending.pop(key, None)
            return None
        return self._bad(key, pending, previous, current, planned_f, reason, now)

    def _track_unfixable(self, key: str, cond: str, now: float) -> None:
        """The unfixable clocks, whatever else the group does (firing or not): how long it has been unfixable
        (``for_s`` before a report), and how long a reported group has not been (``keep_firing_for_s``
        before it is forgotten)."""
        if cond == UNFIXABLE:
            self._unfixable_since.setdefault(key, now)
            self._fixable_since.pop(key, None)
            return
        self._unfixable_since.pop(key, None)
        if key in self._unfixable:
            cleared = self._fixable_since.setdefault(key, now)
            if now - cleared >= self.settings.keep_firing_for_s:
                self._forget_unfixable(key)

    def _forget_unfixable(self, key: str) -> None:
        for d in (self._unfixable, self._fixable_since, self._report_due):
            d.pop(key, None)

    def _while_firing(self, key: str, fired: AlertEvent, cond: str, current: Locality,
                      planned_f: float | None, reason: str, now: float) -> AlertEvent | None:  # fmt: skip
        """A firing alert: re-sent with the current values; resolved once not bad for ``keep_firing_for_s``."""
        held = self._resend.get(key, fired)
        self._resend[key] = dataclasses.replace(
            held,
            current=current.fraction,
            planned=held.planned if planned_f is None else planned_f,
            reason=reason or held.reason,
        )
        if cond == _BAD:
            self._clear_since.pop(key, None)
            return None
        since = self._clear_since.setdefault(key, now)
        if now - since < self.settings.keep_firing_for_s:
            return None
        for d in (self._firing, self._clear_since, self._resend):
            d.pop(key, None)
        if cond == UNFIXABLE:
            # The unfixable report follows (after for_s of it), even for a group reported before it fired.
            self._report_due[key] = None
            # Said first, whatever changed: a resolution that named only the change read as "fixed".
            why = "no longer actionable: even the best plan is above the threshold"
            reason = f"{why}; {reason}" if reason else why
        return self._event(
            key, RESOLVED, fired.current, current.fraction, planned_f, reason or "locality recovered", now,
            fired.started_at,
        )  # fmt: skip

    def _report_unfixable(self, key: str, baseline: float, current: Locality, planned_f: float | None,
                          best_f: float | None, reason: str, now: float) -> AlertEvent | None:  # fmt: skip
        """Unfixable and not firing: reported once, after ``for_s`` of it (again after a resolution)."""
        if key in self._unfixable and key not in self._report_due:
            return None  # reported once
        since = self._unfixable_since[key]
        if now - since < self.settings.for_s:
            return None
        floor = best_f if best_f is not None else planned_f
        assert floor is not None
        ev = dataclasses.replace(self._event(
            key, UNFIXABLE, baseline, current.fraction, planned_f,
            reason or f"no assignment reads fewer than {floor:.1%} of partitions cross-rack", now, since,
        ), best=floor)  # fmt: skip
        self._unfixable[key] = ev
        self._report_due.pop(key, None)
        return ev

    def _bad(self, key: str, pending: _Pending | None, previous: Locality, current: Locality,
             planned_f: float | None, reason: str, now: float) -> AlertEvent | None:  # fmt: skip
        """Bad and not firing: fires after ``for_s`` of it, outside the cooldown of its last firing."""
        s = self.settings
        if pending is None:
            pending = self._pending[key] = _Pending(now, previous.fraction, reason)
        if now - pending.since < s.for_s:
            return None
        last = self._last_fired.get(key)
        if last is not None and now - last < s.cooldown_s:
            return None
        del self._pending[key]
        event = self._event(
            key, FIRING, pending.baseline, current.fraction, planned_f, pending.reason or reason, now,
            pending.since,
        )  # fmt: skip
        self._firing[key] = event
        self._last_fired[key] = now
        return event

    def hold(self, events: Iterable[AlertEvent]) -> None:
        """Keep ``events`` (this cycle's, priced) as what firing alerts are re-sent with, where they fire."""
        for ev in events:
            if ev.status == FIRING and ev.key in self._firing:
                self._resend[ev.key] = ev

    def drop(self, key: str, reason: str, now: float) -> AlertEvent | None:
        """The group is gone (unregistered): resolve its alert, if it fires, so no receiver waits for it."""
        for d in (
            self._clear_since,
            self._pending,
            self._unfixable_since,
            self._unfixable,
            self._fixable_since,
            self._report_due,
            self._resend,
        ):
            d.pop(key, None)
        fired = self._firing.pop(key, None)
        if fired is None:
            return None
        return self._event(key, RESOLVED, fired.current, fired.current, None, reason, now, fired.started_at)
