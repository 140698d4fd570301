"""Locality alerts: fire when a group's cross-rack fraction crosses a threshold or worsens, resolve on recovery.

Pure state machine per group; the loop sends its events to structlog and the
alerts topic.  A fired alert is not repeated while it stays firing, and a
group that resolved cannot fire again within the cooldown (flapping metadata
must not page anyone twice).
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

    def evaluate(
        self,
        key: str,
        previous: Locality,
        current: Locality,
        planned: Locality | None,
        reason: str,
        now: float,
    ) -> AlertEvent | None:
        """Compare a group's locality before and after a change; an event when the alert state flips."""
        if not self.watched(key):
            return None
        s = self.settings
        bad = current.fraction > s.cross_rack_threshold or (
            current.fraction - previous.fraction >= s.worsen_delta and current.cross_rack > 0
        )
        if key in self._firing:
            if bad:
                return None
            fired = self._firing.pop(key)
            return AlertEvent(
                key, RESOLVED, fired.current, current.fraction, None if planned is None else planned.fraction,
                s.cross_rack_threshold, reason or "locality recovered", now,
            )  # fmt: skip
        if not bad:
            return None
        last = self._last_fired.get(key)
        if last is not None and now - last < s.cooldown_s:
            return None
        event = AlertEvent(
            key, FIRING, previous.fraction, current.fraction, None if planned is None else planned.fraction,
            s.cross_rack_threshold, reason, now,
        )  # fmt: skip
        self._firing[key] = event
        self._last_fired[key] = now
        return event
