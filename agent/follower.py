"""``PlanFollower``: a confluent-kafka Consumer that reads the partitions rackplan's plan gives it.

An application that wants rackplan's rack-aware assignment instead of the
broker-side one wraps its consumer::

    follower = PlanFollower(
        {"bootstrap.servers": "...", "group.id": "payments", "client.rack": "az-a"},
        topics=["orders"], instance_id="payments-az-a-1",
    )
    while running:
        msg = follower.poll(1.0)
        ...
    follower.close()

What it does (docs/followers.md has the whole protocol):

* **Registers** on the registrations topic (``consumer/<group>/<instance>``,
  the agent's record format with ``follower: true``): group, stable instance
  id (its member id in plans), ``client.rack``, topics; and re-publishes the
  record every ``registration_ttl_s / 3``.
* **Follows** its group's key on the plan topic: partitions are assigned by
  hand (``incremental_assign`` / ``incremental_unassign``); a partition given
  up is committed first.  A plan's generation must exceed every generation
  seen before (stale and replayed-out-of-order plans are ignored), and after
  applying plan *g* the member's record says ``released_generation: g``: how
  the agent learns, in a two-phase handover, that a partition is free.
* Before reading a new partition it commits the partition's starting offset
  as a plain (group-less) commit.  Kafka accepts such a commit only while the
  group has no members using group subscription, so the commit doubles as a
  fence: a follower never reads a partition that a subscribed consumer of the
  same group might hold.  Periodic commits are fenced the same way.
* **Falls back** to ordinary group subscription, with a logged warning, when
  no plan that includes it arrives within ``plan_timeout_s``, or the agent's
  heartbeat (on the lease topic) is older than ``agent_timeout_s``.  It first
  releases its partitions and waits ``fallback_grace_s``, so that every other
  follower notices the same silence and releases too.  When the agent is back
  and publishes a newer plan, it leaves the group and follows the plan again.
* **Fences itself**: a follower whose registration has not been confirmed by
  the brokers for 2/3 of the TTL stops reading (the agent will soon expire it
  and give its partitions away) until a refresh is confirmed.  A registration
  the brokers *refuse* (no Write right on the registrations topic) is an
  answer, not silence: it is logged once and counted
  (``registrations_refused``), the follower does not fence itself for it, and
  it keeps following every plan that names it (a group of the agent's settings
  file); the agent cannot see such a member, so a group made of registrations
  never names it and it falls back after ``plan_timeout_s``.

Everything happens inside :meth:`PlanFollower.poll`: no background thread of
its own, no message returned before the checks above ran.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .kafka_errors import error_name
from .kafka_io import TopicReadError, TopicTail
from .logging import get_logger, with_kafka_logger
from .protocol.lease import Heartbeat, HeartbeatError, decode_heartbeat
from .protocol.plans import CONSUMER, PlanDecodeError, PlanRecord, decode_record, plan_key
from .protocol.registrations import FollowerStatus, consumer_registration, read_secret_file

TP = tuple[str, int]
Hook = Callable[["PlanFollower", list[TP]], None]

WAITING, PLAN, SUBSCRIPTION = "waiting", "plan", "subscription"
#: commit errors meaning the group has members using group subscription (or we lost our membership)
FENCED = frozenset({"UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "REBALANCE_IN_PROGRESS", "FENCED_INSTANCE_ID"})
#: librdkafka properties that only make sense for the application's consumer
_CONSUMER_ONLY = (
    "group.",
    "enable.auto.",
    "auto.",
    "partition.assignment",
    "session.timeout",
    "heartbeat.",
    "max.poll",
    "fetch.",
    "isolation.",
    "enable.partition.eof",
    "check.crcs",
    "queued.",
    "consume.",
    "offset.store",
)
_SLICE_S = 0.05
#: registration errors that are the brokers' answer (this principal may not write), not silence
_REFUSED = frozenset({"TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED"})
_CONTROL_RETRY_S = 2.0


class FollowerError(ValueError):
    """The follower cannot be made as configured; the message names the setting."""


class PlanFollowerSettings(BaseModel):
    """Where the agent's records are and how long to wait for them; see docs/followers.md."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    plan_topic: str = Field(default="_rackplan.plans", min_length=1)
    registrations_topic: str = Field(default="_rackplan.registrations", min_length=1)
    lease_topic: str = Field(default="_rackplan.lease", min_length=1)
    #: the agent's registrations.ttl_s: the record is refreshed every third of it
    registration_ttl_s: float = Field(default=300.0, gt=0)
    #: no plan that includes this member for this long: ordinary group subscription
    plan_timeout_s: float = Field(default=60.0, gt=0)
    #: the agent's heartbeat older than this: the agent is gone, ordinary group subscription
    agent_timeout_s: float = Field(default=120.0, gt=0)
    #: between releasing plan partitions and subscribing, so every follower notices the silence first
    fallback_grace_s: float = Field(default=5.0, ge=0)
    #: offsets of plan partitions are committed this often (and always before a partition is given up)
    commit_interval_s: float = Field(default=5.0, gt=0)
    #: how long a commit, a committed-offset lookup or a control-topic read may take
    io_timeout_s: float = Field(default=10.0, gt=0)
    #: group-level registration fields (the newest record carrying them wins, unless the agent's file says)
    assignor: Literal["range", "cooperative-sticky", "rack-optimal"] | None = None
    fetch_mode: Literal["nearest-replica", "leader"] | None = None
    #: a heartbeat dated further than this ahead of our clock counts as written when it is read
    max_clock_skew_s: float = Field(default=10.0, ge=0)
    #: the agent's registrations.secret_file: when set, this member's registration is signed with it
    registration_secret_file: Path | None = None

    @model_validator(mode="after")
    def _coherent(self) -> PlanFollowerSettings:
        if self.commit_interval_s >= self.registration_ttl_s:
            raise ValueError("commit_interval_s must be shorter than registration_ttl_s")
        return self


