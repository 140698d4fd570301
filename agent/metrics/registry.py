"""The agent's Prometheus metrics: a thread-safe series store that prometheus_client exposes.

The store is the agent's own (the declared objects of :mod:`.declared`, a
group's series replaced and removed together, zero series rendered, never
stored); :class:`Metrics` is a prometheus_client ``Collector`` over it, so the
library writes the text format, OpenMetrics and gzip (:mod:`.exposition`) and
its ``ProcessCollector`` the ``process_*`` metrics (:mod:`.process_stats`).

Naming follows Prometheus conventions: ``rackplan_`` prefix, base units
(seconds, ratios 0..1), ``_total`` for counters and only for counters.  Labels
are bounded: kind, group, topic, rack, status, result, reason, change, source,
locality, record.  Never member, client or process ids (unbounded
cardinality, and they identify clients).  A group's series are removed when
the group is unregistered, so dashboards do not show ghosts.

Every counter whose label values are known in advance has a sample from the
start (:data:`ZERO_SERIES`), so ``increase()`` and ``rate()`` see its first
event; durations are histograms (``_bucket``/``_sum``/``_count``);
``rackplan_build_info`` and the standard ``process_*`` metrics come with every
exposition; with ``cluster_name`` set, every sample carries ``cluster``.
"""

from __future__ import annotations

import bisect
import platform
import threading
from collections.abc import Callable, Mapping
from importlib import metadata

from prometheus_client.metrics_core import Metric as PromMetric
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from .declared import COUNTER, DECLARED, GAUGE, HISTOGRAM, Metric
from .exposition import Exposition, expose
from .process_stats import LabelledProcessCollector

Labels = tuple[tuple[str, str], ...]

#: name -> (type, help, label names), from the declared objects (:mod:`.declared`), in their order.
#: tests/agent/metrics/test_registry.py checks the conventions.
METRICS: dict[str, tuple[str, str, tuple[str, ...]]] = {m.name: (m.type, m.help, m.labels) for m in DECLARED}

#: upper bounds (seconds) of the buckets of each histogram; ``+Inf`` is implied.  From a cycle on a quiet
#: cluster (milliseconds) to a poll that exhausts its retries (``metadata.max_attempts`` × timeouts).
_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
BUCKETS: dict[str, tuple[float, ...]] = {
    "rackplan_poll_duration_seconds": _DURATION_BUCKETS,
    "rackplan_cycle_duration_seconds": _DURATION_BUCKETS,
}

#: label sets of each counter that exist from the start (value 0), so the first event is an increase.
#: Counters without labels always have their sample.  Open-ended label values (a Kafka error name, a
#: topic) appear with their first event; :data:`NOT_ZERO_INITIALISED` says which and why.
ZERO_SERIES: dict[str, tuple[dict[str, str], ...]] = {
    "rackplan_polls_total": ({"result": "ok"}, {"result": "failed"}),
    "rackplan_metadata_changes_total": tuple(
        {"change": c}
        for c in (
            "replica_racks",
            "leader_rack",
            "topic_added",
            "topic_removed",
            "partitions_added",
            "partitions_removed",
            "broker_rack",
        )
    ),
    "rackplan_plans_published_total": ({"kind": "consumer"}, {"kind": "streams"}),
    "rackplan_tombstones_published_total": ({"kind": "consumer"}, {"kind": "streams"}),
    "rackplan_publish_failures_total": tuple(
        {"record": r} for r in ("plan", "tombstone", "alert", "heartbeat")
    ),
    "rackplan_plan_failures_total": ({"kind": "consumer"}, {"kind": "streams"}),
    "rackplan_foreign_writers_total": ({"topic": "lease"}, {"topic": "plans"}),
    # unfixable: the one-off report of a group whose best plan is above the threshold (docs/runbook.md)
    "rackplan_alerts_total": ({"status": "firing"}, {"status": "resolved"}, {"status": "unfixable"}),
    "rackplan_registration_records_total": tuple({"result": r} for r in ("applied", "tombstone", "skipped")),
    "rackplan_registration_records_skipped_total": tuple(
        {"reason": r}
        for r in ("bad_key", "not_utf8", "not_json", "not_object", "schema", "key_mismatch", "invalid")
    ),
    "rackplan_describe_groups_failures_total": ({"reason": "unsupported"},),
    "rackplan_webhook_attempts_total": ({"result": "ok"}, {"result": "error"}),
    "rackplan_webhook_failures_total": tuple(
        {"reason": r}
        for r in (
            "connection",
            "timeout",
            "http_3xx",
            "http_4xx",
            "http_5xx",
            "queue_full",
            "header_file",
            "header_value",
            "bad_response",
            "invalid_request",
            "internal",
        )
    ),
    "rackplan_handovers_total": ({"result": "completed"}, {"result": "timed_out"}),
}

