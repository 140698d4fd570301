"""Prometheus metrics in the text exposition format, without a client library.

Naming follows Prometheus conventions: ``rackplan_`` prefix, base units
(seconds), ``_total`` for counters.  Labels are group, kind, status, result:
never member ids (unbounded cardinality, and they identify clients).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

Labels = tuple[tuple[str, str], ...]

_HELP: dict[str, tuple[str, str]] = {
    "rackplan_polls_total": ("counter", "Metadata polls, by result (ok, failed)."),
    "rackplan_poll_duration_seconds": ("gauge", "Duration of the last metadata poll."),
    "rackplan_snapshot_timestamp_seconds": ("gauge", "Unix time of the last complete snapshot."),
    "rackplan_plans_published_total": ("counter", "Plans published and confirmed, by kind."),
    "rackplan_publish_failures_total": ("counter", "Plans or alerts not confirmed by the brokers."),
    "rackplan_plan_failures_total": ("counter", "Plans that could not be computed."),
    "rackplan_changes_confirmed_total": ("counter", "Metadata changes confirmed after debouncing."),
    "rackplan_cross_rack_partitions": ("gauge", "Cross-rack partitions of the plan of record, per group."),
    "rackplan_cross_rack_ratio": ("gauge", "Cross-rack fraction of the plan of record, per group."),
    "rackplan_alerts_total": ("counter", "Locality alert events, by status."),
    "rackplan_alerts_firing": ("gauge", "Locality alerts currently firing."),
    "rackplan_ready": ("gauge", "1 once the first complete snapshot and the plan replay are done."),
}


def _labels(labels: Mapping[str, str] | None) -> Labels:
    return tuple(sorted((labels or {}).items()))


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, dict[Labels, float]] = {name: {} for name in _HELP}

    def inc(self, name: str, labels: Mapping[str, str] | None = None, by: float = 1.0) -> None:
        with self._lock:
            series = self._values[name]
            key = _labels(labels)
            series[key] = series.get(key, 0.0) + by

    def set(self, name: str, value: float, labels: Mapping[str, str] | None = None) -> None:
        with self._lock:
            self._values[name][_labels(labels)] = float(value)

    def get(self, name: str, labels: Mapping[str, str] | None = None) -> float:
        with self._lock:
            return self._values[name].get(_labels(labels), 0.0)

    def render(self) -> str:
        lines: list[str] = []
        with self._lock:
            for name, (kind, help_text) in _HELP.items():
                lines.append(f"# HELP {name} {help_text}")
                lines.append(f"# TYPE {name} {kind}")
                for labels, value in sorted(self._values[name].items()):
                    lab = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
                    text = str(int(value)) if value.is_integer() else repr(value)
                    lines.append(f"{name}{{{lab}}} {text}" if lab else f"{name} {text}")
        return "\n".join(lines) + "\n"