def _plan_assignment(body: Mapping[str, Any]) -> dict[str, list[TP]]:
    """A plan's ``assignment`` (already checked by :func:`rackplan.agent.plans.decode_record`) as tuples."""
    return {str(m): [(t, p) for t, p in parts] for m, parts in body["assignment"].items()}


def _client_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The connection part of the application's config, for the follower's own clients."""
    return {
        k: v
        for k, v in config.items()
        if not callable(v) and not any(k.startswith(p) for p in _CONSUMER_ONLY)
    }


class PlanFollower:
    """Consumes what rackplan's plan assigns to this instance; ordinary group subscription as a fallback."""

    def __init__(
        self,
        consumer_config: Mapping[str, Any],
        topics: Sequence[str],
        instance_id: str,
        settings: PlanFollowerSettings | Mapping[str, Any] | None = None,
        *,
        on_assign: Hook | None = None,
        on_revoke: Hook | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        try:
            self.settings = (
                settings
                if isinstance(settings, PlanFollowerSettings)
                else PlanFollowerSettings.model_validate(dict(settings or {}))
            )
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(x) for x in first["loc"]) or "settings"
            raise FollowerError(f"follower settings: {where}: {first['msg']}") from None
        group = consumer_config.get("group.id")
        if not isinstance(group, str) or not group:
            raise FollowerError("consumer config: group.id is required (the group whose plan is followed)")
        if not consumer_config.get("bootstrap.servers"):
            raise FollowerError("consumer config: bootstrap.servers is required")
        if not instance_id or "/" in instance_id:
            raise FollowerError("instance_id: a non-empty stable id without '/' is required")
        if not topics or not all(isinstance(t, str) and t for t in topics):
            raise FollowerError("topics: at least one topic name is required")
        try:
            path = self.settings.registration_secret_file
            self._secret = None if path is None else read_secret_file(path, "registration_secret_file")
        except ValueError as e:
            raise FollowerError(f"follower settings: {e}") from None
        rack = consumer_config.get("client.rack")
        self.group_id = group
        self.member_id = instance_id
        self.rack: str | None = str(rack) if rack else None
        self.topics = tuple(sorted(set(topics)))
        self.key = plan_key(CONSUMER, group)
        self._on_assign_hook = on_assign
        self._on_revoke_hook = on_revoke
        self._clock = clock
        self._wall = wall_clock
        self.log = get_logger("rackplan.follower").bind(group=group, member=instance_id)
        self._reset_policy = str(consumer_config.get("auto.offset.reset", "latest"))
        self._app_on_commit = consumer_config.get("on_commit")

        self._consumer_config = dict(consumer_config)
        self._consumer = self._new_consumer()
        self._client_config = _client_config(consumer_config)
        self._producer = self._new_producer()
        #: the producer hit a fatal error (e.g. no right to an idempotent producer id): replaced when due
        self._producer_broken = False
        self.mode = WAITING
        #: partitions this member may read now -> next offset to commit (None: nothing read yet)
        self._owned: dict[TP, int | None] = {}
        self._committed: dict[TP, int] = {}
        self._buffer: collections.deque[Any] = collections.deque()
        self._commits_done = 0
        self._commit_error: Any = None
        #: generation of the plan applied last, and the newest valid plan seen
        self.generation = 0
        self._latest: PlanRecord | None = None
        self._latest_assignment: dict[str, list[TP]] = {}
        self._seen_generation = 0
        self._heartbeat: Heartbeat | None = None
        #: when the newest heartbeat was written, as far as we trust it (see Heartbeat.seen_at)
        self._heartbeat_ms = 0
        self._control: TopicTail | None = None
        self._control_retry_at = 0.0
        now = clock()
        self._started = now
        self._waiting_since: float | None = now
        self._fallback_at: float | None = None
        self._fallback_generation = 0
        self._add_retry_at = 0.0
        self._last_commit = now
        #: wall-clock ms: when the last registration record was made, and the newest one confirmed
        self._reg_sent_ms = 0
        self._reg_confirmed_ms = int(wall_clock() * 1000)
        #: wall-clock ms of the newest registration the brokers refused (ACLs): alive, but not registered
        self._reg_refused_ms = 0
        self._reg_status: FollowerStatus | None = None
        self._fenced_self = False
        #: when a self-fenced member may follow its plan again (set once its registration is confirmed)
        self._unfence_at: float | None = None
        #: the group's plan was tombstoned: give everything up, wait for the next plan
        self._tombstoned = False
        self._closing = False
        self._closed = False
        self.stats: collections.Counter[str] = collections.Counter()
        self._open_control(catch_up=True)
        self._register(force=True)
        self._service()

    # ---- public ---------------------------------------------------------------

    def assignment(self) -> list[TP]:
        """Partitions this member reads now, sorted."""
        return sorted(self._owned)

    def poll(self, timeout: float = 1.0) -> Any:
        """The next message (or error event) for the application, or None when ``timeout`` passes."""
        deadline = self._clock() + timeout
        while True:
            self._service()
            while self._buffer:
                msg = self._buffer.popleft()
                if self._deliverable(msg):
                    return msg
            left = deadline - self._clock()
            msg = self._consumer.poll(max(0.0, min(left, _SLICE_S)))
            if msg is not None:
                self._service()  # the checks run between fetching a message and handing it out
                if self._deliverable(msg):
                    return msg
            if left <= 0:
                return None

    def _new_consumer(self) -> Any:
        """The member's consumer: manual assignment, commits confirmed through :meth:`_on_commit`."""
        from confluent_kafka import Consumer

        return Consumer(
            with_kafka_logger(
                {**self._consumer_config, "enable.auto.commit": False, "on_commit": self._on_commit}
            )
        )

    def _new_producer(self) -> Any:
        from confluent_kafka import Producer

        return Producer(
            with_kafka_logger(
                {**self._client_config, "enable.idempotence": True, "acks": "all", "linger.ms": 5}
            )
        )

    def _poll_producer(self) -> None:
        """Serve delivery reports; a fatal producer error is counted, never raised into the application."""
        from confluent_kafka import KafkaException

        if self._producer_broken:
            return
        try:
            self._producer.poll(0)
        except KafkaException as e:
            self._registration_failed(e.args[0] if e.args else e, int(self._wall() * 1000))

    def _registration_failed(self, err: Any, made_ms: int) -> None:
        """A registration not delivered; the brokers' refusal (ACLs) is remembered as an answer."""
        self.stats["registrations_failed"] += 1
        name = error_name(err)
        fatal = getattr(err, "fatal", None)
        if name == "_FATAL" or (callable(fatal) and fatal()):
            self._producer_broken = True  # librdkafka: a fatal producer cannot be used again
        if name not in _REFUSED:
            return
        self.stats["registrations_refused"] += 1
        self._reg_refused_ms = max(self._reg_refused_ms, made_ms)
        if self.stats["registrations_refused"] == 1:
            self.log.warning(
                "registration refused by the brokers (no Write right on the registrations topic): "
                "the agent cannot see this member; following plans that name it",
                error=name,
                topic=self.settings.registrations_topic,
            )

    def commit(self) -> None:
        """Commit what was read so far (the follower also does this every ``commit_interval_s``)."""
        self._commit_positions(list(self._owned))

    def close(self) -> None:
        """Commit and give up every partition, leave the group, remove the registration."""
        if self._closed:
            return
        self._closing = True
        if self.mode == SUBSCRIPTION:
            self._consumer.close()  # the revoke callback commits; the member leaves the group
            self._owned.clear()
        else:
            self._release(list(self._owned), commit=True)
            self._consumer.close()
        key, _ = self._registration()
        from confluent_kafka import KafkaException

        try:
            if not self._producer_broken:
                self._producer.produce(self.settings.registrations_topic, key=key.encode(), value=None)
                self._producer.flush(self.settings.io_timeout_s)
        except (BufferError, KafkaException) as e:
            self.stats["registrations_failed"] += 1
            self.log.warning("registration not removed", error=str(e))
        self._close_control()
        self._closed = True
        self.log.info("follower closed")

    def abort(self) -> None:
        """Stop without committing, releasing or unregistering: what a crash looks like to the others."""
        if self._closed:
            return
        self._closed = True
        self._owned.clear()
        self._on_assign_hook = self._on_revoke_hook = None
        self._close_control()
        from confluent_kafka import KafkaException

        with contextlib.suppress(KafkaException):
            self._producer.purge()
            self._producer.flush(0)
        self._consumer.close()

    # ---- the control topics ----------------------------------------------------

    def _open_control(self, catch_up: bool) -> None:
        s = self.settings
        for topics in ([s.plan_topic, s.lease_topic], [s.plan_topic]):
            try:
                self._control = TopicTail(self._client_config, topics, s.io_timeout_s)
                break
            except TopicReadError as e:
                err = str(e)
        if self._control is None:
            self._control_retry_at = self._clock() + _CONTROL_RETRY_S
            if self.stats["control_unavailable"] == 0:
                self.log.warning("plan topic not readable yet; will retry", error=err)
            self.stats["control_unavailable"] += 1
            return
        if len(self._control.topics) == 1:
            self.log.warning("no lease topic: the agent's liveness is unknown", topic=s.lease_topic)
        if catch_up:
            try:
                raw, _complete = self._control.read_available(s.io_timeout_s)
            except TopicReadError as e:
                self.log.warning("control topics not read to their end", error=str(e))
                return
            self._control_records(raw)

    def _close_control(self) -> None:
        if self._control is not None:
            self._control.close()
            self._control = None

    def _read_control(self) -> None:
        if self._control is None:
            if self._clock() >= self._control_retry_at:
                self._open_control(catch_up=True)
            return
        raw, errors = self._control.read_new()
        for e in errors:
            self.stats["control_errors"] += 1
            self.log.info("control topics", error=e)
        self._control_records(raw)

    def _control_records(self, raw: Iterable[Any]) -> None:
        s = self.settings
        for r in raw:
            if r.topic == s.lease_topic:
                try:
                    hb = dataclasses.replace(decode_heartbeat(r.key, r.value), seen_ms=r.timestamp_ms)
                except HeartbeatError as e:
                    self.stats["heartbeats_skipped"] += 1
                    self.stats[f"records_skipped_{e.reason}"] += 1
                    self.log.warning("lease record skipped", reason=str(e), offset=r.offset)
                    continue
                # Liveness by the broker's timestamp, bounded by our clock plus the skew: a heartbeat dated
                # a day ahead counts as written now, and keeps nobody from falling back for a day.
                now_ms = int(self._wall() * 1000)
                seen = hb.seen_at(now_ms, int(s.max_clock_skew_s * 1000))
                dated = hb.seen_ms if hb.seen_ms is not None else hb.timestamp_ms
                if seen != dated:
                    self.stats["heartbeats_future_dated"] += 1
                    self.log.warning(
                        "heartbeat dated in the future beyond the clock skew; counted as written now",
                        agent_id=hb.agent_id,
                        ahead_s=round((dated - now_ms) / 1000, 1),
                        offset=r.offset,
                    )
                if self._heartbeat is None or seen >= self._heartbeat_ms:
                    self._heartbeat, self._heartbeat_ms = hb, seen
            elif r.key == self.key.encode():
                self._plan_record(r.value, r.offset)

    def _plan_record(self, value: bytes | None, offset: int) -> None:
        try:
            rec = decode_record(self.key, value)
            if rec is None:
                self.log.warning(
                    "plan tombstoned: the agent no longer plans this group; releasing its partitions",
                    offset=offset,
                )
                self._latest, self._latest_assignment = None, {}
                self._tombstoned = True
                return
            assignment = _plan_assignment(rec.body)
            if rec.body.get("group_id") != self.group_id:
                raise PlanDecodeError(f"group_id {rec.body.get('group_id')!r} does not match the key")
        except PlanDecodeError as e:
            self.stats["plans_skipped"] += 1
            self.stats[f"records_skipped_{e.reason}"] += 1
            self.log.warning("plan record skipped", reason=str(e), offset=offset)
            return
        if rec.generation <= self._seen_generation:
            self.stats["plans_stale"] += 1
            self.log.warning(
                "stale plan ignored",
                generation=rec.generation,
                newest_seen=self._seen_generation,
                offset=offset,
            )
            return
        self._seen_generation = rec.generation
        self._latest, self._latest_assignment = rec, assignment

    def _agent_alive(self) -> bool:
        if self._heartbeat is None:
            return False
        return self._wall() - self._heartbeat_ms / 1000 <= self.settings.agent_timeout_s

    def _agent_gone(self) -> bool:
        """A heartbeat was seen and is now too old (no heartbeat at all: only the plan timeout counts)."""
        return self._heartbeat is not None and not self._agent_alive()

    # ---- the state machine ---------------------------------------------------------

    def _service(self) -> None:
        """Everything but reading messages: control records, registration, plan, fences, fallback."""
        if self._closed:
            return
        self._poll_producer()
        self._read_control()
        now = self._clock()
        if self.mode == SUBSCRIPTION:
            if self._should_rejoin():
                self._rejoin()
        else:
            self._self_fence()
            if self._tombstoned:
                self._tombstoned = False
                self._release(list(self._owned), commit=True)
                if self.mode != SUBSCRIPTION:
                    self.mode = WAITING
                    self._waiting_since = self._waiting_since or self._clock()
                    self._register(force=True)
            due = self._fallback_due()
            if self._fallback_at is not None:
                if not due:
                    self.log.info("fallback cancelled: the agent is alive and a plan includes this member")
                    self._fallback_at = None
                elif now >= self._fallback_at:
                    self._subscribe()
            elif due:
                self._begin_fallback(grace=True)
            if (
                self.mode != SUBSCRIPTION
                and self._fallback_at is None
                and not self._fenced_self
                and self._latest is not None
                and (self._latest.generation > self.generation or self._pending_add())
            ):
                self._apply(self._latest, self._latest_assignment)
        if self.mode != WAITING and now - self._last_commit >= self.settings.commit_interval_s:
            self._commit_positions(list(self._owned))
        self._register()

    def _fallback_due(self) -> bool:
        """The agent is gone, or this member has waited too long for a plan it can follow."""
        if self._agent_gone():
            return True
        if self._waiting_since is None or self._clock() - self._waiting_since < self.settings.plan_timeout_s:
            return False
        rec = self._latest
        fresh = (
            rec is not None
            and rec.generation > max(self.generation, self._fallback_generation)
            and self.member_id in self._latest_assignment
        )
        return not fresh

    def _pending_add(self) -> bool:
        """Partitions the applied plan gives us that could not be taken yet (the group was not free)."""
        if self._latest is None or self._latest.generation != self.generation:
            return False
        if self._clock() < self._add_retry_at:
            return False
        mine = set(self._latest_assignment.get(self.member_id, []))
        return bool(mine - set(self._owned))

    def _apply(self, rec: PlanRecord, assignment: Mapping[str, list[TP]]) -> None:
        """Give up what the plan no longer gives us (committed first), take what it gives us, confirm."""
        mine = set(assignment.get(self.member_id, []))
        revoke = sorted(set(self._owned) - mine)
        if revoke and not self._release(revoke, commit=True):
            return  # fenced: fallen back to group subscription
        add = sorted(mine - set(self._owned))
        took = not add or self._take(add)
        if not took:
            self._add_retry_at = self._clock() + min(1.0, self.settings.commit_interval_s)
        first = rec.generation != self.generation
        self.generation = rec.generation
        self.mode = PLAN if self.member_id in assignment else WAITING
        if self.mode == PLAN and took:
            self._waiting_since = None
        elif (
            self._waiting_since is None
        ):  # not in the plan, or its partitions not free: the plan timeout runs
            self._waiting_since = self._clock()
        if first:
            self.stats["plans_applied"] += 1
            self.log.info(
                "plan applied",
                generation=rec.generation,
                state=rec.state,
                assigned=len(self._owned),
                released=len(revoke),
            )
        self._register(force=True)

    def _release(self, parts: list[TP], commit: bool) -> bool:
        """Commit (when asked) and stop reading ``parts``; False when the commit says we are fenced."""
        from confluent_kafka import TopicPartition

        if not parts:
            return True
        if commit:
            err = self._commit_positions(parts)
            if err in FENCED:
                self._fence(err)
                return False
            if err:
                self.stats["release_commit_failed"] += 1
                self.log.warning(
                    "offsets not committed before giving partitions up; the next owner re-reads them",
                    error=err,
                    partitions=len(parts),
                )
        self._consumer.incremental_unassign([TopicPartition(t, p) for t, p in parts])
        for tp in parts:
            self._owned.pop(tp, None)
        self._hook(self._on_revoke_hook, parts)
        return True

    def _take(self, parts: list[TP]) -> bool:
        """Start reading ``parts`` from their committed offsets, after a fencing commit of those offsets."""
        from confluent_kafka import KafkaException, TopicPartition

        s = self.settings
        try:
            committed = self._consumer.committed(
                [TopicPartition(t, p) for t, p in parts], timeout=s.io_timeout_s
            )
            starts: dict[TP, int] = {}
            for c in committed:
                key = (c.topic, c.partition)
                if c.offset >= 0:
                    starts[key] = c.offset
                else:
                    low, high = self._consumer.get_watermark_offsets(
                        TopicPartition(*key), timeout=s.io_timeout_s, cached=False
                    )
                    starts[key] = low if self._reset_policy in ("earliest", "smallest", "beginning") else high
        except KafkaException as e:
            self.stats["take_failed"] += 1
            self.log.info("committed offsets unknown; taking the partitions later", error=error_name(e))
            return False
        err = self._commit(starts)
        if err in FENCED:
            self.stats["take_refused"] += 1
            self.log.warning(
                "group has members using group subscription; not reading plan partitions yet",
                error=err,
                partitions=len(parts),
            )
            return False
        if err:
            self.stats["take_failed"] += 1
            self.log.info("starting offsets not committed; taking the partitions later", error=err)
            return False
        self._consumer.incremental_assign([TopicPartition(t, p, starts[(t, p)]) for t, p in parts])
        for tp in parts:
            self._owned[tp] = None
            self._committed[tp] = starts[tp]
        self._hook(self._on_assign_hook, parts)
        return True

    def _commit_positions(self, parts: Iterable[TP]) -> str:
        """Commit the offsets read so far of ``parts`` (those with news); the error name, ``""`` if none."""
        offsets = {
            tp: pos
            for tp in parts
            if (pos := self._owned.get(tp)) is not None and pos != self._committed.get(tp)
        }
        self._last_commit = self._clock()
        if not offsets:
            return ""
        err = self._commit(offsets)
        if err in FENCED and self.mode != SUBSCRIPTION:
            self._fence(err)
        elif err:
            self.stats["commits_failed"] += 1
        return err

    def _commit(self, offsets: Mapping[TP, int]) -> str:
        """A commit of ``offsets``, waited for at most ``io_timeout_s`` (messages meanwhile are kept)."""
        from confluent_kafka import KafkaException, TopicPartition

        done = self._commits_done
        try:
            self._consumer.commit(
                offsets=[TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())], asynchronous=True
            )
        except KafkaException as e:
            return error_name(e)
        deadline = self._clock() + self.settings.io_timeout_s
        while self._commits_done == done:
            if self._clock() >= deadline:
                return "_TIMED_OUT"
            msg = self._consumer.poll(0.02)
            if msg is not None:
                self._buffer.append(msg)
        err = error_name(self._commit_error)
        if not err:
            self._committed.update(offsets)
            self.stats["commits"] += 1
        return err

    def _on_commit(self, err: Any, parts: Any) -> None:
        self._commits_done += 1
        self._commit_error = err
        if callable(self._app_on_commit):
            self._app_on_commit(err, parts)

    def _fence(self, err: str) -> None:
        """A plain commit was refused: someone in the group uses group subscription. Follow it at once."""
        self.stats["fenced"] += 1
        if self._closing:
            self._release(list(self._owned), commit=False)
            return
        self.log.warning(
            "commit refused: the group has members using group subscription; falling back to it",
            error=err,
        )
        self._release(list(self._owned), commit=False)
        self._begin_fallback(grace=False)

    def _self_fence(self) -> None:
        """Stop reading while the registration is not confirmed: the agent may be about to expire us."""
        ttl_ms = self.settings.registration_ttl_s * 1000
        answered_ms = max(self._reg_confirmed_ms, self._reg_refused_ms)
        stale = int(self._wall() * 1000) - answered_ms > ttl_ms * 2 / 3
        if stale:
            self._unfence_at = None
        if stale and not self._fenced_self:
            self._fenced_self = True
            self.stats["self_fenced"] += 1
            self.log.warning(
                "registration not confirmed for 2/3 of its TTL; giving up partitions until it is",
                partitions=len(self._owned),
            )
            self._release(list(self._owned), commit=True)
        elif not stale and self._fenced_self:
            # The agent may have decided to expire us just before our refreshed registration landed; such a
            # plan is published within one of its cycles.  Wait two of its intervals after confirmation.
            now = self._clock()
            if self._unfence_at is None:
                interval = (
                    self._heartbeat.interval_s if self._heartbeat is not None else self.settings.io_timeout_s
                )
                self._unfence_at = now + 2 * interval
            if now < self._unfence_at:
                return
            # While fenced the agent may have expired this member and given its partitions to others in a
            # newer plan this member has not read yet (its tail lags through the same outage): re-taking the
            # cached plan would own them twice.  Read the plan topic to its end first; stay fenced if not.
            if self._control is not None:
                try:
                    raw, complete = self._control.read_available(self.settings.io_timeout_s)
                except TopicReadError as e:
                    self.log.info("plan topic not read to its end; still fenced", error=str(e))
                    return
                self._control_records(raw)
                if not complete:
                    return
            self._fenced_self = False
            self._unfence_at = None
            self.log.info("registration confirmed again; following the plan")
            if self._latest is not None:
                self._apply(self._latest, self._latest_assignment)

    # ---- group subscription (fallback) ------------------------------------------------

    def _begin_fallback(self, grace: bool) -> None:
        reason = "the agent's heartbeat stopped" if self._agent_gone() else "no plan for this member arrived"
        if grace:
            self._release(list(self._owned), commit=True)
            if self.mode == SUBSCRIPTION:  # the commit was refused: already following the group
                return
        self._fallback_at = self._clock() + (self.settings.fallback_grace_s if grace else 0.0)
        self._fallback_generation = self._seen_generation
        self.mode = WAITING
        self.log.warning(
            "falling back to group subscription",
            reason=reason if grace else "a plain commit was refused",
            timeout_s=self.settings.agent_timeout_s if self._agent_gone() else self.settings.plan_timeout_s,
            grace_s=self.settings.fallback_grace_s if grace else 0.0,
        )
        if not grace:
            self._subscribe()

    def _subscribe(self) -> None:
        self._fallback_at = None
        self._consumer.unassign()
        self._owned.clear()
        self._consumer.subscribe(
            list(self.topics), on_assign=self._sub_assign, on_revoke=self._sub_revoke, on_lost=self._sub_lost
        )
        self.mode = SUBSCRIPTION
        self.stats["fallbacks"] += 1
        self._register(force=True)

    def _sub_assign(self, _consumer: Any, parts: list[Any]) -> None:
        tps = [(p.topic, p.partition) for p in parts]
        for tp in tps:
            self._owned.setdefault(tp, None)
        self._hook(self._on_assign_hook, tps)

    def _sub_revoke(self, consumer: Any, parts: list[Any]) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        tps = [(p.topic, p.partition) for p in parts]
        offsets = [TopicPartition(t, p, pos) for t, p in tps if (pos := self._owned.get((t, p))) is not None]
        if offsets:
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
            except KafkaException as e:
                self.stats["commits_failed"] += 1
                self.log.warning("offsets not committed at revocation", error=error_name(e))
        for tp in tps:
            self._owned.pop(tp, None)
        self._hook(self._on_revoke_hook, tps)

    def _sub_lost(self, _consumer: Any, parts: list[Any]) -> None:
        tps = [(p.topic, p.partition) for p in parts]
        for tp in tps:
            self._owned.pop(tp, None)
        self._hook(self._on_revoke_hook, tps)

    def _should_rejoin(self) -> bool:
        """The agent is back and published a plan newer than the one we fell back from."""
        rec = self._latest
        return (
            rec is not None
            and self._agent_alive()
            and rec.generation > self._fallback_generation
            and self.member_id in self._latest_assignment
        )

    def _rejoin(self) -> None:
        """Leave the group (committing in the revoke callback), then follow the plan again."""
        self.log.info("the agent is back: leaving group subscription to follow the plan")
        self._consumer.unsubscribe()
        deadline = self._clock() + self.settings.io_timeout_s
        while self._owned and self._clock() < deadline:
            self._consumer.poll(0.02)  # serves the revoke callback; messages of revoked partitions drop
        self._owned.clear()
        self._buffer.clear()
        # A consumer that was a group member keeps sending its old member id with commits, which Kafka
        # refuses (UNKNOWN_MEMBER_ID) once the member left: plain commits need a consumer that never joined.
        self._consumer.close()
        self._consumer = self._new_consumer()
        self.mode = WAITING
        self._waiting_since = self._clock()
        self.stats["rejoins"] += 1
        assert self._latest is not None
        self._apply(self._latest, self._latest_assignment)

    # ---- registration ---------------------------------------------------------------

    def _registration(self) -> tuple[str, bytes]:
        return consumer_registration(
            self.group_id,
            self.member_id,
            rack=self.rack,
            topics=self.topics,
            timestamp_ms=int(self._wall() * 1000),
            group_instance_id=self.member_id,
            assignor=self.settings.assignor,
            fetch_mode=self.settings.fetch_mode,
            follower=FollowerStatus(released_generation=self.generation, mode=self.mode),
            secret=self._secret,
        )

    def _register(self, force: bool = False) -> None:
        """Publish the registration when it changed, or to refresh it (every TTL / 3); never waits."""
        from confluent_kafka import KafkaException

        status = FollowerStatus(released_generation=self.generation, mode=self.mode)
        now_ms = int(self._wall() * 1000)
        due = now_ms - self._reg_sent_ms >= self.settings.registration_ttl_s * 1000 / 3
        if not (force or due or status != self._reg_status):
            return
        if self._producer_broken:
            if not due:
                return
            with contextlib.suppress(KafkaException):
                self._producer.purge()
            self._producer = self._new_producer()
            self._producer_broken = False
        key, value = self._registration()

        def delivered(err: Any, _msg: Any, made_ms: int = now_ms) -> None:
            if err is None:
                self._reg_confirmed_ms = max(self._reg_confirmed_ms, made_ms)
            else:
                self._registration_failed(err, made_ms)

        try:
            self._producer.produce(
                self.settings.registrations_topic, key=key.encode(), value=value, on_delivery=delivered
            )
        except (BufferError, KafkaException) as e:
            self._registration_failed(e.args[0] if isinstance(e, KafkaException) and e.args else e, now_ms)
            if not self._producer_broken:
                self.log.warning("registration not sent", error=str(e))
            return
        self._reg_sent_ms = now_ms
        self._reg_status = status
        self._poll_producer()

    # ---- delivery ----------------------------------------------------------------------

    def _deliverable(self, msg: Any) -> bool:
        """Only messages of partitions this member reads now reach the application (errors always do)."""
        if msg.error() is not None:
            return True
        tp = (msg.topic(), msg.partition())
        if tp not in self._owned or self._fenced_self:
            return False
        self._owned[tp] = (msg.offset() or 0) + 1
        return True

    def _hook(self, hook: Hook | None, parts: list[TP]) -> None:
        if hook is not None and parts:
            hook(self, sorted(parts))
