"""Locality alert events: the records of the alerts topic (docs/alert-schema.json), and the webhook's body.

The state machine that makes the events is :mod:`rackplan.agent.alerts.rules`; the
Alertmanager alerts built from them, :func:`rackplan.agent.alerts.webhook.alertmanager_alert`.
Schemas: :class:`rackplan.agent.protocol.models.AlertValue`,
:data:`rackplan.agent.protocol.models.WebhookBody`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .plans import split_key

FIRING = "firing"
RESOLVED = "resolved"
#: a one-off report: even the best plan is above the threshold
UNFIXABLE = "unfixable"
#: the alert names (Alertmanager's ``alertname``; docs/runbook.md has a section for each)
ALERTNAME = "RackplanCrossRackLocality"
UNFIXABLE_ALERTNAME = "RackplanLocalityUnfixable"
#: version of the alerts topic's record values (docs/alert-schema.json); fields are only ever added
ALERT_SCHEMA = 1


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
    #: when the alert started firing (for a firing event: when the group turned bad)
    started_at: float
    severity: str = "warning"
    #: the runbook section of this alert
    runbook_url: str = ""
    #: measured cross-rack bytes/s of the group's current assignment and their monthly cost (None: no traffic)
    cross_rack_bytes_per_s: float | None = None
    cross_rack_dollars_per_month: float | None = None
    #: an unfixable report's floor, the fraction no assignment beats (rackplan.agent.planning.fixable; the
    #: webhook's summary quotes it): not on the alerts topic
    best: float | None = None

    @property
    def kind(self) -> str:
        return split_key(self.key)[0]

    @property
    def name(self) -> str:
        return split_key(self.key)[1]

    @property
    def alertname(self) -> str:
        return UNFIXABLE_ALERTNAME if self.status == UNFIXABLE else ALERTNAME

    def encode(self) -> bytes:
        """The record value on the alerts topic: compact JSON, non-ASCII escaped, keys as :meth:`as_json`."""
        return json.dumps(self.as_json(), separators=(",", ":")).encode()

    def as_json(self) -> dict[str, Any]:
        """The alerts topic's record value (docs/alert-schema.json); the traffic fields only when measured."""
        out: dict[str, Any] = {
            "schema": ALERT_SCHEMA,
            "key": self.key,
            "alertname": self.alertname,
            "status": self.status,
            "severity": self.severity,
            "cross_rack_fraction_before": round(self.previous, 6),
            "cross_rack_fraction_now": round(self.current, 6),
            "cross_rack_fraction_planned": None if self.planned is None else round(self.planned, 6),
            "threshold": self.threshold,
            "reason": self.reason,
            "runbook_url": self.runbook_url,
            "at": self.at,
            "at_ms": round(self.at * 1000),
            "started_at": self.started_at,
            "started_at_ms": round(self.started_at * 1000),
        }
        if self.cross_rack_bytes_per_s is not None:
            out["cross_rack_bytes_per_s"] = round(self.cross_rack_bytes_per_s, 3)
        if self.cross_rack_dollars_per_month is not None:
            out["cross_rack_dollars_per_month"] = round(self.cross_rack_dollars_per_month, 2)
        return out


def encode_webhook_body(alerts: Sequence[Mapping[str, Any]]) -> bytes:
    """One webhook request's body: the postable alerts as a compact JSON array, keys sorted."""
    return json.dumps(alerts, separators=(",", ":"), sort_keys=True).encode()
