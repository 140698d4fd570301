"""The partitions a follower reads, over its consumer: plain commits, manual assignment, group subscription.

A partition is taken only after a plain (group-less) commit of its starting
offset succeeds: Kafka accepts such a commit only while the group has no
members using group subscription, so the commit is the fence that keeps a
follower off partitions a subscribed consumer may hold.  A partition given up
is committed first, so that its next owner starts where this one stopped.
Errors come back as Kafka error names (``""``: none); what to do about a
fenced commit is the follower's decision, not this module's.

Every wait here ends by :attr:`Partitions.stop_by` as well as ``io_timeout_s``:
while a follower of plans waits on a commit, it cannot fence itself, and a
wait that outlived its registration's fence (a commit to a group coordinator
that was just stopped: up to ``io_timeout_s``) let it own partitions that the
agent had already given away (CI's chaos scenario on real Kafka).
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.ports import ConsumerFactory, FollowerConsumer, KafkaMessage, Logger, Monotonic, TopicPart
from ..kafka.errors import commit_fenced, error_name
from ..kafka.metadata_refresh import with_metadata_refresh

#: ``auto.offset.reset`` values that start a partition without a committed offset at its beginning
_FROM_START = ("earliest", "smallest", "beginning")

#: commits given up on whose answers are still matched (a client answers every commit, late or not)
_UNANSWERED_KEPT = 64

#: told which partitions were taken or given up (the follower passes them on to the application's hooks)
Notify = Callable[[list[TopicPart]], None]


@dataclass
class Partitions:
    """The consumer and what it reads: positions to commit, what was committed, messages held back."""

    consumer_config: dict[str, Any]
    new_consumer: ConsumerFactory
    io_timeout_s: float
    clock: Monotonic
    log: Logger
    stats: collections.Counter[str]
    assigned: Notify
    revoked: Notify
    #: when (monotonic) every wait must have ended: the follower's fence is due then (inf: never)
    stop_by: Callable[[], float] = lambda: math.inf
    consumer: FollowerConsumer = field(init=False)
    #: partitions this member may read now -> next offset to commit (None: nothing read yet)
    owned: dict[TopicPart, int | None] = field(default_factory=dict)
    #: the newest offset committed per partition (a commit without news is skipped)
    committed: dict[TopicPart, int] = field(default_factory=dict)
    #: messages fetched while a commit was waited for, handed out later
    buffer: collections.deque[Any] = field(default_factory=collections.deque)
    last_commit: float = 0.0
    #: commits sent and not answered yet, oldest first: serial -> the offsets sent
    _unanswered: dict[int, frozenset[tuple[str, int, int]]] = field(default_factory=dict)
    #: answers (error, or None) of commits someone still waits for, by serial
    _answers: dict[int, Any] = field(default_factory=dict)
    _serial: int = 0

    def __post_init__(self) -> None:
        self.reset_policy = str(self.consumer_config.get("auto.offset.reset", "latest"))
        self.app_on_commit = self.consumer_config.get("on_commit")
        self.last_commit = self.clock()
        self.consumer = self._consumer()

    def _consumer(self) -> FollowerConsumer:
        """Manual assignment, commits confirmed through :meth:`_on_commit`."""
        return self.new_consumer(
            {
                **with_metadata_refresh(self.consumer_config),
                "enable.auto.commit": False,
                "on_commit": self._on_commit,
            }
        )

    def renew_consumer(self) -> None:
        """Close the consumer and make one that never joined the group.

        A consumer that was a group member keeps sending its old member id with
        commits, which Kafka refuses (UNKNOWN_MEMBER_ID) once the member left:
        plain commits need a consumer that never joined.
        """
        self.consumer.close()
        self.consumer = self._consumer()
        self._unanswered.clear()  # the closed consumer answers nothing more

    def wait_s(self) -> float:
        """How long the next wait may last: ``io_timeout_s``, cut at :attr:`stop_by` (0: none left)."""
        return max(0.0, min(self.io_timeout_s, self.stop_by() - self.clock()))

    def deliverable(self, msg: KafkaMessage, fenced: bool) -> bool:
        """Only messages of partitions this member reads now reach the application (errors always do)."""
        if msg.error() is not None:
            return True
        tp = (msg.topic() or "", msg.partition() or 0)
        if tp not in self.owned or fenced:
            return False
        self.owned[tp] = (msg.offset() or 0) + 1
        return True

    # ---- plain commits and manual assignment ---------------------------------------------------

    def commit_positions(self, parts: Iterable[TopicPart], probe: bool = False) -> str:
        """Commit the offsets read so far of ``parts`` (those with news); the error name, ``""`` if none.

        ``probe``: with no news, commit the committed offsets again.  A plain
        commit is the fence, so a follower of plans must make one every
        interval even on idle partitions: otherwise a subscriber that joined
        the group meanwhile would share them for as long as they stay idle.
        """
        parts = list(parts)
        offsets = {
            tp: pos
            for tp in parts
            if (pos := self.owned.get(tp)) is not None and pos != self.committed.get(tp)
        }
        if not offsets and probe:
            offsets = {tp: self.committed[tp] for tp in parts if tp in self.committed}
            self.stats["fence_probes"] += bool(offsets)
        self.last_commit = self.clock()
        if not offsets:
            return ""
        return self.commit(offsets)

    def commit(self, offsets: Mapping[TopicPart, int]) -> str:
        """A commit of ``offsets``, waited for at most :meth:`wait_s` (messages meanwhile are kept).

        Only this commit's own answer counts: one this follower stopped waiting
        for may still be answered later, and taken for a later commit's answer
        it would let a take pass the fence on a success that fenced nothing.
        Answers are matched by the offsets they name, the oldest unanswered
        commit of the same offsets first (a coordinator answers in order).
        """
        from confluent_kafka import KafkaException, TopicPartition

        self._serial += 1
        serial = self._serial
        sent = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        deadline = self.clock() + self.wait_s()
        self._unanswered[serial] = _named(sent)
        while len(self._unanswered) > _UNANSWERED_KEPT:  # a client that never answers: forget the oldest
            del self._unanswered[next(iter(self._unanswered))]
        try:
            self.consumer.commit(offsets=sent, asynchronous=True)
        except KafkaException as e:
            del self._unanswered[serial]
            return error_name(e)
        while serial not in self._answers:
            if self.clock() >= deadline:
                return "_TIMED_OUT"  # still unanswered: its answer, if it comes, is not another's
            msg = self.consumer.poll(0.02)
            if msg is not None:
                self.buffer.append(msg)
        err = error_name(self._answers.pop(serial))
        if not err:
            self.committed.update(offsets)
            self.stats["commits"] += 1
        return err

    def _on_commit(self, err: Any, parts: Any) -> None:
        named = _named(parts or [])
        serial = next((n for n, sent in self._unanswered.items() if sent == named), None)
        if serial is not None:
            del self._unanswered[serial]
            self._answers[serial] = err
            for old in [n for n in self._answers if n < serial]:  # waits given up: nobody reads them
                del self._answers[old]
        if callable(self.app_on_commit):
            self.app_on_commit(err, parts)

    def unassign(self, parts: list[TopicPart]) -> None:
        """Stop reading ``parts`` (committed before, when the caller wants)."""
        from confluent_kafka import TopicPartition

        self.consumer.incremental_unassign([TopicPartition(t, p) for t, p in parts])
        for tp in parts:
            self.owned.pop(tp, None)
        self.revoked(parts)

    def starts(self, parts: list[TopicPart]) -> dict[TopicPart, int]:
        """Where reading ``parts`` starts: the committed offset, else the end ``auto.offset.reset`` names."""
        from confluent_kafka import TopicPartition

        committed = self.consumer.committed([TopicPartition(t, p) for t, p in parts], timeout=self.wait_s())
        out: dict[TopicPart, int] = {}
        for c in committed:
            key = (c.topic, c.partition)
            if c.offset >= 0:
                out[key] = c.offset
            else:
                low, high = self.consumer.get_watermark_offsets(
                    TopicPartition(*key), timeout=self.wait_s(), cached=False
                )
                out[key] = low if self.reset_policy in _FROM_START else high
        return out

    def take(self, parts: list[TopicPart]) -> bool:
        """Start reading ``parts`` from their committed offsets, after a fencing commit of those offsets."""
        from confluent_kafka import KafkaException, TopicPartition

        if self.wait_s() <= 0:
            return False  # the fence is due: nothing is taken (the caller retries once it is not)
        try:
            starts = self.starts(parts)
        except KafkaException as e:
            self.stats["take_failed"] += 1
            self.log.info("committed offsets unknown; taking the partitions later", error=error_name(e))
            return False
        err = self.commit(starts)
        if commit_fenced(err):
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
        self.consumer.incremental_assign([TopicPartition(t, p, starts[(t, p)]) for t, p in parts])
        for tp in parts:
            self.owned[tp] = None
            self.committed[tp] = starts[tp]
        self.assigned(parts)
        return True

    # ---- group subscription (the fallback) ------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        """Drop the manual assignment and join the group; its callbacks keep :attr:`owned`.

        The fallback releases everything before it subscribes; should anything
        still be read, it is committed (if Kafka takes it) and given up with the
        revoke hook like any release, never dropped unannounced: an application
        told nothing would go on believing it owns partitions the group gives to
        someone else.
        """
        if left := sorted(self.owned):
            self.commit_positions(left)
            self.unassign(left)
        self.consumer.unassign()
        self.consumer.subscribe(
            list(topics), on_assign=self._sub_assign, on_revoke=self._sub_revoke, on_lost=self._sub_lost
        )

    def leave_group(self) -> None:
        """Leave the group (committing in the revoke callback), then renew the consumer for plain commits.

        The revoke callback may not come within ``io_timeout_s`` (the group's
        coordinator is away): closing the old consumer serves it if it still
        can, and whatever no callback reported is then :meth:`forgotten
        <forget>`: the closed consumer reads none of it.
        """
        self.consumer.unsubscribe()
        deadline = self.clock() + self.io_timeout_s
        while self.owned and self.clock() < deadline:
            self.consumer.poll(0.02)  # serves the revoke callback; messages of revoked partitions drop
        self.buffer.clear()
        self.renew_consumer()
        self.forget(list(self.owned))

    def forget(self, parts: list[TopicPart]) -> None:
        """``parts`` are no longer read (their consumer closed) though no revoke callback said so: tell the hook."""
        for tp in parts:
            self.owned.pop(tp, None)
        self.revoked(sorted(parts))

    def _sub_assign(self, _consumer: Any, parts: list[Any]) -> None:
        tps = [(p.topic, p.partition) for p in parts]
        for tp in tps:
            self.owned.setdefault(tp, None)
        self.assigned(tps)

    def _sub_revoke(self, consumer: Any, parts: list[Any]) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        tps = [(p.topic, p.partition) for p in parts]
        offsets = [TopicPartition(t, p, pos) for t, p in tps if (pos := self.owned.get((t, p))) is not None]
        if offsets:
            try:
                consumer.commit(offsets=offsets, asynchronous=False)
            except KafkaException as e:
                self.stats["commits_failed"] += 1
                self.log.warning("offsets not committed at revocation", error=error_name(e))
        for tp in tps:
            self.owned.pop(tp, None)
        self.revoked(tps)

    def _sub_lost(self, _consumer: Any, parts: list[Any]) -> None:
        tps = [(p.topic, p.partition) for p in parts]
        for tp in tps:
            self.owned.pop(tp, None)
        self.revoked(tps)


def _named(parts: Iterable[Any]) -> frozenset[tuple[str, int, int]]:
    """The (topic, partition, offset) a commit or its answer names."""
    return frozenset((p.topic, p.partition, p.offset) for p in parts)
