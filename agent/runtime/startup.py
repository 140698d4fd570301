"""Start-up steps: the agent's topics (created or checked), the newest heartbeat (refusing a foreign writer), and
the term's first state from the replayed plan topic and registrations."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from ..core.errors import CannotRun
from ..core.ports import AdminPort
from ..cycle.intake import Intake
from ..cycle.publishing import handover_metrics, publish_tombstones
from ..ha.lease import LEASE_PARTITIONS, foreign_writer, last_heartbeat
from ..kafka.publisher import LEASE_GROUP_HEADER, WRITER_HEADER, Publisher, transactional_id
from ..kafka.tail import TopicTail
from ..kafka.topics import TopicSpec, ensure_topics, topic_config_problems
from ..metrics import declared as metric
from ..planning.handover import pending_from
from ..protocol.lease import Heartbeat
from ..protocol.plans import PlanRecord
from ..protocol.records import MAX_SAFE_INT
from ..settings.sections import Settings
from ..state.term import CycleReport, Term, Wiring, labels
from .watch import lease_skipped

PLAN_TOPIC_PARTITIONS = 1
ALERT_TOPIC_PARTITIONS = 1
TRAFFIC_TOPIC_PARTITIONS = 1
EMBEDDED_FALLBACK = "the embedded cluster's mock API"


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
        *(
            [TopicSpec(settings.traffic_topic, TRAFFIC_TOPIC_PARTITIONS, stamped)]
            if settings.traffic_topic
            else []
        ),
    ]


def prepare_topics(
    w: Wiring, admin: AdminPort, create_missing: Callable[[list[TopicSpec]], None] | None
) -> set[str]:
    """Create the agent's missing topics (through the embedded cluster when given); names still missing.

    :class:`CannotRun` when the plan topic (or, with ``ha.enabled``, the lease topic) is missing.
    """
    s = w.settings
    timeout = s.metadata.request_timeout_s
    existed = set(admin.list_topics(timeout=timeout).topics)
    missing = ensure_topics(
        admin, topic_specs(s), timeout, w.log, fallback=EMBEDDED_FALLBACK if create_missing else None
    )
    if missing and create_missing is not None:
        create_missing(missing)
        w.log.info("topics created through the embedded cluster", topics=[m.name for m in missing])
        existing = set(admin.list_topics(timeout=timeout).topics)
        missing = [m for m in missing if m.name not in existing]
    names = {m.name for m in missing}
    # Topics created just now have the settings they were created with; the others are checked.
    check_topic_configs(w, admin, [t for t in topic_specs(s) if t.name in existed])
    if s.plan_topic in names:
        raise CannotRun(f"plan topic {s.plan_topic!r} does not exist; see the logged command to create it")
    if s.ha.lease_topic in names:
        if s.ha.enabled:
            raise CannotRun(
                f"lease topic {s.ha.lease_topic!r} does not exist; see the logged command to create it"
            )
        w.log.warning(
            "no lease topic: no heartbeat is published, so plan followers cannot tell that the agent "
            "is alive (they fall back to group subscription when no plan comes)",
            topic=s.ha.lease_topic,
        )
    if s.alerts_topic in names:
        w.log.warning("no alerts topic: alerts go to the log, metrics and webhook only", topic=s.alerts_topic)
    if s.traffic_topic in names:
        w.log.warning("no traffic topic: the broker plugins weigh no traffic", topic=s.traffic_topic)
    return names


def check_topic_configs(w: Wiring, admin: AdminPort, present: list[TopicSpec]) -> None:
    """DescribeConfigs on the agent's topics: a plan (or, with HA, lease) topic without compaction stops start-up.

    Other topics' problems are logged with the command that fixes them.
    """
    s = w.settings
    if not present:  # every topic was created just now, with its settings: nothing to check
        return
    problems = topic_config_problems(admin, present, s.metadata.request_timeout_s)
    if problems is None:
        w.log.info("topic configuration not checked: the brokers do not answer DescribeConfigs")
        return
    fatal = {s.plan_topic} | ({s.ha.lease_topic} if s.ha.enabled else set())
    for name, problem in sorted(problems.items()):
        if name in fatal:
            raise CannotRun(f"topic {name!r}: {problem}")
        w.log.error("topic misconfigured", topic=name, problem=problem)


def make_publisher(w: Wiring, client_config: dict[str, Any], *, embedded: bool) -> Publisher:
    """The plan producer: every record names its writer (agent id, lease group) in its headers.

    A new one each term: an earlier term's producer may have been fenced by the leader that took over
    meanwhile (its first plan-topic publish bumped the epoch of the shared ``transactional.id``).  Kept, it
    was refused at the new term's first plan as a zombie ("plan producer fenced: another agent publishes
    now" with no other agent running), and the plan waited for yet another term; found by a hunt on real
    Kafka (``integration/test_kafka_reacquire.py``).
    """
    s = w.settings
    return Publisher(
        client_config,
        s.plan_max_message_bytes,
        headers=[(WRITER_HEADER, w.agent_id.encode()), (LEASE_GROUP_HEADER, (w.lease_group or "").encode())],
        # Plan-topic records in transactions: a newer agent of these settings fences this one.  Not on the
        # embedded cluster (librdkafka's mock): it neither fences a producer nor hides aborted records from
        # read_committed readers, so an aborted publish would show a second content under one generation
        # there; the plain idempotent path keeps "one generation, one content".
        transactional_id=None if embedded else transactional_id(s.ha.group_id, s.plan_topic),
        fenced_topics=[s.plan_topic],
        transaction_timeout_s=transaction_timeout_s(s.io_timeout_s, client_config),
        secret=w.secret,  # every record's MAC: followers holding the secret refuse a record without it
    )


def transaction_timeout_s(io_timeout_s: float, client_config: dict[str, Any]) -> float:
    """Twice the I/O timeout (at least 10 s), and never below the clients' ``socket.timeout.ms`` (librdkafka's
    default 60 s): librdkafka refuses to make a transactional producer whose socket timeout is the longer
    (``kafka.config: {socket.timeout.ms: 90000}`` with the default ``io_timeout_s``: no plan was published)."""
    try:
        socket_s = float(str(client_config.get("socket.timeout.ms", 60_000)).strip()) / 1000
    except ValueError:  # not a number: librdkafka refuses it, and the agent says so naming kafka.config
        socket_s = 0.0
    return max(10.0, 2 * io_timeout_s, socket_s if math.isfinite(socket_s) else 0.0)


def no_foreign_writer(w: Wiring, newest: Callable[[], Heartbeat | None]) -> Heartbeat | None:
    """The newest heartbeat on the lease topic, to continue its epoch; :class:`CannotRun` while another agent
    outside our lease group publishes.

    A fresh heartbeat of a foreign agent may be its last (it was killed, or
    restarted under a new id): wait up to two of its intervals for a newer
    one before refusing.
    """
    last = newest()
    reason = foreign_writer(last, w.agent_id, w.lease_group, int(w.clock() * 1000))
    if reason is None or last is None:
        return last
    w.log.warning("another agent's heartbeat is fresh; waiting to see whether it still runs", reason=reason)
    deadline = time.monotonic() + 2 * last.interval_s + 1.0
    while time.monotonic() < deadline and not w.stop.is_set():
        w.stop.wait(min(1.0, last.interval_s / 2))
        now = newest()
        if now is not None and now.agent_id == last.agent_id and now.timestamp_ms > last.timestamp_ms:
            again = foreign_writer(now, w.agent_id, w.lease_group, int(w.clock() * 1000))
            if again is not None:
                w.metrics.inc(metric.FOREIGN_WRITERS_TOTAL, {"topic": "lease"})
                raise CannotRun(again)
        if now is not None and (now.released or now.agent_id != last.agent_id):
            return now if now.epoch >= last.epoch else last
    w.log.info("the other agent's heartbeat stopped: taking over its epoch", agent_id=last.agent_id)
    return last


def continue_epoch(w: Wiring, client_config: dict[str, Any]) -> tuple[int, TopicTail]:
    """Our epoch, one above the newest heartbeat's (refusing a foreign writer), and the lease topic's tail
    from its end on: what other agents write next."""
    s = w.settings

    def newest() -> Heartbeat | None:
        return last_heartbeat(
            client_config, s.ha.lease_topic, s.io_timeout_s, w.log, lambda r: lease_skipped(w, r), w.secret
        )

    last = no_foreign_writer(w, newest)
    epoch = next_epoch(w, last)
    tail = TopicTail(client_config, s.ha.lease_topic, s.io_timeout_s)
    try:
        tail.read_available(s.io_timeout_s)
    except BaseException:  # retried by the start-up step with a new tail: this one's client closed now
        tail.close()
        raise
    return epoch, tail


def next_epoch(w: Wiring, last: Heartbeat | None) -> int:
    """One above the newest heartbeat's epoch; :class:`CannotRun` when that would pass 2**53-1.

    Epochs are bounded when read (:func:`rackplan.agent.protocol.records.safe_int`), and never
    produced above the bound either: every reader, this agent included, would refuse such a
    heartbeat.  Reusing the bound instead would pin every later leader to one epoch (issue 24,
    item 9), so an exhausted epoch stops the agent with a line that names the recovery
    (docs/runbook.md, RackplanCounterExhausted).  With a secret only the agents' own heartbeats
    count here, so a forger cannot exhaust it.
    """
    current = 0 if last is None else last.epoch
    if current >= MAX_SAFE_INT:
        w.metrics.set(metric.COUNTERS_EXHAUSTED, 1, {"counter": "lease_epoch"})
        w.log.error("lease epoch exhausted", epoch=current, agent_id=last.agent_id if last else None)
        raise CannotRun(
            f"lease epoch exhausted: the newest heartbeat on {w.settings.ha.lease_topic!r} (agent_id "
            f"{(last.agent_id if last else '')[:100]!r}) has epoch {current}, the bound 2**53-1; delete the "
            "lease topic's records (docs/runbook.md#rackplancounterexhausted), or set registrations.secret_file "
            "so that only the agents' own heartbeats count"
        )
    return current + 1


def replay(w: Wiring, term: Term, intake: Intake, plan_records: list[tuple[str, PlanRecord | None]]) -> None:
    """The term's first state: replayed plans in, registrations merged, the unregistered tombstoned,
    every registration due for planning and for its initial alert, handovers in flight resumed."""
    s = w.settings
    for key, generation in term.book.replay(plan_records):
        w.log.warning(
            "stale plan record ignored: its generation is not above an earlier one",
            key=key,
            generation=generation,
        )
    w.log.info(
        "plan topic replayed",
        topic=s.plan_topic,
        records=len(plan_records),
        live_plans=len(term.book.live_keys()),
    )
    if intake.tail is None:
        term.reg_synced = True  # nothing to wait for: the file is all there is
    intake.refresh(term, CycleReport(ok=True), intake.discovery)
    if term.reg_synced:
        registered = term.registered()
        stale = sorted(k for k in term.book.live_keys() if k not in registered)
        if stale:
            for k in stale:
                term.group(k).tombstone_pending = True
            term.tombstoned_at_start = publish_tombstones(w, term)
            if term.tombstoned_at_start:
                w.log.info("tombstoned plans of unregistered groups", keys=term.tombstoned_at_start)
    keys = set(term.registered())
    for g in term.groups.values():
        g.retry = g.initial_pending = False
    for k in keys:
        g = term.group(k)
        g.retry = g.initial_pending = True
    now = w.clock()
    for key in term.book.live_keys():
        rec = term.book.latest(key)
        if rec is not None:
            w.metrics.set(metric.PLAN_GENERATION, rec.generation, labels(key))
            term.group(key).metrics_pending = True
        pending = pending_from(rec, now) if key in keys else None
        if pending is not None:  # another agent (or this one, before a restart) started it
            term.group(key).handover = pending
            w.log.info(
                "resuming handover", key=key, generation=pending.generation, awaiting=list(pending.awaiting)
            )
    handover_metrics(w, term)
    term.replayed = True
