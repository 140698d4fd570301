"""Every metric of the agent, declared once as an object (prometheus client_python's style).

Call sites name a metric by its object (``w.metrics.inc(metric.POLLS_TOTAL, {"result": "ok"})``),
never by a string, so a misspelt metric is an ``AttributeError`` mypy reports, not a series that
silently never appears.  :mod:`.registry` stores the values and renders them; its ``METRICS`` table is
built from :data:`DECLARED`, in this order (the exposition's).  tests/agent/metrics/test_declared.py
checks that each object's Python name is its metric name and that no call site uses a string.
"""

from __future__ import annotations

from dataclasses import dataclass

COUNTER = "counter"
GAUGE = "gauge"
HISTOGRAM = "histogram"


@dataclass(frozen=True, slots=True)
class Metric:
    """A metric's name, type, help text and label names: what the exposition declares about it."""

    name: str
    type: str
    help: str
    labels: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.name


READY = Metric(
    "rackplan_ready", GAUGE, "1 once the plan topic is replayed and a first complete snapshot taken."
)
POLLS_TOTAL = Metric("rackplan_polls_total", COUNTER, "Metadata polls, by result (ok, failed).", ("result",))
POLL_DURATION_SECONDS = Metric(
    "rackplan_poll_duration_seconds",
    HISTOGRAM,
    "Wall-clock duration of each metadata poll, retries and their backoff included (ok or failed).",
)
SNAPSHOT_TIMESTAMP_SECONDS = Metric(
    "rackplan_snapshot_timestamp_seconds", GAUGE, "Unix time of the last complete snapshot."
)
SNAPSHOT_AGE_SECONDS = Metric(
    "rackplan_snapshot_age_seconds", GAUGE, "Seconds since the last complete snapshot."
)
SNAPSHOT_PARTITIONS = Metric(
    "rackplan_snapshot_partitions", GAUGE, "Partitions in the last complete snapshot."
)
SNAPSHOT_TOPICS = Metric("rackplan_snapshot_topics", GAUGE, "Watched topics in the last complete snapshot.")
BROKERS = Metric(
    "rackplan_brokers", GAUGE, "Brokers in the last snapshot, by rack (empty: no rack).", ("rack",)
)
CHANGES_CONFIRMED_TOTAL = Metric(
    "rackplan_changes_confirmed_total", COUNTER, "Metadata changes confirmed after debouncing."
)
METADATA_CHANGES_TOTAL = Metric(
    "rackplan_metadata_changes_total",
    COUNTER,
    "Confirmed changes by kind (replica_racks, leader_rack, topic_added, ...).",
    ("change",),
)
TOPIC_RACK_CHANGES_TOTAL = Metric(
    "rackplan_topic_rack_changes_total",
    COUNTER,
    "Partitions whose replica rack set changed (confirmed), per topic.",
    ("topic",),
)
PLANS_PUBLISHED_TOTAL = Metric(
    "rackplan_plans_published_total", COUNTER, "Plans published and confirmed, by kind.", ("kind",)
)
TOMBSTONES_PUBLISHED_TOTAL = Metric(
    "rackplan_tombstones_published_total",
    COUNTER,
    "Plans tombstoned (group unregistered), by kind.",
    ("kind",),
)
PLAN_GENERATION = Metric(
    "rackplan_plan_generation", GAUGE, "Generation of the plan of record.", ("kind", "group")
)
PUBLISH_FAILURES_TOTAL = Metric(
    "rackplan_publish_failures_total",
    COUNTER,
    "Records not confirmed by the brokers, by record (plan, tombstone, alert, heartbeat, traffic).",
    ("record",),
)
PLAN_FAILURES_TOTAL = Metric(
    "rackplan_plan_failures_total", COUNTER, "Plans that could not be computed, by kind.", ("kind",)
)
CROSS_RACK_PARTITIONS = Metric(
    "rackplan_cross_rack_partitions",
    GAUGE,
    "Cross-rack partitions of the plan of record under the current metadata.",
    ("kind", "group"),
)
FOREIGN_WRITERS_TOTAL = Metric(
    "rackplan_foreign_writers_total",
    COUNTER,
    "Records another writer wrote, by topic: plans (a plan record of no agent of this lease group, or one without the agent's MAC), lease (a heartbeat without the agent's MAC, or a live one of an agent outside this agent's lease group: this agent then refuses to start, or stops).",
    ("topic",),
)
LIVE_CROSS_RACK_PARTITIONS = Metric(
    "rackplan_live_cross_rack_partitions",
    GAUGE,
    "Cross-rack partitions of the group's live assignment as the brokers describe it (DescribeGroups).",
    ("kind", "group"),
)
LIVE_ASSIGNED_PARTITIONS = Metric(
    "rackplan_live_assigned_partitions",
    GAUGE,
    "Partitions of the group's live assignment as the brokers describe it (DescribeGroups).",
    ("kind", "group"),
)
CROSS_RACK_RATIO = Metric(
    "rackplan_cross_rack_ratio",
    GAUGE,
    "Cross-rack fraction of the plan of record under the current metadata.",
    ("kind", "group"),
)
ASSIGNED_PARTITIONS = Metric(
    "rackplan_assigned_partitions",
    GAUGE,
    "Partitions of the plan of record by member rack and locality (local, cross_rack).",
    ("kind", "group", "rack", "locality"),
)
ALERTS_TOTAL = Metric(
    "rackplan_alerts_total",
    COUNTER,
    "Locality alert events, by status (firing, resolved, unfixable).",
    ("status",),
)
ALERTS_FIRING = Metric(
    "rackplan_alerts_firing", GAUGE, "1 while the group's locality alert fires.", ("kind", "group")
)
REGISTRATIONS = Metric(
    "rackplan_registrations",
    GAUGE,
    "Registered groups and apps, by kind and source (file, topic, file+topic, discovered).",
    ("kind", "source"),
)
REGISTRATION_RECORDS_TOTAL = Metric(
    "rackplan_registration_records_total",
    COUNTER,
    "Records read from the registrations topic, by result (applied, tombstone, skipped).",
    ("result",),
)
REGISTRATION_RECORDS_SKIPPED_TOTAL = Metric(
    "rackplan_registration_records_skipped_total",
    COUNTER,
    "Malformed registration records skipped, by reason.",
    ("reason",),
)
REGISTRATIONS_EXPIRED_TOTAL = Metric(
    "rackplan_registrations_expired_total", COUNTER, "Registration entries dropped after their TTL."
)
REGISTRATION_READ_FAILURES_TOTAL = Metric(
    "rackplan_registration_read_failures_total",
    COUNTER,
    "Cycles in which the registrations topic could not be read to its end.",
)
DESCRIBE_GROUPS_FAILURES_TOTAL = Metric(
    "rackplan_describe_groups_failures_total",
    COUNTER,
    "DescribeGroups requests that failed, by reason (unsupported, error name).",
    ("reason",),
)
WEBHOOK_ATTEMPTS_TOTAL = Metric(
    "rackplan_webhook_attempts_total", COUNTER, "Webhook HTTP requests, by result (ok, error).", ("result",)
)
WEBHOOK_FAILURES_TOTAL = Metric(
    "rackplan_webhook_failures_total",
    COUNTER,
    "Alert batches the webhook gave up on (retries exhausted, rejected, queue full), by reason.",
    ("reason",),
)
WEBHOOK_QUEUE_BATCHES = Metric(
    "rackplan_webhook_queue_batches", GAUGE, "Alert batches waiting for the webhook."
)
LEADER = Metric("rackplan_leader", GAUGE, "1 while this agent publishes (holds the lease, or runs alone).")
OBSERVE_ONLY = Metric(
    "rackplan_observe_only", GAUGE, "1 when mode is observe: plans are computed and served, never published."
)
LEASE_ACQUISITIONS_TOTAL = Metric(
    "rackplan_lease_acquisitions_total", COUNTER, "Times this agent acquired the lease and led."
)
LEASE_REJOINS_TOTAL = Metric(
    "rackplan_lease_rejoins_total",
    COUNTER,
    "Times this standby rejoined the agents' group because nobody held the lease.",
)
PUBLISHER_FENCED_TOTAL = Metric(
    "rackplan_publisher_fenced_total",
    COUNTER,
    "Times a newer agent's plan producer (same transactional.id) fenced this one: it stopped publishing.",
)
HANDOVERS_PENDING = Metric(
    "rackplan_handovers_pending",
    GAUGE,
    "Two-phase handovers whose revoking plan is published and whose target is not.",
)
HANDOVERS_TOTAL = Metric(
    "rackplan_handovers_total",
    COUNTER,
    "Two-phase handovers completed, by result (completed, timed_out: released by the timeout).",
    ("result",),
)
FOLLOWERS = Metric(
    "rackplan_followers",
    GAUGE,
    "Registered plan-following members, by mode (waiting, plan, subscription).",
    ("mode",),
)
BUILD_INFO = Metric(
    "rackplan_build_info",
    GAUGE,
    "Always 1: the agent's version and Python version as labels.",
    ("python", "version"),
)
CYCLE_DURATION_SECONDS = Metric(
    "rackplan_cycle_duration_seconds",
    HISTOGRAM,
    "Wall-clock duration of each cycle: lease and plan-topic checks, poll, plan, publish, alerts (heartbeats have their own thread).",
)
LIVE_UNKNOWN_RACK_PARTITIONS = Metric(
    "rackplan_live_unknown_rack_partitions",
    GAUGE,
    "Partitions of the group's live assignment held by members whose rack is unknown (neither registered nor placed by rack_mapping): not counted local nor cross-rack.",
    ("kind", "group"),
)
MEMBER_RACKS_UNKNOWN = Metric(
    "rackplan_member_racks_unknown",
    GAUGE,
    "Registered members (or Streams clients) of the group whose rack no broker has.",
    ("kind", "group"),
)
UNKNOWN_TOPIC_SUBSCRIPTIONS = Metric(
    "rackplan_unknown_topic_subscriptions",
    GAUGE,
    "Subscriptions of the group's members to topics that do not exist (left out of its plan).",
    ("kind", "group"),
)
ALERTS_UNFIXABLE = Metric(
    "rackplan_alerts_unfixable",
    GAUGE,
    "1 while the group is reported unfixable: even its best assignment is above the alert threshold.",
    ("kind", "group"),
)
RECORDS_SKIPPED_TOTAL = Metric(
    "rackplan_records_skipped_total",
    COUNTER,
    "Records of the control topics skipped, never applied, by topic (plans, registrations, lease) and reason (too_large, too_deep, not_json, out_of_range, unsigned, bad_signature, settings_group, ...).",
    ("topic", "reason"),
)
PLAN_DISCREPANCIES = Metric(
    "rackplan_plan_discrepancies",
    GAUGE,
    "Plan keys whose newest record on the plan topic was written by someone else than this agent (a foreign tombstone or plan: what followers read is not the agent's plan).",
)
GENERATIONS_RESERVED_TOTAL = Metric(
    "rackplan_generations_reserved_total",
    COUNTER,
    "Plan generations never reused because a record of them may be on the topic with other content, by reason (uncertain_delivery: a publish timed out; foreign_plan: another writer used it).",
    ("reason",),
)
COUNTERS_EXHAUSTED = Metric(
    "rackplan_counters_exhausted",
    GAUGE,
    "Counters at their bound 2**53-1 that cannot go on, by counter (generation: plan keys that get no new plan; lease_epoch: 1 when this agent stops for it). See docs/runbook.md.",
    ("counter",),
)
GROUP_PATH = Metric(
    "rackplan_group_path",
    GAUGE,
    "1 for the path that assigns each registered group: classic-followers (the agent's plans), kip848-broker or streams-broker (the group coordinator; no plan is published), unknown (no live member); assignor: the broker assignor or classic protocol, when known.",
    ("kind", "group", "path", "assignor"),
)
LOCALITY_BASIS = Metric(
    "rackplan_locality_basis",
    GAUGE,
    "1 for what each registered group's locality alert is judged on this cycle: live (the assignment its members hold, DescribeConsumerGroups), plan_of_record (the published plan), none (neither: a KIP-1071 Streams group, which librdkafka cannot describe).",
    ("kind", "group", "basis"),
)
ACHIEVABLE_CROSS_RACK_PARTITIONS = Metric(
    "rackplan_achievable_cross_rack_partitions",
    GAUGE,
    "Broker-assigned groups: cross-rack partitions of the plan the agent would publish (not published), to compare with rackplan_live_cross_rack_partitions.",
    ("kind", "group"),
)
TRAFFIC_PARTITIONS_MEASURED = Metric(
    "rackplan_traffic_partitions_measured",
    GAUGE,
    "Partitions of the registered groups' topics with a measured bytes/s (end offsets over traffic.window_s).",
)
CROSS_RACK_BYTES_PER_SECOND = Metric(
    "rackplan_cross_rack_bytes_per_second",
    GAUGE,
    "Measured bytes/s the group reads across racks, by assignment (current: the live assignment when described, else the plan of record; planned: the plan of record; floor: what no assignment avoids; read: the current assignment at the rate the group commits offsets).",
    ("kind", "group", "assignment"),
)
CROSS_RACK_DOLLARS_PER_MONTH = Metric(
    "rackplan_cross_rack_dollars_per_month",
    GAUGE,
    "Cross-rack bytes/s of rackplan_cross_rack_bytes_per_second over an average month, in dollars at prices.cross_az_per_gb charged each way.",
    ("kind", "group", "assignment"),
)
REPLICA_SELECTOR = Metric(
    "rackplan_replica_selector",
    GAUGE,
    "1 on the state of the brokers' replica.selector.class as last checked with DescribeConfigs (rack-aware: every broker runs the rack-aware selector; absent: some broker does not, reads go to leaders; unknown: not every broker would say), 0 on the others.",
    ("state",),
)

