"""The agent's loop: poll, diff, debounce, re-plan what a change touched, publish, alert.

One cycle per ``poll_interval_s``:

1. read new records of the registrations topic (and expire stale entries);
2. poll a complete metadata snapshot (a failed poll keeps the last good
   snapshot and publishes nothing);
3. diff it against the snapshot the plans were made from; a change must be
   seen in ``change_persist_polls`` consecutive polls before it counts;
4. describe the consumer groups that need their real membership this cycle
   (groups without registered members, groups touched by the change, groups
   whose alert fires, groups not yet evaluated), and merge the registrations;
5. re-plan the registrations the change touched or whose definition changed,
   publish each plan and wait for its confirmation; tombstone unregistered ones;
6. evaluate locality alerts (change, initial state, recovery) and send them to
   structlog, the alerts topic, metrics and the webhook (queued, never waited for).

``stop`` (set by SIGTERM/SIGINT) ends the loop after the current cycle, and
:meth:`Agent.close` flushes the producer and the webhook queue.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .admin_timeouts import admin_client_config
from .alerts import AlertEvent, AlertState
from .diff import REPLICA_RACKS, Debounce, SnapshotDiff, diff, hold_reassignments
from .handover import Pending, assignment_of, pending_from, revoking_record, split
from .http import AgentHttpServer
from .kafka_io import (
    LEASE_GROUP_HEADER,
    WRITER_HEADER,
    DeliveryUncertain,
    PlanTooLargeError,
    ProducerFenced,
    Publisher,
    PublishError,
    RawRecord,
    TopicSpec,
    TopicTail,
    ensure_topics,
    read_back,
    topic_config_problems,
    transactional_id,
)
from .lease import (
    HEARTBEAT_KEY,
    LEASE_PARTITIONS,
    Heartbeat,
    HeartbeatError,
    Lease,
    LeaseLost,
    LeaseUnconfirmed,
    decode_heartbeat,
    default_agent_id,
    foreign_writer,
    last_heartbeat,
)
from .logging import get_logger, with_kafka_logger
from .membership import GroupDescriber, RealGroup, member_racks
from .metadata import MetadataError, Snapshot, fetch_snapshot, known_racks, poll_snapshot
from .metrics import Metrics
from .planner import (
    PlanSkipped,
    Registration,
    assignment_locality,
    best_locality,
    current_locality,
    current_locality_by_rack,
    plan_for,
    registrations,
    scope_fingerprint,
    total_locality,
)
from .plans import (
    CONSUMER,
    STATE_REVOKING,
    Locality,
    PlanBook,
    PlanDecodeError,
    PlanRecord,
    decode_record,
    encode_value,
    utc_now_iso,
)
from .preflight import http_bind_error, reach_brokers
from .records import MAX_SAFE_INT
from .registry import (
    FOLLOWER_MODES,
    RegistrationRecordError,
    RegistrationStore,
    decode_registration,
    merge_registrations,
    settings_group_refusal,
)
from .settings import Settings
from .webhook import Post, WebhookNotifier, default_agent_url, with_cluster_label

PLAN_TOPIC_PARTITIONS = 1
ALERT_TOPIC_PARTITIONS = 1
EMBEDDED_FALLBACK = "the embedded cluster's mock API"

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
    #: registration keys added, changed (definition) and removed this cycle
    registered: list[str] = field(default_factory=list)
    reregistered: list[str] = field(default_factory=list)
    unregistered: list[str] = field(default_factory=list)
    #: plans that completed a two-phase handover since the last cycle (published between cycles)
    completed: list[PlanRecord] = field(default_factory=list)
    #: consumer groups described this cycle: locality of their live assignment (DescribeGroups)
    live: dict[str, Locality] = field(default_factory=dict)
    error: str = ""
    duration_s: float = 0.0


def topic_specs(settings: Settings) -> list[TopicSpec]:
    """The agent's topics.  Registrations and heartbeats are judged by their record timestamps, so those
    topics take the broker's append time: a writer cannot date its record (docs/security.md)."""
    compact = {"cleanup.policy": "compact", "max.message.bytes": str(settings.plan_max_message_bytes)}
    stamped = {"cleanup.policy": "compact", "message.timestamp.type": "LogAppendTime"}
    return [
        TopicSpec(settings.plan_topic, PLAN_TOPIC_PARTITIONS, compact),
        TopicSpec(settings.alerts_topic, ALERT_TOPIC_PARTITIONS, {"cleanup.policy": "delete"}),
        TopicSpec(settings.registrations_topic, settings.registrations.partitions, stamped),
        TopicSpec(settings.ha.lease_topic, LEASE_PARTITIONS, stamped),
    ]


def _labels(key: str) -> dict[str, str]:
    kind, _, name = key.partition("/")
    return {"kind": kind, "group": name}


