"""Locality alerts: fire when a group's cross-rack fraction crosses a threshold or worsens, resolve on recovery.

Pure state machine per group; the loop sends its events to structlog, the
alerts topic, metrics and the webhook.  A group is *bad* when its cross-rack
fraction is above the threshold, or at least ``worsen_delta`` above its
baseline with some cross-rack partition.  The baseline of a change is the
fraction before it; on the initial state there is none (only the threshold
applies).  A fired alert is not repeated while it stays firing.  It resolves
once the group has *recovered*: under the threshold and less than
``worsen_delta`` above the better-known of its old fraction and what the plan
of record achieves under the new metadata.  So an alert fired by worsening
stays firing while the group's real assignment lags behind the new plan, but
not forever when the change made the old locality impossible.  A group cannot
fire again within the cooldown of its last firing (flapping metadata must not
page anyone twice).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Any

from .plans import Locality
from .settings import AlertSettings

FIRING = "firing"
RESOLVED = "resolved"


@dataclass(frozen=True, slots=True)
class AlertEvent:
    key: str
    status: str
    #: cross-rack fraction before the change (the last plan under the old metadata)
    previous: float
    #: the group's current assignment under the new metadata
    current: float
    #: what the newly published plan would give, when there is one
    planned: float | None
    threshold: float
    reason: str
    at: float
    #: when the alert started firing (for a firing event: ``at``)
    started_at: float

    @property
    def kind(self) -> str:
        return self.key.partition("/")[0]

    @property
    def name(self) -> str:
        return self.key.partition("/")[2]

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "status": self.status,
            "cross_rack_fraction_before": round(self.previous, 6),
            "cross_rack_fraction_now": round(self.current, 6),
            "cross_rack_fraction_planned": None if self.planned is None else round(self.planned, 6),
            "threshold": self.threshold,
            "reason": self.reason,
            "at": self.at,
            "started_at": self.started_at,
        }


class AlertState:
    def __init__(self, settings: AlertSettings) -> None:
        self.settings = settings
        self._firing: dict[str, AlertEvent] = {}
        self._last_fired: dict[str, float] = {}

    def watched(self, key: str) -> bool:
        """Allow/deny patterns match the group id or application id (the part after the slash)."""
        name = key.partition("/")[2] or key
        s = self.settings
        if any(fnmatch.fnmatchcase(name, p) for p in s.deny):
            return False
        return any(fnmatch.fnmatchcase(name, p) for p in s.allow)

    def firing(self) -> list[str]:
        return sorted(self._firing)

    def firing_events(self) -> list[AlertEvent]:
        """The firing event of every group whose alert fires, by key."""
        return [self._firing[k] for k in sorted(self._firing)]

    def _bad(self, baseline: Locality | float, current: Locality) -> bool:
        s = self.settings
        base = baseline.fraction if isinstance(baseline, Locality) else baseline
        return current.fraction > s.cross_rack_threshold or (
            current.fraction - base >= s.worsen_delta and current.cross_rack > 0
        )

    def evaluate(
        self,
        key: str,
        previous: Locality,
        current: Locality,
        planned: Locality | None,
        reason: str,
        now: float,
    ) -> AlertEvent | None:
        """Compare a group's locality before and after a change; an event when the alert state flips.

        On the initial state (nothing to compare with) pass ``previous == current``:
        only the threshold applies.
        """
        if not self.watched(key):
            return None
        s = self.settings
        planned_f = None if planned is None else planned.fraction
        fired = self._firing.get(key)
        if fired is not None:
            baseline = max(fired.previous, -1.0 if planned_f is None else planned_f)
            if self._bad(baseline, current):
                return None
            del self._firing[key]
            return AlertEvent(
                key, RESOLVED, fired.current, current.fraction, planned_f, s.cross_rack_threshold,
                reason or "locality recovered", now, fired.started_at,
            )  # fmt: skip
        if not self._bad(previous, current):
            return None
        last = self._last_fired.get(key)
        if last is not None and now - last < s.cooldown_s:
            return None
        event = AlertEvent(
            key, FIRING, previous.fraction, current.fraction, planned_f, s.cross_rack_threshold, reason, now, now
        )  # fmt: skip
        self._firing[key] = event
        self._last_fired[key] = now
        return event

    def drop(self, key: str, reason: str, now: float) -> AlertEvent | None:
        """The group is gone (unregistered): resolve its alert, if it fires, so no receiver waits for it."""
        fired = self._firing.pop(key, None)
        if fired is None:
            return None
        return AlertEvent(
            key, RESOLVED, fired.current, fired.current, None, self.settings.cross_rack_threshold, reason, now,
            fired.started_at,
        )  # fmt: skip
