"""Prometheus metrics in the text exposition format, without a client library.

Naming follows Prometheus conventions: ``rackplan_`` prefix, base units
(seconds, ratios 0..1), ``_total`` for counters and only for counters.  Labels
are bounded: kind, group, topic, rack, status, result, reason, change, source,
locality, record.  Never member, client or process ids (unbounded
cardinality, and they identify clients).  A group's series are removed when
the group is unregistered, so dashboards do not show ghosts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

Labels = tuple[tuple[str, str], ...]

COUNTER = "counter"
GAUGE = "gauge"

#: name -> (type, help, label names).  tests/test_agent_metrics.py checks the conventions.
METRICS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "rackplan_ready": (GAUGE, "1 once the plan topic is replayed and a first complete snapshot taken.", ()),
    "rackplan_polls_total": (COUNTER, "Metadata polls, by result (ok, failed).", ("result",)),
    "rackplan_poll_duration_seconds": (GAUGE, "Wall-clock duration of the last cycle.", ()),
    "rackplan_snapshot_timestamp_seconds": (GAUGE, "Unix time of the last complete snapshot.", ()),
    "rackplan_snapshot_age_seconds": (GAUGE, "Seconds since the last complete snapshot.", ()),
    "rackplan_snapshot_partitions": (GAUGE, "Partitions in the last complete snapshot.", ()),
    "rackplan_snapshot_topics": (GAUGE, "Watched topics in the last complete snapshot.", ()),
    "rackplan_brokers": (GAUGE, "Brokers in the last snapshot, by rack (empty: no rack).", ("rack",)),
    "rackplan_changes_confirmed_total": (COUNTER, "Metadata changes confirmed after debouncing.", ()),
    "rackplan_metadata_changes_total": (
        COUNTER,
        "Confirmed changes by kind (replica_racks, leader_rack, topic_added, ...).",
        ("change",),
    ),
    "rackplan_topic_rack_changes_total": (
        COUNTER,
        "Partitions whose replica rack set changed (confirmed), per topic.",
        ("topic",),
    ),
    "rackplan_plans_published_total": (COUNTER, "Plans published and confirmed, by kind.", ("kind",)),
    "rackplan_tombstones_published_total": (COUNTER, "Plans tombstoned (group unregistered).", ("kind",)),
    "rackplan_plan_generation": (GAUGE, "Generation of the plan of record.", ("kind", "group")),
    "rackplan_publish_failures_total": (
        COUNTER,
        "Records not confirmed by the brokers, by record (plan, tombstone, alert, heartbeat).",
        ("record",),
    ),
    "rackplan_plan_failures_total": (COUNTER, "Plans that could not be computed, by kind.", ("kind",)),
    "rackplan_cross_rack_partitions": (
        GAUGE,
        "Cross-rack partitions of the plan of record under the current metadata.",
        ("kind", "group"),
    ),
    "rackplan_foreign_writers_total": (
        COUNTER,
        "Heartbeats of another agent outside this agent's lease group seen live on the lease topic "
        "(this agent then refuses to start, or stops).",
        ("topic",),
    ),
    "rackplan_live_cross_rack_partitions": (
        GAUGE,
        "Cross-rack partitions of the group's live assignment as the brokers describe it (DescribeGroups).",
        ("kind", "group"),
    ),
    "rackplan_live_assigned_partitions": (
        GAUGE,
        "Partitions of the group's live assignment as the brokers describe it (DescribeGroups).",
        ("kind", "group"),
    ),
    "rackplan_cross_rack_ratio": (
        GAUGE,
        "Cross-rack fraction of the plan of record under the current metadata.",
        ("kind", "group"),
    ),
    "rackplan_assigned_partitions": (
        GAUGE,
        "Partitions of the plan of record by member rack and locality (local, cross_rack).",
        ("kind", "group", "rack", "locality"),
    ),
    "rackplan_alerts_total": (COUNTER, "Locality alert events, by status (firing, resolved).", ("status",)),
    "rackplan_alerts_firing": (GAUGE, "1 while the group's locality alert fires.", ("kind", "group")),
    "rackplan_registrations": (
        GAUGE,
        "Registered groups and apps, by kind and source (file, topic, file+topic, discovered).",
        ("kind", "source"),
    ),
    "rackplan_registration_records_total": (
        COUNTER,
        "Records read from the registrations topic, by result (applied, tombstone, skipped).",
        ("result",),
    ),
    "rackplan_registration_records_skipped_total": (
        COUNTER,
        "Malformed registration records skipped, by reason.",
        ("reason",),
    ),
    "rackplan_registrations_expired_total": (COUNTER, "Registration entries dropped after their TTL.", ()),
    "rackplan_registration_read_failures_total": (
        COUNTER,
        "Cycles in which the registrations topic could not be read to its end.",
        (),
    ),
    "rackplan_describe_groups_failures_total": (
        COUNTER,
        "DescribeGroups requests that failed, by reason (unsupported, error name).",
        ("reason",),
    ),
    "rackplan_webhook_attempts_total": (
        COUNTER,
        "Webhook HTTP requests, by result (ok, error).",
        ("result",),
    ),
    "rackplan_webhook_failures_total": (
        COUNTER,
        "Alert batches the webhook gave up on (retries exhausted, rejected, queue full), by reason.",
        ("reason",),
    ),
    "rackplan_webhook_queue_batches": (GAUGE, "Alert batches waiting for the webhook.", ()),
    "rackplan_leader": (GAUGE, "1 while this agent publishes (holds the lease, or runs alone).", ()),
    "rackplan_lease_acquisitions_total": (COUNTER, "Times this agent acquired the lease and led.", ()),
    "rackplan_handovers_pending": (
        GAUGE,
        "Two-phase handovers whose revoking plan is published and whose target is not.",
        (),
    ),
    "rackplan_handovers_total": (
        COUNTER,
        "Two-phase handovers completed, by result (completed, timed_out: released by the timeout).",
        ("result",),
    ),
    "rackplan_followers": (
        GAUGE,
        "Registered plan-following members, by mode (waiting, plan, subscription).",
        ("mode",),
    ),
}


def _labels(labels: Mapping[str, str] | None) -> Labels:
    return tuple(sorted((labels or {}).items()))


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() else repr(value)


class Metrics:
    """Thread-safe series store; the HTTP thread renders while the loop updates."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, dict[Labels, float]] = {name: {} for name in METRICS}
        self._functions: dict[str, Callable[[], float | None]] = {}
        #: (name, kind, group) -> series of that group: removing a group's series costs its own series only
        self._by_group: dict[tuple[str, str, str], set[Labels]] = {}

    def _store(self, name: str, key: Labels, value: float) -> None:
        self._values[name][key] = value
        d = dict(key)
        if "kind" in d and "group" in d:
            self._by_group.setdefault((name, d["kind"], d["group"]), set()).add(key)

    def _matching(self, name: str, match: Mapping[str, str]) -> list[Labels]:
        if set(match) == {"kind", "group"}:
            return sorted(self._by_group.get((name, match["kind"], match["group"]), ()))
        want = set(match.items())
        return [k for k in self._values[name] if want.issubset(k)]

    def _drop(self, name: str, key: Labels) -> None:
        self._values[name].pop(key, None)
        d = dict(key)
        if "kind" in d and "group" in d:
            self._by_group.get((name, d["kind"], d["group"]), set()).discard(key)

    def _check(self, name: str, labels: Mapping[str, str] | None) -> None:
        expected = METRICS[name][2]
        if tuple(sorted(labels or {})) != tuple(sorted(expected)):
            raise ValueError(f"{name}: labels {sorted(labels or {})} differ from {sorted(expected)}")

    def inc(self, name: str, labels: Mapping[str, str] | None = None, by: float = 1.0) -> None:
        self._check(name, labels)
        with self._lock:
            key = _labels(labels)
            self._store(name, key, self._values[name].get(key, 0.0) + by)

    def set(self, name: str, value: float, labels: Mapping[str, str] | None = None) -> None:
        self._check(name, labels)
        with self._lock:
            self._store(name, _labels(labels), float(value))

    def set_function(self, name: str, fn: Callable[[], float | None]) -> None:
        """A label-less gauge computed at scrape time (None: no sample)."""
        self._check(name, None)
        self._functions[name] = fn

    def get(self, name: str, labels: Mapping[str, str] | None = None) -> float:
        with self._lock:
            return self._values[name].get(_labels(labels), 0.0)

    def series(self, name: str) -> dict[Labels, float]:
        with self._lock:
            return dict(self._values[name])

    def remove(self, name: str, match: Mapping[str, str]) -> None:
        """Drop every series of ``name`` whose labels include all of ``match``."""
        with self._lock:
            for key in self._matching(name, match):
                self._drop(name, key)

    def replace(self, name: str, match: Mapping[str, str], values: Mapping[Labels, float]) -> None:
        """Swap the series matching ``match`` for ``values`` (full label tuples) in one step."""
        for labels, _ in values.items():
            self._check(name, dict(labels))
        with self._lock:
            for key in self._matching(name, match):
                self._drop(name, key)
            for key, value in values.items():
                self._store(name, key, float(value))

    def render(self) -> str:
        lines: list[str] = []
        with self._lock:
            for name, (kind, help_text, _) in METRICS.items():
                lines.append(f"# HELP {name} {help_text}")
                lines.append(f"# TYPE {name} {kind}")
                fn = self._functions.get(name)
                if fn is not None:
                    value = fn()
                    if value is not None:
                        lines.append(f"{name} {_number(float(value))}")
                    continue
                for labels, value in sorted(self._values[name].items()):
                    lab = ",".join(f'{k}="{_escape(v)}"' for k, v in labels)
                    lines.append(f"{name}{{{lab}}} {_number(value)}" if lab else f"{name} {_number(value)}")
        return "\n".join(lines) + "\n"


# ---- hardening (issue 11): poison records, forged records, uncertain deliveries -----------------------------
METRICS.update(
    {
        "rackplan_records_skipped_total": (
            COUNTER,
            "Records of the control topics skipped, never applied, by topic (plans, registrations, lease) and "
            "reason (too_large, too_deep, not_json, out_of_range, unsigned, bad_signature, settings_group, ...).",
            ("topic", "reason"),
        ),
        "rackplan_plan_discrepancies": (
            GAUGE,
            "Plan keys whose newest record on the plan topic was written by someone else than this agent "
            "(a foreign tombstone or plan: what followers read is not the agent's plan).",
            (),
        ),
        "rackplan_generations_reserved_total": (
            COUNTER,
            "Plan generations never reused because a record of them may be on the topic with other content, "
            "by reason (uncertain_delivery: a publish timed out; foreign_plan: another writer used it).",
            ("reason",),
        ),
    }
)