class Agent:
    def __init__(
        self,
        settings: Settings,
        *,
        create_missing_topics: Callable[[list[TopicSpec]], None] | None = None,
        clock: Callable[[], float] = time.time,
        on_cycle: Callable[[CycleReport], None] | None = None,
        serve_http: bool = False,
        admin: Any = None,
        publisher: Publisher | None = None,
        webhook_post: Post | None = None,
    ) -> None:
        """``create_missing_topics`` creates topics the brokers would not (the embedded cluster).

        ``serve_http``: run the HTTP server of ``settings.http`` while :meth:`run` runs.
        ``admin``, ``publisher`` and ``webhook_post`` replace the real clients (benchmarks, tests).
        """
        self.settings = settings
        self.log = get_logger("rackplan.agent")
        self.client_config = settings.kafka.client_config()
        #: a real client: bootstrap host names are resolved before the first contact (not for replacements)
        self._real_admin = admin is None
        if admin is None:
            from confluent_kafka.admin import AdminClient

            admin = AdminClient(
                with_kafka_logger(
                    admin_client_config(self.client_config, settings.metadata.request_timeout_s)
                )
            )
        self.admin = admin
        self.create_missing_topics = create_missing_topics
        self.clock = clock
        self.on_cycle = on_cycle
        self.stop = threading.Event()
        self.metrics = Metrics(cluster=settings.cluster_name)
        self.file_regs: list[Registration] = registrations(settings)
        #: shared secret of signed registrations (registrations.secret_file), None: unsigned accepted
        self._reg_secret = settings.registrations.secret()
        self._reg_tail: TopicTail | None = None
        #: broker id -> rack as DescribeCluster last said: asked again only for brokers not in it
        self._rack_cache: dict[int, str | None] = {}
        self._racks_asked_at = time.monotonic()
        #: the lease topic read on each cycle for heartbeats of other agents (see :meth:`_watch_lease`)
        self._lease_tail: TopicTail | None = None
        #: the plan topic read on each cycle for records of other writers (see :meth:`_watch_plans`)
        self._plan_tail: TopicTail | None = None
        self.describer = GroupDescriber(
            self.admin,
            settings.membership,
            self.metrics,
            self.log,
            request_timeout_s=settings.metadata.request_timeout_s,
        )
        self._discovery = sorted(g["group_id"] for g in settings.consumer_groups if not g.get("members"))
        self._webhook_post = webhook_post
        self.webhook: WebhookNotifier | None = None
        self._alerts_topic_ok = True
        #: the lease topic exists (known once start() looked): heartbeats are published there
        self._lease_topic_ok = False
        self._heartbeat_failing = False
        self.publisher: Publisher | None = publisher
        self._own_publisher = publisher is None
        self.agent_id = settings.ha.agent_id or default_agent_id()
        #: the lease when several agents run (settings.ha.enabled); None: this agent always leads
        self.lease: Lease | None = None
        #: leadership epoch: one more than the last heartbeat on the lease topic
        self.epoch = 0
        self.leader = not settings.ha.enabled
        self.metrics.set("rackplan_leader", 1 if self.leader else 0)
        self._init_term()
        self.metrics.set_function(
            "rackplan_snapshot_age_seconds",
            lambda: None if self.last_good is None else max(0.0, self.clock() - self.last_good.taken_at),
        )
        self.serve_http = serve_http
        self.http: AgentHttpServer | None = None
        #: the agent's own topics are not watched: its writes move their leaders and offsets
        self.own_topics = frozenset(
            {
                settings.plan_topic,
                settings.alerts_topic,
                settings.registrations_topic,
                settings.ha.lease_topic,
            }
        )

    def _init_term(self) -> None:
        """Everything learnt from the topics and the cluster; a new leadership term starts from scratch."""
        s = self.settings
        self.book = PlanBook()
        self.regs: list[Registration] = list(self.file_regs)
        #: registrations that cannot be used now: key -> reason
        self.problems: dict[str, str] = {}
        self.store = RegistrationStore(s.registrations.ttl_s, s.registrations.max_clock_skew_s)
        #: plan keys whose newest record on the plan topic another writer wrote (see :meth:`_watch_plans`)
        self.discrepancies: dict[str, dict[str, Any]] = {}
        self.metrics.set("rackplan_plan_discrepancies", 0)
        #: plans whose publish timed out: they may still land, so their generation is never reused
        self._in_doubt: dict[str, PlanRecord] = {}
        #: keys whose newest record followers act on is foreign: key -> that plan (None: a tombstone)
        self._reassert: dict[str, PlanRecord | None] = {}
        if self._reg_tail is not None:
            self._reg_tail.close()
        self._reg_tail = None
        #: the registrations topic was read to its end at least once (else nothing is tombstoned)
        self._reg_synced = False
        #: real membership described this cycle, by group id
        self.real_groups: dict[str, RealGroup] = {}
        self._merge_key: Any = None
        self.alerts = AlertState(s.alerts)
        self.known: dict[int, str] = {}
        self.acted: tuple[Snapshot, Racks] | None = None
        self.last_good: Snapshot | None = None
        self.debounce: Debounce[tuple[Snapshot, Racks]] = Debounce(
            s.change_persist_polls, lambda a, b: diff(a[0], b[0], a[1], b[1]).empty
        )
        #: keys that must be (re)considered next cycle: new or changed registrations, failures
        self._retry: set[str] = set()
        #: keys whose initial state has not been evaluated for alerts yet
        self._initial_pending: set[str] = set()
        #: keys whose per-rack metrics must be computed (replayed and new plans)
        self._metrics_pending: set[str] = set()
        #: per-rack locality of plans just computed, so metrics need no second count
        self._planned_by_rack: dict[str, Mapping[str | None, Locality]] = {}
        #: scope fingerprint of every registration at the acted snapshot (see :meth:`_plan`)
        self._fp: dict[str, str] = {}
        #: key -> value of the plan last confirmed, recognised when read back (see :meth:`_watch_plans`)
        self._sent: dict[str, bytes] = {}
        #: key -> (snapshot, racks, registration fingerprint, scope fingerprint): see :meth:`_scope_fingerprint`
        self._fp_memo: dict[str, tuple[Snapshot, Racks, str, str]] = {}
        #: key -> (inputs, reason) of a plan skipped (PlanSkipped) on those inputs: see :meth:`_plan`
        self._skipped_inputs: dict[str, tuple[tuple[str, str, PlanRecord | None, bool], str]] = {}
        #: key -> (snapshot, racks, plan, registration fingerprint, floor): see :meth:`_best_locality`
        self._best_memo: dict[str, tuple[Snapshot, Racks, PlanRecord, str, Locality]] = {}
        self._skip_logged: dict[str, str] = {}
        self._problem_logged: dict[str, str] = {}
        #: reasons of plans whose publish failed, reused when they are retried
        self._unpublished_reason: dict[str, str] = {}
        #: unregistered keys whose tombstone is still to be published
        self._tombstone_pending: set[str] = set()
        self._tombstoned_at_start: list[str] = []
        #: two-phase handovers whose revoking plan is out and whose target is not: key -> pending
        self.handovers: dict[str, Pending] = {}
        #: when each group's followers were last asked to come back from group subscription
        self._rejoin_at: dict[str, float] = {}
        #: a handover whose target could not be published is retried after this (key -> clock)
        self._handover_retry_at: dict[str, float] = {}
        #: targets published between cycles, reported with the next cycle
        self._completed: list[PlanRecord] = []
        self._replayed = False
        self.ready = False
        self.metrics.set("rackplan_ready", 0)

    # ---- start-up ---------------------------------------------------------------

    def _ensure_topics(self) -> set[str]:
        """Create the agent's missing topics (through the embedded cluster when given); names still missing.

        :class:`AgentError` when the plan topic (or, with ``ha.enabled``, the lease topic) is missing.
        """
        s = self.settings
        timeout = s.metadata.request_timeout_s
        fallback = self.create_missing_topics
        existed = set(self.admin.list_topics(timeout=timeout).topics)
        missing = ensure_topics(
            self.admin, topic_specs(s), timeout, self.log, fallback=EMBEDDED_FALLBACK if fallback else None
        )
        if missing and fallback is not None:
            fallback(missing)
            self.log.info("topics created through the embedded cluster", topics=[m.name for m in missing])
            existing = set(self.admin.list_topics(timeout=timeout).topics)
            missing = [m for m in missing if m.name not in existing]
        names = {m.name for m in missing}
        # Topics created just now have the settings they were created with; the others are checked.
        self._check_topic_configs([t for t in topic_specs(s) if t.name in existed])
        if s.plan_topic in names:
            raise AgentError(
                f"plan topic {s.plan_topic!r} does not exist; see the logged command to create it"
            )
        self._lease_topic_ok = s.ha.lease_topic not in names
        if s.ha.lease_topic in names:
            if s.ha.enabled:
                raise AgentError(
                    f"lease topic {s.ha.lease_topic!r} does not exist; see the logged command to create it"
                )
            self.log.warning(
                "no lease topic: no heartbeat is published, so plan followers cannot tell that the agent "
                "is alive (they fall back to group subscription when no plan comes)",
                topic=s.ha.lease_topic,
            )
        if s.alerts_topic in names:
            self._alerts_topic_ok = False
            self.log.warning(
                "no alerts topic: alerts go to the log, metrics and webhook only", topic=s.alerts_topic
            )
        return names

    def _check_topic_configs(self, present: list[TopicSpec]) -> None:
        """DescribeConfigs on the agent's topics: a plan (or, with HA, lease) topic without compaction stops start-up.

        Other topics' problems are logged with the command that fixes them.
        """
        s = self.settings
        problems = topic_config_problems(self.admin, present, s.metadata.request_timeout_s)
        if problems is None:
            self.log.info("topic configuration not checked: the brokers do not answer DescribeConfigs")
            return
        fatal = {s.plan_topic} | ({s.ha.lease_topic} if s.ha.enabled else set())
        for name, problem in sorted(problems.items()):
            if name in fatal:
                raise AgentError(f"topic {name!r}: {problem}")
            self.log.error("topic misconfigured", topic=name, problem=problem)

    def start(self) -> None:
        """Topics, plan replay, registrations replay, producer; then :meth:`begin`."""
        s = self.settings
        names = self._ensure_topics()
        records = read_back(self.client_config, s.plan_topic, s.io_timeout_s, self.log, self._plan_skipped)
        # From here on the plan topic is watched for records this agent did not write (see _watch_plans).
        self._plan_tail = TopicTail(self.client_config, s.plan_topic, s.io_timeout_s)
        self._plan_tail.read_available(s.io_timeout_s)
        if s.registrations_topic in names:
            self.log.warning(
                "no registrations topic: registrations come from the settings file only",
                topic=s.registrations_topic,
            )
        else:
            self._reg_tail = TopicTail(self.client_config, s.registrations_topic, s.io_timeout_s)
            self._read_registrations(s.io_timeout_s)
            self.log.info(
                "registrations topic replayed",
                topic=s.registrations_topic,
                entries=len(self.store),
                complete=self._reg_synced,
            )
        if self.publisher is None:
            self.publisher = Publisher(
                self.client_config,
                s.plan_max_message_bytes,
                headers=[
                    (WRITER_HEADER, self.agent_id.encode()),
                    (LEASE_GROUP_HEADER, (self._lease_group or "").encode()),
                ],
                # Plan-topic records in transactions: a newer agent of these settings fences this one.  Not on
                # the embedded cluster (librdkafka's mock): it neither fences a producer nor hides aborted
                # records from read_committed readers, so an aborted publish would show a second content
                # under one generation there; the plain idempotent path keeps "one generation, one content".
                transactional_id=None
                if self.create_missing_topics is not None
                else transactional_id(s.ha.group_id, s.plan_topic),
                fenced_topics=[s.plan_topic],
                transaction_timeout_s=max(10.0, 2 * s.io_timeout_s),
            )
        if self._lease_topic_ok:
            last = self._no_foreign_writer(
                last_heartbeat(
                    self.client_config, s.ha.lease_topic, s.io_timeout_s, self.log, self._lease_skipped
                )
            )
            # Epochs are bounded when read (rackplan.agent.records.safe_int); one at the bound stays there.
            self.epoch = min((0 if last is None else last.epoch) + 1, MAX_SAFE_INT)
            self._lease_tail = TopicTail(self.client_config, s.ha.lease_topic, s.io_timeout_s)
            self._lease_tail.read_available(s.io_timeout_s)  # from here on, only what others write next
        self.begin(records)
        self._heartbeat()

    @property
    def _lease_group(self) -> str | None:
        return self.settings.ha.group_id if self.settings.ha.enabled else None

    def _no_foreign_writer(self, last: Heartbeat | None) -> Heartbeat | None:
        """Refuse to start (:class:`AgentError`) while another agent outside our lease group publishes.

        A fresh heartbeat of a foreign agent may be its last (it was killed, or
        restarted under a new id): wait up to two of its intervals for a newer
        one before refusing.  Returns the newest heartbeat, to continue its epoch.
        """
        s = self.settings
        now_ms = int(self.clock() * 1000)
        reason = foreign_writer(last, self.agent_id, self._lease_group, now_ms)
        if reason is None or last is None:
            return last
        self.log.warning(
            "another agent's heartbeat is fresh; waiting to see whether it still runs", reason=reason
        )
        deadline = time.monotonic() + 2 * last.interval_s + 1.0
        while time.monotonic() < deadline and not self.stop.is_set():
            self.stop.wait(min(1.0, last.interval_s / 2))
            newest = last_heartbeat(
                self.client_config, s.ha.lease_topic, s.io_timeout_s, self.log, self._lease_skipped
            )
            if (
                newest is not None
                and newest.agent_id == last.agent_id
                and newest.timestamp_ms > last.timestamp_ms
            ):
                again = foreign_writer(newest, self.agent_id, self._lease_group, int(self.clock() * 1000))
                if again is not None:
                    self.metrics.inc("rackplan_foreign_writers_total", {"topic": "lease"})
                    raise AgentError(again)
            if newest is not None and (newest.released or newest.agent_id != last.agent_id):
                return newest if newest.epoch >= last.epoch else last
        self.log.info("the other agent's heartbeat stopped: taking over its epoch", agent_id=last.agent_id)
        return last

    def _plan_skipped(self, reason: str) -> None:
        self.metrics.inc("rackplan_records_skipped_total", {"topic": "plans", "reason": reason})

    def _lease_skipped(self, reason: str) -> None:
        self.metrics.inc("rackplan_records_skipped_total", {"topic": "lease", "reason": reason})

    def _watch_plans(self) -> None:
        """Records on the plan topic this agent did not write: a foreign writer is reported, never silent.

        Every record the agent publishes carries :data:`WRITER_HEADER` (its id) and
        :data:`LEASE_GROUP_HEADER`.  A record without them, or from an agent outside our lease group,
        was written by someone else: a tool, a forger, an agent started with other settings.  It is
        counted (``rackplan_foreign_writers_total{topic="plans"}``) and logged with its key,
        generation and writer; followers read it, so it is a *discrepancy* until this agent
        publishes that key again: ``rackplan_plan_discrepancies`` and ``/v1/plans`` show it.  A
        foreign plan's generation is reserved (never planned again), so the agent's next plan of
        the key outranks it for followers.  A late record of a previous leader of our own group
        (the window a lease leaves between confirmation and publish) is logged as such.  Records
        are decoded with the bounded decoder: a poison record is skipped and counted, like at start.
        """
        if self._plan_tail is None:
            return
        raw, _errors = self._plan_tail.read_new()
        for r in raw:
            writer = r.header(WRITER_HEADER)
            key = (r.key or b"").decode("utf-8", "replace")[:500]
            if (
                r.value is not None
                and self._sent.get(key) == r.value
                and key not in self._in_doubt
                and writer is not None
                and writer.decode("utf-8", "replace") == self.agent_id
            ):
                # Our own plan, byte for byte as published and confirmed: nothing to decode or learn.
                del self._sent[key]
                self._own_record_read_back(key, None)
                continue
            try:
                rec = decode_record(r.key or b"", r.value) if r.key is not None else None
                bad = None if r.key is not None else "bad_key"
            except PlanDecodeError as e:
                rec, bad = None, e.reason
                self._plan_skipped(e.reason)
                self.log.warning("plan record skipped", reason=str(e), partition=r.partition, offset=r.offset)
            if writer is not None and writer.decode("utf-8", "replace") == self.agent_id:
                self._own_record_read_back(key, rec)
                continue
            group = (r.header(LEASE_GROUP_HEADER) or b"").decode("utf-8", "replace") or None
            generation: Any = None if rec is None else rec.generation
            if bad is not None:
                generation = f"not a plan ({bad})"
            who = None if writer is None else writer.decode("utf-8", "replace")
            if who is not None and self._lease_group is not None and group == self._lease_group:
                self.log.warning(
                    "plan record of another leader of this lease group",
                    key=key,
                    writer=who,
                    generation=generation,
                )
                if rec is not None:
                    self.book.reserve(key, rec.generation)
                continue
            self.metrics.inc("rackplan_foreign_writers_total", {"topic": "plans"})
            # Followers act on a tombstone, and on a plan above every generation they saw; they skip the rest.
            followed = bad is None and (
                self.book.latest(key) is not None
                if rec is None
                else rec.generation >= self.book.next_generation(key)
            )
            if rec is not None and self.book.reserve(key, rec.generation):
                self.metrics.inc("rackplan_generations_reserved_total", {"reason": "foreign_plan"})
            if followed:
                self._reassert[key] = rec
                self.discrepancies[key] = {
                    "writer": who or "unknown (no rackplan header)",
                    "writer_lease_group": group,
                    "tombstone": r.value is None,
                    "generation": generation,
                    "offset": r.offset,
                    "timestamp_ms": r.timestamp_ms,
                }
                self.metrics.set("rackplan_plan_discrepancies", len(self.discrepancies))
            self.log.error(
                "foreign writer on the plan topic: a record this agent did not write",
                key=key,
                tombstone=r.value is None,
                generation=generation,
                writer=who or "unknown (no rackplan header)",
                writer_lease_group=group,
                partition=r.partition,
                offset=r.offset,
            )

    def _own_record_read_back(self, key: str, rec: PlanRecord | None) -> None:
        """Our own record, read back: it ends a discrepancy, and confirms a plan whose publish timed out."""
        if self.discrepancies.pop(key, None) is not None:
            self.metrics.set("rackplan_plan_discrepancies", len(self.discrepancies))
        doubt = self._in_doubt.get(key)
        if rec is not None and doubt is not None and rec.generation == doubt.generation:
            del self._in_doubt[key]
            if self.book.apply(key, doubt):  # delivered after all: it is what followers hold
                self._retry.add(key)  # planned again against it, in case the cluster moved on meanwhile
                if doubt.state == STATE_REVOKING and doubt.handover is not None:  # its target must follow
                    self.handovers[key] = Pending(doubt, tuple(doubt.handover["awaiting"]), self.clock())
                    self._handover_metrics()
                self.log.info(
                    "plan whose publish timed out was delivered", key=key, generation=rec.generation
                )

    def _watch_lease(self) -> None:
        """Heartbeats others wrote since the last cycle: a foreign writer stops us, a newer leader of our group
        means the lease was lost (:class:`LeaseLost`)."""
        if self._lease_tail is None:
            return
        raw, _errors = self._lease_tail.read_new()
        now_ms = int(self.clock() * 1000)
        for r in raw:
            try:
                hb = dataclasses.replace(decode_heartbeat(r.key, r.value), seen_ms=r.timestamp_ms)
            except HeartbeatError as e:
                self._lease_skipped(e.reason)
                self.log.warning(
                    "lease record skipped", reason=str(e), partition=r.partition, offset=r.offset
                )
                continue
            if hb.agent_id == self.agent_id or hb.released:
                continue
            reason = foreign_writer(hb, self.agent_id, self._lease_group, now_ms)
            if reason is not None:
                self.metrics.inc("rackplan_foreign_writers_total", {"topic": "lease"})
                self.log.error(
                    "foreign writer on the lease topic; this agent stops publishing", reason=reason
                )
                raise AgentError(reason)
            if self.lease is not None and hb.epoch >= self.epoch:
                raise LeaseLost(f"agent {hb.agent_id!r} leads with epoch {hb.epoch} (ours {self.epoch})")

    def begin(self, plan_records: list[tuple[str, PlanRecord | None]]) -> None:
        """Start-up after the Kafka part: replayed plans in, registrations merged, the unregistered tombstoned.

        :meth:`start` calls it; benchmarks and tests with fake clients call it directly.
        """
        s = self.settings
        for key, generation in self.book.replay(plan_records):
            self.log.warning(
                "stale plan record ignored: its generation is not above an earlier one",
                key=key,
                generation=generation,
            )
        self.log.info(
            "plan topic replayed",
            topic=s.plan_topic,
            records=len(plan_records),
            live_plans=len(self.book.live_keys()),
        )
        if self._reg_tail is None:
            self._reg_synced = True  # nothing to wait for: the file is all there is
        if s.webhook.url is not None and self.webhook is None:
            self.webhook = WebhookNotifier(
                with_cluster_label(s.webhook, s.cluster_name),
                self.metrics,
                get_logger("rackplan.webhook"),
                firing_ttl_s=4 * max(s.webhook.resend_interval_s, s.poll_interval_s),
                post=self._webhook_post,
                agent_url=default_agent_url(s.http),
            )
        self._refresh_registrations(CycleReport(ok=True), self._discovery)
        if self._reg_synced:
            stale = sorted(k for k in self.book.live_keys() if k not in {r.key for r in self.regs})
            if stale:
                self._tombstone_pending.update(stale)
                self._tombstoned_at_start = self._publish_tombstones()
                if self._tombstoned_at_start:
                    self.log.info("tombstoned plans of unregistered groups", keys=self._tombstoned_at_start)
        keys = {r.key for r in self.regs}
        self._retry = set(keys)
        self._initial_pending = set(keys)
        now = self.clock()
        for key in self.book.live_keys():
            rec = self.book.latest(key)
            if rec is not None:
                self.metrics.set("rackplan_plan_generation", rec.generation, _labels(key))
                self._metrics_pending.add(key)
            pending = pending_from(rec, now) if key in keys else None
            if pending is not None:  # another agent (or this one, before a restart) started it
                self.handovers[key] = pending
                self.log.info(
                    "resuming handover",
                    key=key,
                    generation=pending.generation,
                    awaiting=list(pending.awaiting),
                )
        self._handover_metrics()
        self._replayed = True

    def _sleep(self, seconds: float) -> None:
        self.stop.wait(seconds)  # a stop request cuts a retry backoff short

    # ---- registrations ----------------------------------------------------------

    def _read_registrations(self, timeout_s: float) -> None:
        """Apply new records of the registrations topic, then expire stale entries."""
        if self._reg_tail is not None:
            self._apply_registration_records(timeout_s)
            check_s = min(timeout_s, max(1.0, self.settings.poll_interval_s))
            if self.store.due(int(self.clock() * 1000)) and not self._registrations_caught_up(check_s):
                # Silence is not absence: a partition whose leader is away (a broker restarting) delivers
                # nothing, and expiring its members would plan without them while they still read.
                self.metrics.inc("rackplan_registration_read_failures_total")
                self.log.warning(
                    "registrations topic not confirmed read to its end; nothing expires this cycle",
                    due=self.store.due(int(self.clock() * 1000)),
                )
                return
        expired = self.store.expire(int(self.clock() * 1000))
        if expired:
            self.metrics.inc("rackplan_registrations_expired_total", by=len(expired))
            self.log.info("registrations expired", keys=expired, ttl_s=self.settings.registrations.ttl_s)

    def _registrations_caught_up(self, timeout_s: float) -> bool:
        """Read the registrations topic to its end offsets now; False when that could not be confirmed."""
        assert self._reg_tail is not None
        try:
            raw, complete = self._reg_tail.read_available(timeout_s)
        except PublishError as e:
            self.log.info("registrations end offsets unknown", error=str(e))
            return False
        self._apply_raw_registrations(raw)
        return complete

    def _apply_registration_records(self, timeout_s: float) -> None:
        assert self._reg_tail is not None
        m = self.metrics
        complete = True
        try:
            if self._reg_synced:  # the cheap read: what the consumer already fetched
                raw, errors = self._reg_tail.read_new()
                for err in errors:
                    self.log.info("registrations consumer", error=err)
            else:  # read to the end offsets, so that nothing is tombstoned for a record not read yet
                raw, complete = self._reg_tail.read_available(timeout_s)
        except PublishError as e:
            m.inc("rackplan_registration_read_failures_total")
            self.log.warning("registrations topic not readable this cycle", error=str(e))
            return
        self._apply_raw_registrations(raw)
        if complete:
            self._reg_synced = True
        else:
            m.inc("rackplan_registration_read_failures_total")
            self.log.warning(
                "registrations topic not read to its end in time; the rest follows next cycle",
                timeout_s=timeout_s,
            )

    def _apply_raw_registrations(self, raw: list[RawRecord]) -> None:
        m = self.metrics
        now_ms = int(self.clock() * 1000)
        reg = self.settings.registrations
        skew_ms = int(reg.max_clock_skew_s * 1000)
        for r in raw:
            try:
                entry = decode_registration(
                    r.key, r.value, r.timestamp_ms, secret=self._reg_secret, max_skew_ms=skew_ms
                )
                key = r.key.decode("utf-8") if r.key is not None else ""
                refusal = None if entry is None else settings_group_refusal(self.settings, entry)
                if refusal is not None:
                    raise RegistrationRecordError("settings_group", refusal)
            except RegistrationRecordError as e:
                m.inc("rackplan_registration_records_total", {"result": "skipped"})
                m.inc("rackplan_registration_records_skipped_total", {"reason": e.reason})
                m.inc("rackplan_records_skipped_total", {"topic": "registrations", "reason": e.reason})
                self.log.warning(
                    "registration record skipped", reason=str(e), partition=r.partition, offset=r.offset
                )
                continue
            if entry is not None and entry.timestamp_ms > now_ms + skew_ms:
                self.log.warning(
                    "registration dated in the future beyond the clock skew; its TTL counts from now",
                    key=key,
                    ahead_s=round((entry.timestamp_ms - now_ms) / 1000, 1),
                )
            self.store.apply(key, entry, now_ms)
            m.inc(
                "rackplan_registration_records_total", {"result": "tombstone" if entry is None else "applied"}
            )

    def _archive(self, snap: Snapshot, racks: Racks) -> None:
        """History for the fleet job: one snapshot line per confirmed change; never fatal."""
        directory = self.settings.archive_dir
        if directory is None:
            return
        try:
            from .archive import append_archive, build_snapshot

            name = self.settings.cluster_name or self.settings.kafka.bootstrap_servers
            path = append_archive(build_snapshot(name, snap, racks, self.settings), directory)
        except Exception as e:  # a full disk must not stop planning
            self.log.error("snapshot not archived", directory=str(directory), error=str(e))
        else:
            self.log.info("snapshot archived", path=str(path))

    def _refresh_registrations(self, report: CycleReport, describe: Iterable[str]) -> None:
        """Describe ``describe`` groups, merge file + topic + discovered; note what was added, changed, removed."""
        wanted = sorted(set(describe))
        self.real_groups = self.describer.describe(wanted) if wanted and self.describer.enabled else {}
        discovered = {g: self.real_groups[g] for g in self._discovery if g in self.real_groups}
        merge_key = (self.store.version, tuple(sorted(discovered.items())))
        if merge_key == self._merge_key:
            return
        self._merge_key = merge_key
        merged = merge_registrations(self.settings, self.store.entries(), discovered)
        for key, reason in sorted(merged.problems.items()):
            if self._problem_logged.get(key) != reason:
                self._problem_logged[key] = reason
                self.log.warning("registration not usable", key=key, reason=reason)
        for key in [k for k in self._problem_logged if k not in merged.problems]:
            del self._problem_logged[key]
        self.problems = merged.problems
        old = {r.key: r for r in self.regs}
        new = {r.key: r for r in merged.registrations}
        report.registered = sorted(k for k in new if k not in old)
        report.reregistered = sorted(k for k in new if k in old and old[k].fingerprint != new[k].fingerprint)
        report.unregistered = sorted(k for k in old if k not in new)
        self.regs = merged.registrations
        self._retry.update(report.registered, report.reregistered)
        self._initial_pending.update(report.registered)
        now = self.clock()
        for key in report.unregistered:
            self._retry.discard(key)
            self._initial_pending.discard(key)
            ev = self.alerts.drop(key, "group unregistered", now)
            if ev is not None:
                report.alerts.append(ev)
            if self.book.latest(key) is not None:
                self._tombstone_pending.add(key)
            self._forget_metrics(key)
            self._fp.pop(key, None)
            self._best_memo.pop(key, None)
            self._fp_memo.pop(key, None)
            self._skipped_inputs.pop(key, None)
        if report.registered or report.reregistered or report.unregistered:
            self.log.info(
                "registrations changed",
                added=report.registered,
                changed=report.reregistered,
                removed=report.unregistered,
            )
        counts: dict[tuple[tuple[str, str], ...], float] = {}
        for r in self.regs:
            lab = (("kind", r.kind), ("source", r.source))
            counts[lab] = counts.get(lab, 0) + 1
        self.metrics.replace("rackplan_registrations", {}, counts)

    def _forget_metrics(self, key: str) -> None:
        labels = _labels(key)
        for name in (
            "rackplan_cross_rack_partitions",
            "rackplan_cross_rack_ratio",
            "rackplan_assigned_partitions",
            "rackplan_plan_generation",
            "rackplan_alerts_firing",
        ):
            self.metrics.remove(name, labels)

    def _publish_tombstones(self) -> list[str]:
        """Tombstones of unregistered keys (a key registered again meanwhile keeps its plan)."""
        if not self._tombstone_pending:
            return []
        live = {r.key for r in self.regs}
        keys = sorted(k for k in self._tombstone_pending if k not in live and self.book.latest(k) is not None)
        self._tombstone_pending = set(keys)
        if not keys or self.publisher is None:
            return []
        s = self.settings
        try:
            self._guard()
            self.publisher.publish_many(s.plan_topic, [(k, None) for k in keys], s.io_timeout_s)
        except PublishError as e:
            self.metrics.inc("rackplan_publish_failures_total", {"record": "tombstone"})
            self.log.error("tombstones not confirmed; will retry", keys=keys, error=str(e))
            return []
        for k in keys:
            self.book.apply(k, None)
            self.handovers.pop(k, None)
            self.metrics.inc("rackplan_tombstones_published_total", {"kind": _labels(k)["kind"]})
        self._tombstone_pending = set()
        self.log.info("plans tombstoned", keys=keys)
        return keys

    # ---- one cycle --------------------------------------------------------------

    def run_once(self) -> CycleReport:
        t0 = time.monotonic()
        completed, self._completed = self._completed, []
        self._watch_lease()
        self._watch_plans()
        report = self._cycle()
        report.completed = completed + report.completed
        self._heartbeat()
        self._follower_metrics()
        report.duration_s = time.monotonic() - t0
        m = self.metrics
        m.inc("rackplan_polls_total", {"result": "ok" if report.ok else "failed"})
        m.observe("rackplan_cycle_duration_seconds", report.duration_s)
        if self._tombstoned_at_start:
            report.tombstoned = self._tombstoned_at_start + report.tombstoned
            self._tombstoned_at_start = []
        if report.ok and self._replayed and not self.ready:
            self.ready = True
            m.set("rackplan_ready", 1)
            self.log.info("ready", registrations=len(self.regs), plans=len(self.book.live_keys()))
        if self.on_cycle is not None:
            self.on_cycle(report)
        return report

    def _serve_logs(self) -> None:
        """librdkafka's log lines of the admin client and producer arrive through their poll calls."""
        poll = getattr(self.admin, "poll", None)
        if callable(poll):
            poll(0)
        if self.publisher is not None:
            self.publisher.poll()

    def _cycle(self) -> CycleReport:
        s = self.settings
        self._serve_logs()
        self._read_registrations(s.registrations.read_timeout_s)

        def retrying(attempt: int, delay: float, err: MetadataError) -> None:
            self.log.warning(
                "metadata poll failed; retrying", attempt=attempt, delay_s=round(delay, 3), error=str(err)
            )

        polled_at = time.monotonic()
        if polled_at - self._racks_asked_at >= s.metadata.rack_refresh_s:
            self._rack_cache.clear()  # every rack asked again: a restart inside one poll changes no broker id
            self._racks_asked_at = polled_at
        try:
            snap = poll_snapshot(
                self.admin,
                s.metadata,
                sleep=self._sleep,
                on_retry=retrying,
                exclude=self.own_topics,
                fetch=lambda admin, ms, ex: fetch_snapshot(admin, ms, ex, rack_cache=self._rack_cache),
            )
        except MetadataError as e:
            self.metrics.observe("rackplan_poll_duration_seconds", time.monotonic() - polled_at)
            age = None if self.last_good is None else round(self.clock() - self.last_good.taken_at, 3)
            self.log.error(
                "metadata poll failed; keeping the last good snapshot", error=str(e), snapshot_age_s=age
            )
            return CycleReport(ok=False, error=str(e))
        self.metrics.observe("rackplan_poll_duration_seconds", time.monotonic() - polled_at)
        if self.acted is not None:
            snap = hold_reassignments(self.acted[0], snap)
        self.known = known_racks(self.known, snap)
        racks = snap.resolve_racks(self.known)
        self.last_good = snap
        self._snapshot_metrics(snap, racks)
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
            self._archive(snap, racks)
        else:
            d = diff(self.acted[0], snap, self.acted[1], racks)
            confirmed = self.debounce.observe(not d.empty, (snap, racks))
            report.change = None if d.empty else d
            report.pending_polls = self.debounce.pending_polls
            if confirmed is not None:
                previous, self.acted = self.acted, confirmed
                change = d
                report.confirmed = True
                self._change_metrics(d)
                self.log.info("metadata change confirmed", changes=d.counts(), reason=d.reason(limit=5))
                self._archive(*confirmed)
            elif not d.empty:
                self.log.info(
                    "metadata change seen; waiting for it to persist",
                    changes=d.counts(),
                    seen_polls=self.debounce.pending_polls,
                    required_polls=self.debounce.polls,
                )
        self._refresh_registrations(report, self._describe_wanted(change))
        self._live_locality(report, snap, racks)
        report.completed += self._advance_handovers()
        rejoin = self._rejoin_wanted()
        registered = {r.key for r in self.regs}
        for key in [k for k in self._reassert if k not in registered]:
            del self._reassert[key]  # not ours to plan: reported (discrepancy), not answered
        candidates = [
            r
            for r in self.regs
            if r.key in self._retry
            or r.key in rejoin
            or r.key in self._reassert
            or (change is not None and not change.touched_topics.isdisjoint(r.topics))
        ]
        self._retry = set()
        acted_snap, acted_racks = self.acted
        previous_fp = dict(self._fp) if change is not None else {}
        records: list[tuple[PlanRecord, Registration]] = []
        for reg in candidates:
            if reg.key in self.handovers:  # one handover at a time: planned again once it completes
                self._retry.add(reg.key)
                continue
            rec = self._plan(
                reg,
                acted_snap,
                acted_racks,
                change,
                report,
                rejoin=reg.key in rejoin,
                reassert=reg.key in self._reassert,
            )
            if rec is not None:
                records.append((rec, reg))
        replaced = self._publish(records, report)
        report.tombstoned += self._publish_tombstones()
        self._group_metrics(acted_snap, acted_racks)
        self._evaluate_alerts(
            records, replaced, change, previous, previous_fp, acted_snap, acted_racks, report
        )
        return report

    def _live_locality(self, report: CycleReport, snap: Snapshot, racks: Racks) -> None:
        """Locality of the live assignments described this cycle (what the brokers say members read)."""
        regs = {r.name: r for r in self.regs if r.kind == CONSUMER}
        for name, real in sorted(self.real_groups.items()):
            reg = regs.get(name)
            if reg is None or not any(m.assignment for m in real.members):
                continue
            mr = member_racks(real, reg.spec.get("members") or [], self.settings.rack_mapping)
            loc = assignment_locality(snap, racks, reg, real.assignment(), mr)
            report.live[reg.key] = loc
            self.metrics.set("rackplan_live_cross_rack_partitions", loc.cross_rack, _labels(reg.key))
            self.metrics.set("rackplan_live_assigned_partitions", loc.total, _labels(reg.key))

    def _describe_wanted(self, change: SnapshotDiff | None) -> list[str]:
        """Consumer groups whose real membership this cycle needs."""
        want = set(self._discovery)
        for reg in self.regs:
            if reg.kind != CONSUMER:
                continue
            if (
                reg.key in self._initial_pending
                or reg.key in self._retry
                or (change is not None and not change.touched_topics.isdisjoint(reg.topics))
            ):
                want.add(reg.name)
        want.update(k.partition("/")[2] for k in self.alerts.tracked() if k.startswith(f"{CONSUMER}/"))
        return sorted(want)

    def _plan(
        self,
        reg: Registration,
        snap: Snapshot,
        racks: Racks,
        change: SnapshotDiff | None,
        report: CycleReport,
        rejoin: bool = False,
        reassert: bool = False,
    ) -> PlanRecord | None:
        """The next plan of ``reg``, or None when the plan of record holds.

        For a group with plan-following members the plan is complete (nothing
        withheld) and, when a partition moves away from a live follower, comes
        as the revoking phase of a two-phase handover.  ``rejoin``: its
        followers fell back to group subscription and must be brought back, so
        a plan is made even if nothing else changed.  ``reassert``: the newest
        record followers act on was written by someone else (a forged plan or
        tombstone); a plan above it is made even if nothing else changed, its
        handover judged against what the followers were told to hold.
        """
        last = self.book.latest(reg.key)
        fp = self._scope_fingerprint(reg, snap, racks)
        self._fp[reg.key] = fp
        doubt = self._in_doubt.get(reg.key)
        if (
            doubt is not None
            and not rejoin
            and doubt.generation == self.book.next_generation(reg.key) - 1  # nothing above it since
            and doubt.cluster_fingerprint == fp
            and doubt.registration_fingerprint == reg.fingerprint
        ):
            return doubt  # the same record again, byte for byte: one generation, one content
        if (
            not rejoin
            and not reassert
            and last is not None
            and last.cluster_fingerprint == fp
            and last.registration_fingerprint == reg.fingerprint
        ):
            return None  # the plan of record still holds
        followers = self.store.followers(reg.kind, reg.name) if reg.kind == CONSUMER else {}
        inputs = (reg.fingerprint, fp, last, bool(followers))
        skipped = self._skipped_inputs.get(reg.key)
        if not rejoin and not reassert and skipped is not None and skipped[0] == inputs:
            # Skipped before on these very inputs (a topic missing, no members): the same reason again,
            # without planning again.  Any change of the registration, its topics' racks or its plan of
            # record plans it again.
            report.skipped[reg.key] = skipped[1]
            self.metrics.inc("rackplan_plan_failures_total", {"kind": reg.kind})
            self._retry.add(reg.key)
            return None
        self._skipped_inputs.pop(reg.key, None)
        try:
            if followers:
                result = plan_for(snap, racks, reg, last, complete=True)
            else:
                result = plan_for(snap, racks, reg, last)
        except Exception as e:  # an assignor bug must not stop the plans of other groups
            report.skipped[reg.key] = str(e) or repr(e)
            self.metrics.inc("rackplan_plan_failures_total", {"kind": reg.kind})
            if self._skip_logged.get(reg.key) != report.skipped[reg.key]:  # once per distinct reason
                if isinstance(e, PlanSkipped):
                    self.log.warning("plan skipped", key=reg.key, reason=str(e))
                else:
                    self.log.error("planning failed", key=reg.key, error=repr(e), exc_info=True)
                self._skip_logged[reg.key] = report.skipped[reg.key]
            if isinstance(e, PlanSkipped):  # a verdict on these inputs, not a failure that may pass
                self._skipped_inputs[reg.key] = (inputs, report.skipped[reg.key])
            self._retry.add(reg.key)
            return None
        self._skip_logged.pop(reg.key, None)
        self._planned_by_rack[reg.key] = result.after_by_rack
        if reassert:
            reason = "the plan of record again, above a record another writer put on the plan topic"
        elif rejoin:
            reason = "followers rejoin the plan after group subscription"
        elif last is None:
            reason = "initial plan"
        elif last.registration_fingerprint != reg.fingerprint:
            reason = "registration changed"
        elif change is not None:
            reason = change.reason(reg.topics, leaders=reg.fetch_mode == "leader") or "cluster changed"
        elif reg.key in self._unpublished_reason:
            reason = self._unpublished_reason[reg.key]
        else:
            reason = "cluster changed while the agent was away"
        rec = PlanRecord(
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
            publisher=self._publisher_info(),
        )
        if followers:
            target = assignment_of(rec.body)
            held = last if last is not None else self.book.last_live(reg.key)  # a tombstone releases nothing
            if reassert and self._reassert.get(reg.key) is not None:
                held = self._reassert[reg.key]  # followers follow the forged plan: they hold what it gave
            phase = split(target, None if held is None else held.body, followers)
            if phase is not None:
                return revoking_record(rec, phase, self.settings.followers.release_timeout_s)
        return rec

    def _scope_fingerprint(self, reg: Registration, snap: Snapshot, racks: Racks) -> str:
        """:func:`scope_fingerprint`, computed again only for another snapshot, rack map or registration.

        A registration retried every cycle (skipped, or waiting for a handover)
        would otherwise hash all its topics' partitions each time.
        """
        memo = self._fp_memo.get(reg.key)
        if memo is not None and memo[0] is snap and memo[1] is racks and memo[2] == reg.fingerprint:
            return memo[3]
        fp = scope_fingerprint(snap, racks, reg.topics, reg.fetch_mode)
        self._fp_memo[reg.key] = (snap, racks, reg.fingerprint, fp)
        return fp

    def _publish(
        self, records: list[tuple[PlanRecord, Registration]], report: CycleReport
    ) -> dict[str, PlanRecord | None]:
        """Publish each plan, confirmed; returns the plans of record they replaced."""
        replaced: dict[str, PlanRecord | None] = {}
        if not records:
            return replaced
        assert self.publisher is not None, "start() first"
        s = self.settings
        try:
            self._guard()
        except LeaseUnconfirmed as e:
            self.log.warning("lease not confirmed; plans wait for the next cycle", error=str(e))
            for rec, _reg in records:
                self._retry.add(rec.key)
                self._unpublished_reason[rec.key] = rec.reason
            return replaced
        # One batch, one wait for the brokers: each plan still succeeds or fails on its own.
        values: list[tuple[str, bytes | None]] = [(rec.key, encode_value(rec)) for rec, _reg in records]
        outcomes = self.publisher.publish_each(s.plan_topic, values, s.io_timeout_s)
        for (key, value), outcome in zip(values, outcomes, strict=True):
            if outcome is None and value is not None and self._plan_tail is not None:
                self._sent[key] = value  # read back next cycle without decoding (see _watch_plans)
        for (rec, _reg), outcome in zip(records, outcomes, strict=True):
            try:
                if outcome is not None:
                    raise outcome
            except PlanTooLargeError as e:
                self.log.error("plan too large to publish", key=rec.key, error=str(e))
                self.metrics.inc("rackplan_publish_failures_total", {"record": "plan"})
                report.skipped[rec.key] = str(e)
                continue
            except PublishError as e:
                self.log.error("plan not confirmed; will retry", key=rec.key, error=str(e))
                self.metrics.inc("rackplan_publish_failures_total", {"record": "plan"})
                self._retry.add(rec.key)
                self._unpublished_reason[rec.key] = rec.reason
                if isinstance(e, DeliveryUncertain):
                    self._doubt(rec)
                continue
            self._unpublished_reason.pop(rec.key, None)
            self._in_doubt.pop(rec.key, None)
            self._reassert.pop(rec.key, None)
            replaced[rec.key] = self.book.latest(rec.key)
            self.book.apply(rec.key, rec)
            if rec.state == STATE_REVOKING and rec.handover is not None:
                self.handovers[rec.key] = Pending(rec, tuple(rec.handover["awaiting"]), self.clock())
                self._handover_metrics()
            self._tombstone_pending.discard(rec.key)
            report.published.append(rec)
            self.metrics.inc("rackplan_plans_published_total", {"kind": rec.kind})
            self.metrics.set("rackplan_plan_generation", rec.generation, _labels(rec.key))
            self._metrics_pending.add(rec.key)
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
                state=rec.state,
                **({} if rec.handover is None else {"awaiting": rec.handover.get("awaiting")}),
            )
        return replaced

    def _doubt(self, rec: PlanRecord) -> None:
        """A plan whose publish timed out may still land: its generation names its content for good.

        The retry re-sends the same bytes if the plan still holds then (same
        cluster and registration fingerprints), else plans the next generation.
        """
        self._in_doubt[rec.key] = rec
        if self.book.reserve(rec.key, rec.generation):  # not again when the same record is re-sent
            self.metrics.inc("rackplan_generations_reserved_total", {"reason": "uncertain_delivery"})
        self.log.warning(
            "plan delivery uncertain: its generation is never reused for another content",
            key=rec.key,
            generation=rec.generation,
        )

    # ---- leadership and handovers ------------------------------------------------

    def _publisher_info(self) -> dict[str, Any] | None:
        """Who published a plan, when several agents may: agent id and leadership epoch."""
        if not self.settings.ha.enabled:
            return None
        return {"agent_id": self.agent_id, "epoch": self.epoch}

    def _guard(self) -> None:
        """Before publishing: with a lease, prove it is still held (:class:`LeaseLost` otherwise)."""
        if self.lease is not None:
            self.lease.confirm(min(self.settings.io_timeout_s, self.settings.ha.session_timeout_s))

    def _heartbeat(self) -> None:
        """The leader's heartbeat on the lease topic: followers tell a live agent from a gone one by it."""
        if not self._lease_topic_ok or self.publisher is None or not self._replayed:
            return
        s = self.settings
        hb = Heartbeat(
            self.agent_id, self.epoch, int(self.clock() * 1000), s.poll_interval_s, self._lease_group
        )
        try:
            self._guard()
        except LeaseUnconfirmed as e:
            self.log.warning("heartbeat not published: lease not confirmed", error=str(e))
            return
        # Never waited for: a broker outage must not stall the loop; a lost heartbeat is followed by the next.
        self.publisher.send(s.ha.lease_topic, HEARTBEAT_KEY.decode(), hb.encode(), self._heartbeat_result)

    def _release_heartbeat(self) -> None:
        """A clean stop's last heartbeat: a successor with other settings need not wait for ours to age."""
        s = self.settings
        if self.publisher is None or not self._replayed or (self.lease is not None and not self.lease.held):
            return
        hb = Heartbeat(
            self.agent_id,
            self.epoch,
            int(self.clock() * 1000),
            s.poll_interval_s,
            self._lease_group,
            released=True,
        )
        try:
            self.publisher.publish(s.ha.lease_topic, HEARTBEAT_KEY.decode(), hb.encode(), s.io_timeout_s)
        except PublishError as e:
            self.log.warning("released heartbeat not delivered", error=str(e))

    def _heartbeat_result(self, error: str | None) -> None:
        if error is not None:
            self.metrics.inc("rackplan_publish_failures_total", {"record": "heartbeat"})
            if not self._heartbeat_failing:
                self.log.warning("heartbeat not delivered", error=error)
        self._heartbeat_failing = error is not None

    def _rejoin_wanted(self) -> set[str]:
        """Follower groups with members in group subscription: they are brought back with a handover.

        At most once per 2 × ``followers.release_timeout_s`` per group, so
        followers that cannot come back (another consumer still in their group)
        are not asked every cycle.
        """
        out: set[str] = set()
        now = self.clock()
        gap = 2 * self.settings.followers.release_timeout_s
        for reg in self.regs:
            if reg.kind != CONSUMER or reg.key in self.handovers:
                continue
            followers = self.store.followers(reg.kind, reg.name)
            subscribed = any(st.mode == "subscription" for st in followers.values())
            if subscribed and now - self._rejoin_at.get(reg.key, -math.inf) >= gap:
                self._rejoin_at[reg.key] = now
                out.add(reg.key)
        return out

    def _advance_handovers(self) -> list[PlanRecord]:
        """Publish the target of every handover whose releases are in (or whose release timeout passed)."""
        done: list[PlanRecord] = []
        if not self.handovers or self.publisher is None:
            return done
        s = self.settings
        now = self.clock()
        live = {r.key: r for r in self.regs}
        for key in sorted(self.handovers):
            pending = self.handovers[key]
            reg = live.get(key)
            if reg is None:  # unregistered meanwhile: its tombstone ends the handover
                del self.handovers[key]
                continue
            if now < self._handover_retry_at.get(key, -math.inf):
                continue
            outstanding = pending.outstanding(self.store.followers(reg.kind, reg.name))
            waited = now - pending.started
            if outstanding and waited < s.followers.release_timeout_s:
                continue
            target = dataclasses.replace(
                pending.target(self.book.next_generation(key), utc_now_iso(now), outstanding),
                publisher=self._publisher_info(),
            )
            try:
                self._guard()
                self.publisher.publish(s.plan_topic, key, encode_value(target), s.io_timeout_s)
            except PublishError as e:
                if isinstance(e, DeliveryUncertain):  # the retry's target goes above it
                    self.book.reserve(key, target.generation)
                    self.metrics.inc("rackplan_generations_reserved_total", {"reason": "uncertain_delivery"})
                self._handover_retry_at[key] = now + s.poll_interval_s
                self.metrics.inc("rackplan_publish_failures_total", {"record": "plan"})
                self.log.error("handover target not confirmed; will retry", key=key, error=str(e))
                continue
            self._handover_retry_at.pop(key, None)
            del self.handovers[key]
            self.book.apply(key, target)
            done.append(target)
            result = "timed_out" if outstanding else "completed"
            self.metrics.inc("rackplan_handovers_total", {"result": result})
            self.metrics.inc("rackplan_plans_published_total", {"kind": target.kind})
            self.metrics.set("rackplan_plan_generation", target.generation, _labels(key))
            self._metrics_pending.add(key)
            log = self.log.warning if outstanding else self.log.info
            log(
                "handover completed" if not outstanding else "handover completed without every release",
                key=key,
                generation=target.generation,
                revoking_generation=pending.generation,
                waited_s=round(waited, 3),
                timed_out=outstanding,
            )
        self._handover_metrics()
        return done

    def _tick(self) -> None:
        """Between cycles, while handovers are pending: new release confirmations, completed handovers."""
        if self._reg_tail is not None and self._reg_synced:
            self._apply_registration_records(0.0)
        self._completed += self._advance_handovers()

    def _handover_metrics(self) -> None:
        self.metrics.set("rackplan_handovers_pending", len(self.handovers))

    def _follower_metrics(self) -> None:
        counts = dict.fromkeys(FOLLOWER_MODES, 0)
        for e in self.store.entries():
            if e.follower is not None:
                counts[e.follower.mode] += 1
        for mode, n in counts.items():
            self.metrics.set("rackplan_followers", n, {"mode": mode})

    def _set_leader(self, leader: bool) -> None:
        self.leader = leader
        self.metrics.set("rackplan_leader", 1 if leader else 0)
        if leader:
            self.metrics.inc("rackplan_lease_acquisitions_total")

    # ---- metrics ----------------------------------------------------------------

    def _snapshot_metrics(self, snap: Snapshot, racks: Racks) -> None:
        m = self.metrics
        m.set("rackplan_snapshot_timestamp_seconds", snap.taken_at)
        m.set("rackplan_snapshot_partitions", snap.partition_count())
        m.set("rackplan_snapshot_topics", len(snap.topics))
        per_rack: dict[tuple[tuple[str, str], ...], float] = {}
        for b in snap.brokers:
            lab = (("rack", racks.get(b) or ""),)
            per_rack[lab] = per_rack.get(lab, 0) + 1
        m.replace("rackplan_brokers", {}, per_rack)

    def _change_metrics(self, d: SnapshotDiff) -> None:
        m = self.metrics
        m.inc("rackplan_changes_confirmed_total")
        for kind, count in d.counts().items():
            m.inc("rackplan_metadata_changes_total", {"change": kind}, by=count)
        per_topic: dict[str, int] = {}
        for c in d.changes:
            if c.kind == REPLICA_RACKS and c.topic is not None:
                per_topic[c.topic] = per_topic.get(c.topic, 0) + 1
        for topic, count in sorted(per_topic.items()):
            m.inc("rackplan_topic_rack_changes_total", {"topic": topic}, by=count)

    def _group_metrics(self, snap: Snapshot, racks: Racks) -> None:
        """Per-rack locality of plans of record that are new or replayed.

        A plan of record not republished after a change kept its scope
        fingerprint, hence its locality: nothing to recount.
        """
        keys, self._metrics_pending = self._metrics_pending, set()
        planned, self._planned_by_rack = self._planned_by_rack, {}
        regs = {r.key: r for r in self.regs}
        for key in sorted(keys):
            rec, reg = self.book.latest(key), regs.get(key)
            if rec is None or reg is None:
                continue
            by_rack = planned.get(key)
            if by_rack is None or rec.cluster_fingerprint != self._fp.get(key):
                by_rack = current_locality_by_rack(snap, racks, reg, rec)
            labels = _labels(key)
            series: dict[tuple[tuple[str, str], ...], float] = {}
            for rack, loc in by_rack.items():
                for locality, value in (
                    ("local", loc.total - loc.cross_rack),
                    ("cross_rack", loc.cross_rack),
                ):
                    lab = {**labels, "rack": rack or "", "locality": locality}
                    series[tuple(sorted(lab.items()))] = value
            self.metrics.replace("rackplan_assigned_partitions", labels, series)
            total = total_locality(by_rack)
            self.metrics.set("rackplan_cross_rack_partitions", total.cross_rack, labels)
            self.metrics.set("rackplan_cross_rack_ratio", total.fraction, labels)

    # ---- alerts -----------------------------------------------------------------

    def _assignment_locality(
        self, reg: Registration, rec: PlanRecord | None, snap: Snapshot, racks: Racks, fp: str | None = None
    ) -> Locality | None:
        """The group's current assignment under ``snap``: the real one where described, else the plan of record.

        ``fp``: the registration's scope fingerprint at ``snap`` when known; a
        plan made at that same scope already knows its locality.
        """
        real = self.real_groups.get(reg.name) if reg.kind == CONSUMER else None
        if real is not None and any(m.assignment for m in real.members):
            mr = member_racks(real, reg.spec.get("members") or [], self.settings.rack_mapping)
            return assignment_locality(snap, racks, reg, real.assignment(), mr)
        if rec is None:
            return None
        if (
            fp is not None
            and rec.cluster_fingerprint == fp
            and rec.registration_fingerprint == reg.fingerprint
        ):
            return rec.locality_after
        return current_locality(snap, racks, reg, rec)

    def _best_locality(
        self, reg: Registration, rec: PlanRecord | None, snap: Snapshot, racks: Racks, current: Locality
    ) -> Locality | None:
        """The floor no assignment beats, computed only when the threshold is crossed (it matters then).

        A firing alert asks every cycle; the floor depends only on the
        snapshot, the plan and the registration, so it is computed again only
        when one of them is another object (or registration) than last time.
        """
        if rec is None or current.fraction <= self.settings.alerts.cross_rack_threshold:
            return None
        memo = self._best_memo.get(reg.key)
        if (
            memo is not None
            and memo[0] is snap
            and memo[1] is racks
            and memo[2] is rec
            and memo[3] == reg.fingerprint
        ):
            return memo[4]
        best = best_locality(snap, racks, reg, rec)
        self._best_memo[reg.key] = (snap, racks, rec, reg.fingerprint, best)
        return best

    def _evaluate_alerts(
        self,
        records: list[tuple[PlanRecord, Registration]],
        replaced: dict[str, PlanRecord | None],
        change: SnapshotDiff | None,
        previous: tuple[Snapshot, Racks] | None,
        previous_fp: Mapping[str, str],
        snap: Snapshot,
        racks: Racks,
        report: CycleReport,
    ) -> None:
        now = self.clock()
        published = {r.key for r in report.published}
        events: list[AlertEvent] = list(report.alerts)  # resolutions of unregistered groups
        evaluated: set[str] = set()
        regs = {r.key: r for r in self.regs}
        # A confirmed change: the group's assignment (real, or its plan before this cycle) under old vs new.
        if change is not None and previous is not None:
            new_plans = {rec.key: rec for rec, _ in records if rec.key in published}
            for reg in self.regs:
                if change.touched_topics.isdisjoint(reg.topics):
                    continue
                rec = new_plans.get(reg.key)
                old = replaced.get(reg.key) if rec is not None else self.book.latest(reg.key)
                fp_before, fp_now = previous_fp.get(reg.key), self._fp.get(reg.key)
                before = self._assignment_locality(reg, old, previous[0], previous[1], fp_before)
                if reg.name in self.real_groups and reg.kind == CONSUMER:
                    now_loc = self._assignment_locality(reg, old, snap, racks)
                elif rec is not None and rec.locality_before is not None:
                    now_loc = rec.locality_before  # the planner counted the old plan under the new metadata
                elif fp_before is not None and fp_before == fp_now:
                    now_loc = before  # same rack sets for this group: same locality
                else:
                    now_loc = self._assignment_locality(reg, old, snap, racks, fp_now)
                if before is None or now_loc is None:
                    continue
                evaluated.add(reg.key)
                if rec is not None:
                    planned: Locality | None = rec.locality_after
                else:  # no new plan: the plan of record, when it was made at this scope
                    planned = (
                        old.locality_after if old is not None and old.cluster_fingerprint == fp_now else None
                    )
                ev = self.alerts.evaluate(
                    reg.key,
                    before,
                    now_loc,
                    planned,
                    change.reason(reg.topics, limit=5),
                    now,
                    best=self._best_locality(reg, rec or old, snap, racks, now_loc),
                )
                if ev is not None:
                    events.append(ev)
        # The initial state: a group already bad when the agent starts (or when it is registered) alerts once.
        for key in sorted(self._initial_pending):
            initial, latest = regs.get(key), self.book.latest(key)
            if initial is None or latest is None:
                continue  # not planned yet: evaluated once it is
            self._initial_pending.discard(key)
            if key in evaluated:
                continue
            loc = self._assignment_locality(initial, latest, snap, racks, self._fp.get(key))
            if loc is None:
                continue
            evaluated.add(key)
            ev = self.alerts.evaluate(
                key, loc, loc, latest.locality_after,
                f"initial state: {loc.cross_rack} of {loc.total} partitions read cross-rack", now,
                best=self._best_locality(initial, latest, snap, racks, loc),
            )  # fmt: skip
            if ev is not None:
                events.append(ev)
        # Firing alerts resolve once the group's assignment is local enough again; hold-downs run out.
        for key in self.alerts.tracked():
            if key in evaluated or key not in regs:
                continue
            latest = self.book.latest(key)
            loc = self._assignment_locality(regs[key], latest, snap, racks, self._fp.get(key))
            if loc is None:
                continue
            ev = self.alerts.evaluate(
                key, loc, loc, None if latest is None else latest.locality_after, "", now,
                best=self._best_locality(regs[key], latest, snap, racks, loc),
            )  # fmt: skip
            if ev is not None:
                events.append(ev)
        report.alerts = events
        self._emit_alerts(events, now)
        unfixable = {tuple(sorted(_labels(k).items())): 1.0 for k in self.alerts.unfixable() if k in regs}
        self.metrics.replace("rackplan_alerts_unfixable", {}, unfixable)

    def _emit_alerts(self, events: list[AlertEvent], now: float) -> None:
        m = self.metrics
        for ev in events:
            self.log.warning("locality alert", **ev.as_json())
            m.inc("rackplan_alerts_total", {"status": ev.status})
            if ev.status == "firing":
                m.set("rackplan_alerts_firing", 1, _labels(ev.key))
            elif any(r.key == ev.key for r in self.regs):
                m.set("rackplan_alerts_firing", 0, _labels(ev.key))
        if self.webhook is not None:
            self.webhook.notify(events, self.alerts.firing_events(), now)
        if events and self.publisher is not None and self._alerts_topic_ok:
            try:
                self._guard()
                self.publisher.publish_many(
                    self.settings.alerts_topic,
                    [(ev.key, json.dumps(ev.as_json(), separators=(",", ":")).encode()) for ev in events],
                    self.settings.io_timeout_s,
                )
            except PublishError as e:
                self.log.error("alerts not published", error=str(e))
                m.inc("rackplan_publish_failures_total", {"record": "alert"})

    # ---- running ----------------------------------------------------------------

    def run(self) -> int:
        """Run until :attr:`stop` is set; returns the process exit code."""
        try:
            if self.serve_http:
                host, port = self.settings.http.host, self.settings.http.port
                try:
                    self.http = AgentHttpServer(self, host, port)
                except OSError as e:  # a busy port, an address not of this machine: the settings' to fix
                    raise AgentError(http_bind_error(e, host, port)) from None
                self.http.start()
                self.log.info("http serving", host=host, port=self.http.port)
            self._first_contact()
            if self.settings.ha.enabled:
                self._run_ha()
            else:
                try:
                    self.start()
                    self._serve_term()
                except ProducerFenced as e:  # without a lease there is nothing to stand by for
                    self._fenced(e)
                    raise AgentError(f"{e}; this agent stopped publishing and exits") from None
        finally:
            self.close()
        return 0

    def _first_contact(self) -> None:
        """Reach the bootstrap servers within ``kafka.startup_timeout_s``, else :class:`AgentError` naming
        them: a wrong address must not look like an outage.  Later outages are retried."""
        s = self.settings
        problem = reach_brokers(
            lambda timeout: self.admin.list_topics(timeout=timeout),
            s.kafka.bootstrap_servers,
            s.kafka.startup_timeout_s,
            min(s.metadata.request_timeout_s, max(1.0, s.kafka.startup_timeout_s / 3)),
            s.metadata.backoff_initial_s,
            check_names=self._real_admin,
            stopped=self.stop.is_set,
        )
        if problem is not None:
            raise AgentError(problem)

    def _serve_term(self) -> None:
        """Cycles until :attr:`stop` is set (or, with a lease, until it is lost: :class:`LeaseLost`)."""
        while not self.stop.is_set():
            t0 = time.monotonic()
            try:
                self.run_once()
            except (LeaseLost, AgentError, ProducerFenced):
                raise
            except Exception as e:  # keep serving; the next cycle starts from the last good state
                self.log.error("cycle failed", error=repr(e), exc_info=True)
            self._wait_until(t0 + self.settings.poll_interval_s)

    def _wait_until(self, deadline: float) -> None:
        """Sleep until the next cycle, serving the lease and pending handovers meanwhile."""
        step = self.settings.followers.check_interval_s
        while not self.stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if self.lease is not None and not self.lease.poll():
                raise LeaseLost("the lease partition was revoked")
            if self.handovers:
                try:
                    self._tick()
                except (LeaseLost, ProducerFenced):
                    raise
                except Exception as e:
                    self.log.error("handover check failed", error=repr(e), exc_info=True)
            idle = self.lease is None and not self.handovers
            self.stop.wait(left if idle else min(left, step if self.handovers else 0.2))

    def _run_ha(self) -> None:
        """Standby until the lease is ours, lead until it is lost or we stop, and again."""
        s = self.settings
        self._ensure_topics()
        self.lease = Lease(self.client_config, s.ha, self.agent_id, self.log)
        try:
            while not self.stop.is_set():
                self.log.info("standby: waiting for the lease", agent_id=self.agent_id, group=s.ha.group_id)
                confirm_s = min(s.io_timeout_s, s.ha.session_timeout_s)
                while not self.stop.is_set() and not self.lease.acquire(confirm_s):
                    pass
                if self.stop.is_set():
                    break
                self._set_leader(True)
                try:
                    self._init_term()
                    self.start()
                    self.log.info("leading", agent_id=self.agent_id, epoch=self.epoch)
                    self._serve_term()
                except LeaseLost as e:
                    self.log.warning("leadership lost; standing by", agent_id=self.agent_id, reason=str(e))
                except ProducerFenced as e:
                    self._fenced(e)
                    self.log.warning("leadership lost; standing by", agent_id=self.agent_id, reason=str(e))
                finally:
                    self._set_leader(False)
                    self.ready = False
                    self.metrics.set("rackplan_ready", 0)
        finally:
            self.lease.close()
            self.lease = None

    def _fenced(self, e: ProducerFenced) -> None:
        """A newer agent's producer fenced ours: nothing of ours lands any more; a new term needs a new producer."""
        self.metrics.inc("rackplan_publisher_fenced_total")
        self.log.error(
            "plan producer fenced: another agent publishes now; this agent stops publishing", error=str(e)
        )
        if self._own_publisher and self.publisher is not None:
            self.publisher.flush(min(1.0, self.settings.io_timeout_s))
            self.publisher = None

    def close(self) -> None:
        if self.http is not None:
            self.http.close()
            self.http = None
        if self.webhook is not None:
            self.webhook.close(min(self.settings.io_timeout_s, 2 * self.settings.webhook.timeout_s))
            self.webhook = None
        if self._reg_tail is not None:
            self._reg_tail.close()
            self._reg_tail = None
        if self._plan_tail is not None:
            self._plan_tail.close()
            self._plan_tail = None
        if self._lease_tail is not None:
            self._lease_tail.close()
            self._lease_tail = None
            self._release_heartbeat()
        if self.publisher is not None:
            left = self.publisher.flush(self.settings.io_timeout_s) if self._own_publisher else 0
            if left:
                self.log.error("records left unconfirmed at shutdown", count=left)
            self.publisher = None
        self.log.info("agent stopped")