#: counters (or label values) that cannot be zero-initialised, and why
NOT_ZERO_INITIALISED: dict[str, str] = {
    "rackplan_topic_rack_changes_total": (
        "one series per topic of the cluster would be thousands of zeros; "
        'rackplan_metadata_changes_total{change="replica_racks"} counts the same events from the start'
    ),
    "rackplan_describe_groups_failures_total": (
        "reasons other than `unsupported` are Kafka error names, an open set: they appear with their first event"
    ),
}


def build_version() -> str:
    """The installed package's version (``unknown`` when run from a source tree that was never installed)."""
    try:
        return metadata.version("rackplan")
    except metadata.PackageNotFoundError:  # pragma: no cover - the tests run an installed package
        return "unknown"


def _labels(labels: Mapping[str, str] | None) -> Labels:
    return tuple(sorted((labels or {}).items()))


_ZEROS: dict[str, tuple[Labels, ...]] = {
    name: tuple(_labels(d) for d in sets) for name, sets in ZERO_SERIES.items()
}


class Metrics(Collector):
    """Thread-safe series store; the HTTP thread renders while the loop updates.

    ``cluster``: the value of a ``cluster`` label added to every sample at render time (``None`` or
    empty: no such label; Prometheus' own target labels then tell agents apart).
    """

    def __init__(self, cluster: str | None = None, process: bool = True) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, dict[Labels, float]] = {
            name: {} for name, spec in METRICS.items() if spec[0] != HISTOGRAM
        }
        #: histogram -> labels -> per-bucket counts (not cumulative; the last is +Inf), then sum, then count
        self._hist: dict[str, dict[Labels, list[float]]] = {
            name: {} for name, spec in METRICS.items() if spec[0] == HISTOGRAM
        }
        self._functions: dict[str, Callable[[], float | None]] = {}
        #: (name, kind, group) -> series of that group: removing a group's series costs its own series only
        self._by_group: dict[tuple[str, str, str], set[Labels]] = {}
        self._cluster = cluster or ""
        #: what /metrics exposes: this store, then (``process``) the process's metrics with the same labels
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        if process:
            self.registry.register(LabelledProcessCollector({"cluster": cluster} if cluster else {}))
        self.set("rackplan_build_info", 1, {"version": build_version(), "python": platform.python_version()})

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

    def inc(self, name: Metric | str, labels: Mapping[str, str] | None = None, by: float = 1.0) -> None:
        name = str(name)
        self._check(name, labels)
        with self._lock:
            key = _labels(labels)
            self._store(name, key, self._values[name].get(key, 0.0) + by)

    def set(self, name: Metric | str, value: float, labels: Mapping[str, str] | None = None) -> None:
        name = str(name)
        self._check(name, labels)
        with self._lock:
            self._store(name, _labels(labels), float(value))

    def set_function(self, name: Metric | str, fn: Callable[[], float | None]) -> None:
        """A label-less gauge computed at scrape time (None: no sample)."""
        name = str(name)
        self._check(name, None)
        self._functions[name] = fn

    def observe(self, name: Metric | str, value: float, labels: Mapping[str, str] | None = None) -> None:
        """One observation of a histogram (a duration, in seconds)."""
        name = str(name)
        self._check(name, labels)
        bounds = BUCKETS[name]
        i = bisect.bisect_left(bounds, value)  # the first bucket whose upper bound ("le") is >= value
        with self._lock:
            series = self._hist[name].setdefault(_labels(labels), [0.0] * (len(bounds) + 3))
            series[i] += 1
            series[-2] += value
            series[-1] += 1

    def histogram(
        self, name: Metric | str, labels: Mapping[str, str] | None = None
    ) -> tuple[list[float], float, float]:
        """Cumulative bucket counts (``+Inf`` last), sum and count of one histogram series."""
        name = str(name)
        with self._lock:
            raw = self._hist[name].get(_labels(labels)) or [0.0] * (len(BUCKETS[name]) + 3)
            cumulative: list[float] = []
            total = 0.0
            for c in raw[:-2]:
                total += c
                cumulative.append(total)
            return cumulative, raw[-2], raw[-1]

    def get(self, name: Metric | str, labels: Mapping[str, str] | None = None) -> float:
        name = str(name)
        with self._lock:
            return self._values[name].get(_labels(labels), 0.0)

    def series(self, name: Metric | str) -> dict[Labels, float]:
        name = str(name)
        with self._lock:
            return dict(self._values[name])

    def remove(self, name: Metric | str, match: Mapping[str, str]) -> None:
        """Drop every series of ``name`` whose labels include all of ``match``."""
        name = str(name)
        with self._lock:
            for key in self._matching(name, match):
                self._drop(name, key)

    def replace(self, name: Metric | str, match: Mapping[str, str], values: Mapping[Labels, float]) -> None:
        """Swap the series matching ``match`` for ``values`` (full label tuples) in one step."""
        name = str(name)
        for labels, _ in values.items():
            self._check(name, dict(labels))
        with self._lock:
            for key in self._matching(name, match):
                self._drop(name, key)
            for key, value in values.items():
                self._store(name, key, float(value))

    def collect(self) -> list[PromMetric]:
        """Every family of the agent, in :data:`METRICS` order: prometheus_client's ``Collector`` protocol,
        which :attr:`registry` reads for its text and OpenMetrics writers (:mod:`.exposition`)."""
        extra = {"cluster": self._cluster} if self._cluster else {}
        families: list[PromMetric] = []
        with self._lock:
            for name, (kind, help_text, label_names) in METRICS.items():
                family = PromMetric(name.removesuffix("_total") if kind == COUNTER else name, help_text, kind)
                families.append(family)
                samples = family.samples
                if kind == HISTOGRAM:
                    self._histogram_samples(samples, name, not label_names, extra)
                    continue
                fn = self._functions.get(name)
                if fn is not None:
                    value = fn()
                    if value is not None:
                        samples.append(Sample(name, extra, float(value)))
                    continue
                values = self._values[name]
                zeros = _ZEROS.get(name)
                if zeros:
                    values = {**dict.fromkeys(zeros, 0.0), **values}
                elif kind == COUNTER and not label_names and not values:
                    values = {(): 0.0}
                for labels, value in sorted(values.items()):
                    samples.append(Sample(name, {**extra, **dict(labels)}, value))
        return families

    def _histogram_samples(
        self, samples: list[Sample], name: str, zero_init: bool, extra: dict[str, str]
    ) -> None:
        bounds = [*map(floatToGoString, BUCKETS[name]), "+Inf"]
        series = self._hist[name]
        if zero_init and not series:
            series = {(): [0.0] * (len(bounds) + 2)}
        for labels, raw in sorted(series.items()):
            lab = {**extra, **dict(labels)}
            total = 0.0
            for bound, c in zip(bounds, raw, strict=False):
                total += c
                samples.append(Sample(f"{name}_bucket", {**lab, "le": bound}, total))
            samples.append(Sample(f"{name}_sum", lab, raw[-2]))
            samples.append(Sample(f"{name}_count", lab, raw[-1]))

    def exposition(self, accept: str | None = None, accept_encoding: str | None = None) -> Exposition:
        """``/metrics``' answer as the request's ``Accept`` and ``Accept-Encoding`` ask (:mod:`.exposition`)."""
        return expose(self.registry, accept, accept_encoding)

    def render(self, accept: str | None = None) -> str:
        """The exposition as text: the format 0.0.4, or what ``accept`` negotiates (never gzipped)."""
        return expose(self.registry, accept).body.decode()


