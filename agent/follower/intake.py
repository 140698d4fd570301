"""The follower's intake: the plan and lease topics read into the newest plan for its group and the
agent's liveness.

With the shared secret (``registration_secret_file``) a plan, tombstone or heartbeat counts only
with the agent's MAC (:mod:`rackplan.agent.protocol.mac`).  A plan is kept only if its generation
exceeds every generation seen before
(stale and replayed-out-of-order plans are ignored) and it is this group's; a
heartbeat is dated by the broker's timestamp, bounded by our clock plus the
allowed skew, so a forged or mis-dated one cannot keep followers from falling
back.  The decisions are functions of values (:func:`decode_group_plan`,
:func:`heartbeat_seen_at`); :class:`ControlIntake` keeps what they decide.
"""

from __future__ import annotations

import collections
import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.ports import Clock, ControlTail, Logger, Monotonic, TailFactory, TopicPart
from ..kafka.exceptions import TopicReadError
from ..protocol.lease import Heartbeat, HeartbeatError, decode_heartbeat
from ..protocol.mac import check_mac, mac_of
from ..protocol.plans import CONSUMER, PlanDecodeError, PlanRecord, decode_record
from ..protocol.records import RecordError
from ..protocol.registrations import RegistrationRecordError, decode_registration, registration_key
from .releases import Seen, withheld
from .settings import Identity, PlanFollowerSettings

#: after the plan topic could not be opened, this long before the next try
CONTROL_RETRY_S = 2.0


def plan_assignment(body: Mapping[str, Any]) -> dict[str, list[TopicPart]]:
    """A plan's ``assignment`` (already checked by :func:`decode_record`) as member -> (topic, partition)s."""
    return {str(m): [(t, p) for t, p in parts] for m, parts in body["assignment"].items()}


def decode_group_plan(
    key: str, group_id: str, value: bytes | None
) -> tuple[PlanRecord, dict[str, list[TopicPart]]] | None:
    """The plan under our key and its assignment; None for a tombstone.

    Raises :class:`PlanDecodeError` for a malformed record, and for one whose
    ``group_id`` is not the key's (another group's plan written under ours).
    """
    rec = decode_record(key, value)
    if rec is None:
        return None
    assignment = plan_assignment(rec.body)
    if rec.body.get("group_id") != group_id:
        raise PlanDecodeError(f"group_id {rec.body.get('group_id')!r} does not match the key")
    return rec, assignment


def _unchecked(_kind: str, _spec: dict[str, Any], _where: str) -> None:
    """A taker reads registrations only for their follower status: the contract checks are the agent's."""


def _unescape(part: str) -> str:
    return part.replace("%2F", "/").replace("%25", "%")


def heartbeat_seen_at(hb: Heartbeat, now_ms: int, max_skew_ms: int) -> tuple[int, int]:
    """When ``hb`` counts as written (see :meth:`Heartbeat.seen_at`), and the date it carries."""
    dated = hb.seen_ms if hb.seen_ms is not None else hb.timestamp_ms
    return hb.seen_at(now_ms, max_skew_ms), dated