#: every metric, in the order of the exposition
DECLARED: tuple[Metric, ...] = (
    READY,
    POLLS_TOTAL,
    POLL_DURATION_SECONDS,
    SNAPSHOT_TIMESTAMP_SECONDS,
    SNAPSHOT_AGE_SECONDS,
    SNAPSHOT_PARTITIONS,
    SNAPSHOT_TOPICS,
    BROKERS,
    CHANGES_CONFIRMED_TOTAL,
    METADATA_CHANGES_TOTAL,
    TOPIC_RACK_CHANGES_TOTAL,
    PLANS_PUBLISHED_TOTAL,
    TOMBSTONES_PUBLISHED_TOTAL,
    PLAN_GENERATION,
    PUBLISH_FAILURES_TOTAL,
    PLAN_FAILURES_TOTAL,
    CROSS_RACK_PARTITIONS,
    FOREIGN_WRITERS_TOTAL,
    LIVE_CROSS_RACK_PARTITIONS,
    LIVE_ASSIGNED_PARTITIONS,
    CROSS_RACK_RATIO,
    ASSIGNED_PARTITIONS,
    ALERTS_TOTAL,
    ALERTS_FIRING,
    REGISTRATIONS,
    REGISTRATION_RECORDS_TOTAL,
    REGISTRATION_RECORDS_SKIPPED_TOTAL,
    REGISTRATIONS_EXPIRED_TOTAL,
    REGISTRATION_READ_FAILURES_TOTAL,
    DESCRIBE_GROUPS_FAILURES_TOTAL,
    WEBHOOK_ATTEMPTS_TOTAL,
    WEBHOOK_FAILURES_TOTAL,
    WEBHOOK_QUEUE_BATCHES,
    LEADER,
    OBSERVE_ONLY,
    LEASE_ACQUISITIONS_TOTAL,
    LEASE_REJOINS_TOTAL,
    PUBLISHER_FENCED_TOTAL,
    HANDOVERS_PENDING,
    HANDOVERS_TOTAL,
    FOLLOWERS,
    BUILD_INFO,
    CYCLE_DURATION_SECONDS,
    LIVE_UNKNOWN_RACK_PARTITIONS,
    MEMBER_RACKS_UNKNOWN,
    UNKNOWN_TOPIC_SUBSCRIPTIONS,
    ALERTS_UNFIXABLE,
    RECORDS_SKIPPED_TOTAL,
    PLAN_DISCREPANCIES,
    GENERATIONS_RESERVED_TOTAL,
    COUNTERS_EXHAUSTED,
    GROUP_PATH,
    LOCALITY_BASIS,
    ACHIEVABLE_CROSS_RACK_PARTITIONS,
    TRAFFIC_PARTITIONS_MEASURED,
    CROSS_RACK_BYTES_PER_SECOND,
    CROSS_RACK_DOLLARS_PER_MONTH,
    REPLICA_SELECTOR,
)