# Alerts (agent/alerts/rules.py): a group reported unfixable (its one-off RackplanLocalityUnfixable event) and still so.
# ---- what a group's live assignment and registration get wrong (issue 24) --------------------------
METRICS["rackplan_live_unknown_rack_partitions"] = (
    GAUGE,
    "Partitions of the group's live assignment held by members whose rack is unknown (neither registered "
    "nor placed by rack_mapping): not counted local nor cross-rack.",
    ("kind", "group"),
)
METRICS["rackplan_member_racks_unknown"] = (
    GAUGE,
    "Registered members (or Streams clients) of the group whose rack no broker has.",
    ("kind", "group"),
)
METRICS["rackplan_unknown_topic_subscriptions"] = (
    GAUGE,
    "Subscriptions of the group's members to topics that do not exist (left out of its plan).",
    ("kind", "group"),
)

METRICS["rackplan_alerts_unfixable"] = (
    GAUGE,
    "1 while the group is reported unfixable: even its best assignment is above the alert threshold.",
    ("kind", "group"),
)


# ---- hardening (issue 11): poison records, forged records, uncertain deliveries -----------------------------
from ..protocol.records import REASONS as _RECORD_REASONS  # noqa: E402  (appended block: one place to merge)

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
        # issue 24 (items 7, 9): counters are never produced above 2**53-1
        "rackplan_counters_exhausted": (
            GAUGE,
            "Counters at their bound 2**53-1 that cannot go on, by counter (generation: plan keys that get no "
            "new plan; lease_epoch: 1 when this agent stops for it). See docs/runbook.md.",
            ("counter",),
        ),
    }
)
ZERO_SERIES["rackplan_generations_reserved_total"] = (
    {"reason": "uncertain_delivery"},
    {"reason": "foreign_plan"},
)
ZERO_SERIES["rackplan_registration_records_skipped_total"] = tuple({"reason": r} for r in _RECORD_REASONS)
NOT_ZERO_INITIALISED["rackplan_records_skipped_total"] = (
    "three topics times a dozen reasons would be forty zeros; the reasons that matter alert on their first event"
)
for _name in ("rackplan_generations_reserved_total", "rackplan_registration_records_skipped_total"):
    _ZEROS[_name] = tuple(_labels(d) for d in ZERO_SERIES[_name])