@dataclass
class ControlIntake:
    """The control tail (plan and lease topics) and what it has told: the newest plan, the newest heartbeat.

    The tail is opened lazily again after a failure (every :data:`CONTROL_RETRY_S`);
    a cluster without the lease topic is followed without liveness.
    """

    who: Identity
    settings: PlanFollowerSettings
    client_config: dict[str, Any]
    open_tail: TailFactory
    clock: Monotonic
    wall: Clock
    log: Logger
    stats: collections.Counter[str]
    tail: ControlTail | None = None
    retry_at: float = 0.0
    #: the newest valid plan of the group, and its assignment (member -> partitions)
    latest: PlanRecord | None = None
    latest_assignment: dict[str, list[TopicPart]] = field(default_factory=dict)
    #: every generation up to this one was seen: a plan must be newer to count
    seen_generation: int = 0
    #: the group's plan was tombstoned since the follower last looked (it resets this)
    tombstoned: bool = False
    heartbeat: Heartbeat | None = None
    #: when the newest heartbeat was written, as far as we trust it (see Heartbeat.seen_at)
    heartbeat_ms: int = 0
    #: the group's members as their registrations say (None: the registrations topic is not readable here)
    members: dict[str, Seen] | None = None
    #: when the registrations were read to their end (wall clock, ms; None: not yet)
    members_read_ms: int | None = None
    #: when the tail was opened (wall clock, ms)
    opened_ms: int = 0

    def open(self) -> None:
        """Open the tail (plan, lease and registrations topics, else fewer) and read it to its end."""
        err = ""
        s = self.settings
        for topics in (
            [s.plan_topic, s.lease_topic, s.registrations_topic],
            [s.plan_topic, s.lease_topic],
            [s.plan_topic],
        ):
            try:
                self.tail = self.open_tail(self.client_config, topics, self.settings.io_timeout_s)
                break
            except TopicReadError as e:
                err = str(e)
        if self.tail is None:
            self.retry_at = self.clock() + CONTROL_RETRY_S
            if self.stats["control_unavailable"] == 0:
                self.log.warning("plan topic not readable yet; will retry", error=err)
            self.stats["control_unavailable"] += 1
            return
        if s.registrations_topic in self.tail.topics:
            self.members = {}
        else:
            self.log.warning(
                "registrations topic not readable: partitions a timed-out handover names are taken "
                "without checking their holder released them",
                topic=s.registrations_topic,
            )
        if len(self.tail.topics) == 1:
            self.log.warning(
                "no lease topic: the agent's liveness is unknown", topic=self.settings.lease_topic
            )
        self.opened_ms = int(self.wall() * 1000)
        try:
            raw, complete = self.tail.read_available(self.settings.io_timeout_s)
        except TopicReadError as e:
            self.log.warning("control topics not read to their end", error=str(e))
            return
        self.records(raw)
        if complete:
            self.members_read_ms = self.opened_ms

    def close(self) -> None:
        if self.tail is not None:
            self.tail.close()
            self.tail = None

    def read_new(self) -> None:
        """What the topics got since the last read (or a retry to open them, when due)."""
        if self.tail is None:
            if self.clock() >= self.retry_at:
                self.open()
            return
        raw, errors = self.tail.read_new()
        for e in errors:
            self.stats["control_errors"] += 1
            self.log.info("control topics", error=e)
        self.records(raw)

    def read_to_end(self, timeout_s: float | None = None, waiting: str = "unfencing") -> bool:
        """Read the topics to their ends within ``timeout_s`` (default ``io_timeout_s``); False (and logged,
        with ``waiting``: what waits for it) when that did not happen in time."""
        if self.tail is None:
            return True
        try:
            raw, complete = self.tail.read_available(
                self.settings.io_timeout_s if timeout_s is None else timeout_s
            )
        except TopicReadError as e:
            self.log.info("plan topic not read to its end", waiting=waiting, error=str(e))
            return False
        self.records(raw)
        if complete and self.members_read_ms is None:
            self.members_read_ms = int(self.wall() * 1000)
        return complete

    def records(self, raw: Iterable[Any]) -> None:
        for r in raw:
            if r.topic == self.settings.registrations_topic:
                self._registration_record(r)
                continue
            lease = r.topic == self.settings.lease_topic
            if not lease and r.key != self.who.key.encode():
                continue
            if not self._authentic(r, lease):
                continue
            if lease:
                self._heartbeat_record(r)
            else:
                self._plan_record(r.value, r.offset)

    def _authentic(self, r: Any, lease: bool) -> bool:
        """With the secret, only records carrying the agent's MAC count (:mod:`rackplan.agent.protocol.mac`):
        a forged plan, tombstone or heartbeat is skipped, counted and logged, whatever headers it copies."""
        what = "heartbeat" if lease else "plan record"
        topic = r.topic or (self.settings.lease_topic if lease else self.settings.plan_topic)
        try:
            check_mac(self.who.secret, topic, r.key, r.value, mac_of(r.headers), what)
        except RecordError as e:
            self.stats["heartbeats_skipped" if lease else "plans_skipped"] += 1
            self.stats["records_unauthenticated"] += 1
            self.stats[f"records_skipped_{e.reason}"] += 1
            self.log.error("record refused: not written by the agent", reason=str(e), offset=r.offset)
            return False
        return True

    def _heartbeat_record(self, r: Any) -> None:
        try:
            hb = dataclasses.replace(decode_heartbeat(r.key, r.value), seen_ms=r.timestamp_ms)
        except HeartbeatError as e:
            self.stats["heartbeats_skipped"] += 1
            self.stats[f"records_skipped_{e.reason}"] += 1
            self.log.warning("lease record skipped", reason=str(e), offset=r.offset)
            return
        # Liveness by the broker's timestamp, bounded by our clock plus the skew: a heartbeat dated
        # a day ahead counts as written now, and keeps nobody from falling back for a day.
        now_ms = int(self.wall() * 1000)
        seen, dated = heartbeat_seen_at(hb, now_ms, int(self.settings.max_clock_skew_s * 1000))
        if seen != dated:
            self.stats["heartbeats_future_dated"] += 1
            self.log.warning(
                "heartbeat dated in the future beyond the clock skew; counted as written now",
                agent_id=hb.agent_id,
                ahead_s=round((dated - now_ms) / 1000, 1),
                offset=r.offset,
            )
        if self.heartbeat is None or seen >= self.heartbeat_ms:
            self.heartbeat, self.heartbeat_ms = hb, seen

    def _plan_record(self, value: bytes | None, offset: int) -> None:
        try:
            decoded = decode_group_plan(self.who.key, self.who.group_id, value)
        except PlanDecodeError as e:
            self.stats["plans_skipped"] += 1
            self.stats[f"records_skipped_{e.reason}"] += 1
            self.log.warning("plan record skipped", reason=str(e), offset=offset)
            return
        if decoded is None:
            self.log.warning(
                "plan tombstoned: the agent no longer plans this group; releasing its partitions",
                offset=offset,
            )
            self.latest, self.latest_assignment = None, {}
            self.tombstoned = True
            return
        rec, assignment = decoded
        if rec.generation <= self.seen_generation:
            self.stats["plans_stale"] += 1
            self.log.warning(
                "stale plan ignored",
                generation=rec.generation,
                newest_seen=self.seen_generation,
                offset=offset,
            )
            return
        self.seen_generation = rec.generation
        self.latest, self.latest_assignment = rec, assignment

    def _registration_record(self, r: Any) -> None:
        """A registration of a member of our group: what it says it still holds (for :meth:`withheld`)."""
        prefix = registration_key(CONSUMER, self.who.group_id, "").encode()
        if self.members is None or not isinstance(r.key, bytes) or not r.key.startswith(prefix):
            return
        skew_ms = int(self.settings.max_clock_skew_s * 1000)
        try:
            entry = decode_registration(
                r.key, r.value, r.timestamp_ms, check=_unchecked, secret=self.who.secret, max_skew_ms=skew_ms
            )
        except RegistrationRecordError as e:
            self.stats["registrations_skipped"] += 1
            self.stats[f"records_skipped_{e.reason}"] += 1
            return
        member = _unescape(r.key[len(prefix) :].decode("utf-8", "replace"))
        if entry is None:
            self.members.pop(member, None)
            return
        now_ms = int(self.wall() * 1000)
        self.members[member] = Seen(entry.follower, min(entry.timestamp_ms, now_ms + skew_ms))

    def withheld(self, rec: PlanRecord, within_s: float = math.inf) -> dict[str, list[TopicPart]]:
        """Partitions ``rec`` gives out that their previous holder has not released yet (see :mod:`.releases`).

        A holder that counts as gone only for silence (no record, or an expired one, read here) is
        judged again after reading the topics to their end (bounded like the unfencing read: a third of
        the TTL at most, and ``within_s``); if that read does not finish, it is still withheld, and asked
        again at the next retry.
        """
        strict = self._withheld(rec, silence_is_gone=False)
        if strict == self._withheld(rec, silence_is_gone=True):
            return strict
        s = self.settings
        limit_s = min(s.io_timeout_s, s.registration_ttl_s / 3, within_s)
        if limit_s <= 0 or not self.read_to_end(limit_s, "judging a silent previous holder"):
            return strict
        return self._withheld(rec, silence_is_gone=True)

    def _withheld(self, rec: PlanRecord, silence_is_gone: bool) -> dict[str, list[TopicPart]]:
        now_ms = int(self.wall() * 1000)
        ttl_ms = int(self.settings.registration_ttl_s * 1000)
        # A member without a registration has left, once the topic was read to its end, or read for a whole
        # TTL (every live member refreshes within a third of it); before, its record may just be unread.
        complete = self.members_read_ms is not None or now_ms - self.opened_ms >= ttl_ms
        return withheld(
            rec.handover, self.who.member_id, self.members, now_ms, ttl_ms, complete, silence_is_gone
        )

    def agent_alive(self, agent_timeout_s: float) -> bool:
        """A heartbeat was seen and is at most ``agent_timeout_s`` old."""
        if self.heartbeat is None:
            return False
        return self.wall() - self.heartbeat_ms / 1000 <= agent_timeout_s

    def agent_gone(self, agent_timeout_s: float) -> bool:
        """A heartbeat was seen and is now too old (no heartbeat at all: only the plan timeout counts)."""
        return self.heartbeat is not None and not self.agent_alive(agent_timeout_s)
