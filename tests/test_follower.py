"""PlanFollower's state machine against fake Kafka clients: every transition, on a controlled clock.

The fake broker keeps what matters to the follower's safety: committed
offsets, and whether the group has members in group subscription (Kafka
refuses a plain commit then, which is the follower's fence).  The end-to-end
behaviour on a real client runs in integration/.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

import rackplan.agent.follower as follower_mod
from rackplan.agent.follower import FollowerError, PlanFollower
from rackplan.agent.kafka_io import RawRecord
from rackplan.agent.lease import Heartbeat
from rackplan.agent.registry import decode_registration

TOPIC = "orders"
PLANS, LEASE, REGS = "_rackplan.plans", "_rackplan.lease", "_rackplan.registrations"
KEY = "consumer/g"


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Broker:
    """Logs, committed offsets and group membership, shared by the fake clients."""

    partitions: int = 4
    logs: dict[tuple[str, int], list[bytes]] = field(default_factory=dict)
    committed: dict[tuple[str, int], int] = field(default_factory=dict)
    members: set[int] = field(default_factory=set)
    records: list[tuple[str, bytes, bytes | None]] = field(default_factory=list)
    deliver: bool = True
    #: the authorizer's answer to registrations: "" accepted, "topic" no Write on the topic, "fatal" no right
    #: to an idempotent producer id (librdkafka's fatal error: that producer can never produce again)
    refuse: str = ""
    producers: int = 0
    events: list[tuple[str, Any]] = field(default_factory=list)

    def append(self, p: int, n: int) -> None:
        self.logs.setdefault((TOPIC, p), []).extend(b"m" for _ in range(n))

    def registrations(self) -> list[Any]:
        return [decode_registration(k, v, 0) for t, k, v in self.records if t == REGS]


class Msg:
    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self._t, self._p, self._o = topic, partition, offset

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self._t

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o


class FakeConsumer:
    def __init__(self, broker: Broker, config: dict[str, Any]) -> None:
        self.broker = broker
        self.config = config
        self.positions: dict[tuple[str, int], int] = {}
        self.pending: list[Callable[[], None]] = []
        self.subscribed: dict[str, Any] | None = None
        self.closed = False

    def _commit_error(self) -> KafkaError | None:
        if self.subscribed is None and self.broker.members - {id(self)}:
            return KafkaError(KafkaError.UNKNOWN_MEMBER_ID)
        return None

    def commit(self, offsets: list[TopicPartition], asynchronous: bool = True) -> Any:
        err = self._commit_error()
        if err is None:
            for tp in offsets:
                self.broker.committed[(tp.topic, tp.partition)] = tp.offset
            self.broker.events.append(("commit", sorted((tp.partition, tp.offset) for tp in offsets)))
        if asynchronous:
            cb = self.config["on_commit"]
            self.pending.append(lambda: cb(err, offsets))
            return None
        if err is not None:
            raise KafkaException(err)
        return offsets

    def committed(self, tps: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        return [
            TopicPartition(tp.topic, tp.partition, self.broker.committed.get((tp.topic, tp.partition), -1001))
            for tp in tps
        ]

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float, cached: bool) -> tuple[int, int]:
        return 0, len(self.broker.logs.get((tp.topic, tp.partition), []))

    def incremental_assign(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            self.positions[(tp.topic, tp.partition)] = tp.offset
        self.broker.events.append(("assign", sorted(tp.partition for tp in tps)))

    def incremental_unassign(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            self.positions.pop((tp.topic, tp.partition), None)
        self.broker.events.append(("unassign", sorted(tp.partition for tp in tps)))

    def unassign(self) -> None:
        self.positions.clear()

    def subscribe(self, topics: list[str], on_assign: Any, on_revoke: Any, on_lost: Any) -> None:
        self.subscribed = {"assign": on_assign, "revoke": on_revoke}
        self.broker.members.add(id(self))
        parts = [TopicPartition(TOPIC, p) for p in range(self.broker.partitions)]

        def assign() -> None:
            for tp in parts:
                self.positions[(tp.topic, tp.partition)] = self.broker.committed.get(
                    (tp.topic, tp.partition), 0
                )
            on_assign(self, parts)

        self.pending.append(assign)

    def unsubscribe(self) -> None:
        assert self.subscribed is not None
        revoke = self.subscribed["revoke"]
        parts = [TopicPartition(t, p) for t, p in sorted(self.positions)]

        def leave() -> None:
            revoke(self, parts)
            self.positions.clear()
            self.broker.members.discard(id(self))

        self.subscribed = None
        self.pending.append(leave)

    def poll(self, timeout: float = 0) -> Msg | None:
        while self.pending:
            self.pending.pop(0)()
        for (t, p), pos in sorted(self.positions.items()):
            if pos < len(self.broker.logs.get((t, p), [])):
                self.positions[(t, p)] = pos + 1
                return Msg(t, p, pos)
        return None

    def close(self) -> None:
        self.closed = True
        self.broker.members.discard(id(self))


class FakeProducer:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.pending: list[Callable[[], None]] = []
        self.fatal = False
        broker.producers += 1

    def produce(self, topic: str, key: bytes, value: bytes | None, on_delivery: Any = None) -> None:
        if self.fatal:
            raise KafkaException(KafkaError(KafkaError._FATAL, "Unable to produce message"))
        err = None if self.broker.deliver else KafkaError(KafkaError._MSG_TIMED_OUT)
        if self.broker.refuse == "topic":
            err = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)
        if err is None and not self.broker.refuse:
            self.broker.records.append((topic, key, value))
        if on_delivery is not None and self.broker.refuse != "fatal":
            self.pending.append(lambda: on_delivery(err, None))

    def poll(self, timeout: float = 0) -> int:
        if self.broker.refuse == "fatal" and not self.fatal:
            self.fatal = True
            raise KafkaException(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED, "no PID", fatal=True))
        done, self.pending = self.pending, []
        for cb in done:
            cb()
        return len(done)

    def flush(self, timeout: float = 0) -> int:
        self.poll()
        return 0

    def purge(self) -> None:
        self.pending = []


class FakeTail:
    """The follower's control tail: the test pushes plan and lease records into it."""

    instances: ClassVar[list[FakeTail]] = []

    def __init__(self, config: Any, topics: Any, timeout_s: float, overrides: Any = None) -> None:
        self.topics = tuple(topics)
        self.backlog: list[RawRecord] = []
        self.offset = 0
        FakeTail.instances.append(self)

    def push(self, topic: str, key: bytes | None, value: bytes | None) -> None:
        self.backlog.append(RawRecord(0, self.offset, key, value, None, topic))
        self.offset += 1

    def read_available(self, timeout_s: float) -> tuple[list[RawRecord], bool]:
        out, self.backlog = self.backlog, []
        return out, True

    def read_new(self) -> tuple[list[RawRecord], list[str]]:
        out, self.backlog = self.backlog, []
        return out, []

    def close(self) -> None:
        pass


def plan(
    generation: int, assignment: dict[str, list[int]], state: str = "proposed", group: str = "g"
) -> bytes:
    return json.dumps(
        {
            "schema": 1,
            "generation": generation,
            "state": state,
            "consumer_group": {
                "group_id": group,
                "assignment": {m: [[TOPIC, p] for p in ps] for m, ps in assignment.items()},
                "revoked": {},
            },
            "stats": {},
        }
    ).encode()


class Harness:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, **settings: Any) -> None:
        import confluent_kafka

        self.broker = Broker()
        self.clock = Clock()
        self.wall = Clock(1_800_000_000.0)
        self.consumers: list[FakeConsumer] = []
        FakeTail.instances = []

        def consumer(config: dict[str, Any]) -> FakeConsumer:
            c = FakeConsumer(self.broker, config)
            self.consumers.append(c)
            return c

        monkeypatch.setattr(confluent_kafka, "Consumer", consumer)
        monkeypatch.setattr(confluent_kafka, "Producer", lambda config: FakeProducer(self.broker))
        monkeypatch.setattr(follower_mod, "TopicTail", FakeTail)
        self.settings = {
            "registration_ttl_s": 30,
            "plan_timeout_s": 20,
            "agent_timeout_s": 10,
            "fallback_grace_s": 2,
            "commit_interval_s": 5,
            **settings,
        }
        self.assigned: list[tuple[str, list[tuple[str, int]]]] = []

    def heartbeat(self, tail: FakeTail | None = None) -> None:
        hb = Heartbeat("agent-1", 1, int(self.wall.now * 1000), 1.0)
        (tail or FakeTail.instances[-1]).push(LEASE, b"leader", hb.encode())

    def follower(
        self, member: str = "m1", preload: list[tuple[str, bytes | None, bytes | None]] = ()
    ) -> PlanFollower:
        original = FakeTail.__init__

        def init(tail: FakeTail, *a: Any, **kw: Any) -> None:
            original(tail, *a, **kw)
            for rec in preload:
                tail.push(*rec)

        FakeTail.__init__ = init  # type: ignore[method-assign]
        try:
            return PlanFollower(
                {
                    "bootstrap.servers": "fake:9092",
                    "group.id": "g",
                    "client.rack": "az-a",
                    "auto.offset.reset": "earliest",
                },
                [TOPIC],
                member,
                self.settings,
                on_assign=lambda f, parts: self.assigned.append(("assign", parts)),
                on_revoke=lambda f, parts: self.assigned.append(("revoke", parts)),
                clock=self.clock,
                wall_clock=self.wall,
            )
        finally:
            FakeTail.__init__ = original  # type: ignore[method-assign]

    def advance(self, seconds: float) -> None:
        self.clock.now += seconds
        self.wall.now += seconds

    def drain(self, f: PlanFollower, limit: int = 1000) -> list[tuple[int, int]]:
        out = []
        for _ in range(limit):
            m = f.poll(0)
            if m is None:
                break
            out.append((m.partition(), m.offset()))
        return out


@pytest.fixture
def h(monkeypatch: pytest.MonkeyPatch) -> Harness:
    return Harness(monkeypatch)


def test_follows_a_plan_reads_its_partitions_and_confirms(h: Harness) -> None:
    f = h.follower(preload=[(LEASE, b"leader", None)])
    assert f.mode == "waiting" and f.assignment() == []
    tail = FakeTail.instances[-1]
    h.heartbeat()
    tail.push(PLANS, KEY.encode(), plan(3, {"m1": [0, 2], "m2": [1, 3]}))
    for p in range(4):
        h.broker.append(p, 5)
    got = h.drain(f)
    assert f.mode == "plan" and f.generation == 3 and f.assignment() == [(TOPIC, 0), (TOPIC, 2)]
    assert sorted(got) == [(p, o) for p in (0, 2) for o in range(5)]
    # The starting offsets were committed (the fence) before the partitions were assigned.
    assert h.broker.events[:2] == [("commit", [(0, 0), (2, 0)]), ("assign", [0, 2])]
    regs = h.broker.registrations()
    last = regs[-1]
    assert (
        last.follower is not None and last.follower.released_generation == 3 and last.follower.mode == "plan"
    )
    assert last.member == {"member_id": "m1", "rack": "az-a", "topics": [TOPIC], "group_instance_id": "m1"}


def test_a_revoked_partition_is_committed_before_it_is_given_up(h: Harness) -> None:
    f = h.follower()
    tail = FakeTail.instances[-1]
    h.heartbeat()
    tail.push(PLANS, KEY.encode(), plan(1, {"m1": [0, 1]}))
    h.broker.append(0, 3)
    h.broker.append(1, 3)
    h.drain(f)
    h.broker.events.clear()
    h.broker.append(1, 2)  # written before the plan moves partition 1 away: the next owner reads them
    tail.push(PLANS, KEY.encode(), plan(2, {"m1": [0], "m2": []}, state="revoking"))
    got = h.drain(f)
    assert h.broker.events[:2] == [("commit", [(1, 3)]), ("unassign", [1])]
    assert all(p == 0 for p, _ in got), "nothing of a released partition reaches the application"
    assert h.broker.committed[(TOPIC, 1)] == 3
    assert ("revoke", [(TOPIC, 1)]) in h.assigned
    assert h.broker.registrations()[-1].follower.released_generation == 2  # type: ignore[union-attr]


def test_stale_and_malformed_plans_are_ignored(h: Harness) -> None:
    f = h.follower()
    tail = FakeTail.instances[-1]
    h.heartbeat()
    tail.push(PLANS, KEY.encode(), plan(5, {"m1": [0]}))
    f.poll(0)
    for value in (
        plan(4, {"m1": [0, 1, 2, 3]}),  # stale
        plan(9, {"m1": [0, 1, 2, 3]}, group="other"),  # another group's plan under our key
        b"garbage",
        json.dumps(
            {
                "schema": 1,
                "generation": 9,
                "consumer_group": {"group_id": "g", "assignment": {"m1": [["x"]]}},
                "stats": {},
            }
        ).encode(),
    ):
        tail.push(PLANS, KEY.encode(), value)
    tail.push(PLANS, b"consumer/other", plan(7, {"m1": [1]}, group="other"))  # another key: not ours
    f.poll(0)
    assert f.generation == 5 and f.assignment() == [(TOPIC, 0)]
    assert f.stats["plans_stale"] == 1 and f.stats["plans_skipped"] == 3


def test_a_gone_agent_means_group_subscription_after_the_grace(h: Harness) -> None:
    f = h.follower()
    tail = FakeTail.instances[-1]
    h.heartbeat()
    tail.push(PLANS, KEY.encode(), plan(1, {"m1": [0, 1]}))
    f.poll(0)
    h.broker.append(0, 2)
    h.drain(f)
    h.advance(10.5)  # the heartbeat is now older than agent_timeout_s
    f.poll(0)
    assert f.mode == "waiting" and f.assignment() == [], "released at once"
    assert h.broker.committed[(TOPIC, 0)] == 2
    assert h.consumers[0].subscribed is None, "not subscribed during the grace"
    h.advance(2.1)
    f.poll(0)
    assert f.mode == "subscription" and h.consumers[0].subscribed is not None
    f.poll(0)
    assert len(f.assignment()) == 4, "the group gave it everything"
    assert h.broker.registrations()[-1].follower.mode == "subscription"  # type: ignore[union-attr]
    assert f.stats["fallbacks"] == 1


def test_the_grace_is_cancelled_when_the_agent_is_back(h: Harness) -> None:
    f = h.follower()
    tail = FakeTail.instances[-1]
    h.heartbeat()
    tail.push(PLANS, KEY.encode(), plan(1, {"m1": [0]}))
    f.poll(0)
    h.advance(10.5)
    f.poll(0)
    assert f.mode == "waiting"
    h.heartbeat()
    tail.push(PLANS, KEY.encode(), plan(2, {"m1": [0, 1]}))
    h.advance(1.0)
    f.poll(0)
    assert f.mode == "plan" and f.assignment() == [(TOPIC, 0), (TOPIC, 1)]
    assert h.consumers[0].subscribed is None


def test_no_plan_within_the_timeout_means_group_subscription(h: Harness) -> None:
    f = h.follower()
    h.advance(19)
    f.poll(0)
    assert f.mode == "waiting"
    h.advance(1.5)
    f.poll(0)
    h.advance(2.1)
    f.poll(0)
    assert f.mode == "subscription"


def test_a_refused_plain_commit_fences_the_follower(h: Harness) -> None:
    """Someone in the group uses group subscription: the follower stops reading plan partitions at once."""
    f = h.follower()
    tail = FakeTail.instances[-1]
    h.heartbeat()
    tail.push(PLANS, KEY.encode(), plan(1, {"m1": [0, 1]}))
    h.broker.append(0, 3)
    h.drain(f)
    h.broker.members.add(12345)  # another member subscribed
    h.advance(5.1)  # the periodic commit is refused
    f.poll(0)
    assert f.stats["fenced"] == 1 and f.mode == "subscription"
    assert ("unassign", [0, 1]) in h.broker.events


def test_partitions_are_not_taken_while_the_group_has_subscribers(h: Harness) -> None:
    h.broker.members.add(12345)
    f = h.follower()
    tail = FakeTail.instances[-1]
    h.heartbeat()
    tail.push(PLANS, KEY.encode(), plan(1, {"m1": [0, 1]}))
    h.broker.append(0, 3)
    assert h.drain(f) == [] and f.assignment() == []
    assert f.stats["take_refused"] >= 1
    h.broker.members.clear()  # the group emptied: the next attempt takes them
    h.advance(1.1)
    assert len(h.drain(f)) == 3 and f.assignment() == [(TOPIC, 0), (TOPIC, 1)]


def test_back_from_subscription_when_a_newer_plan_arrives(h: Harness) -> None:
    f = h.follower()
    tail = FakeTail.instances[-1]
    h.heartbeat()
    tail.push(PLANS, KEY.encode(), plan(1, {"m1": [0]}))
    f.poll(0)
    h.advance(10.5)
    f.poll(0)
    h.advance(2.1)
    f.poll(0)
    f.poll(0)
    assert f.mode == "subscription" and len(f.assignment()) == 4
    h.broker.append(3, 4)
    h.drain(f)
    h.heartbeat()
    tail.push(PLANS, KEY.encode(), plan(1, {"m1": [0, 1, 2, 3]}))  # not newer than what it fell back from
    f.poll(0)
    assert f.mode == "subscription"
    tail.push(PLANS, KEY.encode(), plan(2, {"m1": []}, state="revoking"))  # the rejoin handover
    f.poll(0)
    assert f.mode == "plan" and f.assignment() == [] and f.stats["rejoins"] == 1
    assert h.broker.committed[(TOPIC, 3)] == 4, "committed in the revoke callback when leaving the group"
    assert h.broker.members == set()
    assert h.broker.registrations()[-1].follower.released_generation == 2  # type: ignore[union-attr]
    tail.push(PLANS, KEY.encode(), plan(3, {"m1": [2, 3]}))
    f.poll(0)
    assert f.assignment() == [(TOPIC, 2), (TOPIC, 3)]


def test_an_unconfirmed_registration_fences_the_follower_until_confirmed(h: Harness) -> None:
    f = h.follower()
    tail = FakeTail.instances[-1]
    h.heartbeat()
    tail.push(PLANS, KEY.encode(), plan(1, {"m1": [0, 1]}))
    f.poll(0)
    assert len(f.assignment()) == 2
    h.broker.deliver = False
    for _ in range(21):  # 21 s without a confirmed refresh (TTL 30 s: the fence is at 20 s)
        h.advance(1.0)
        h.heartbeat()
        f.poll(0)
    assert f.assignment() == [] and f.stats["self_fenced"] == 1
    h.broker.deliver = True
    h.advance(10.0)  # the next refresh is confirmed
    h.heartbeat()
    f.poll(0)
    f.poll(0)
    # Not at once: the agent may have expired us just before the refresh landed and be publishing a plan
    # without us; two of its intervals (1 s heartbeats here) later, with the plan topic read to its end.
    assert f.assignment() == []
    h.advance(2.5)
    h.heartbeat()
    f.poll(0)
    f.poll(0)
    assert f.assignment() == [(TOPIC, 0), (TOPIC, 1)]


@pytest.mark.parametrize("refuse", ["topic", "fatal"])
def test_a_registration_refused_by_acls_is_counted_and_the_plan_still_followed(
    h: Harness, refuse: str
) -> None:
    """No Write right on the registrations topic (issue 11 C): the brokers' refusal is an answer, not
    silence.  Before: the idempotent producer's fatal error (no producer id without any Write right) was
    raised from ``poll()`` into the application; and an unconfirmed registration fenced the member."""
    h.broker.refuse = refuse
    f = h.follower()
    tail = FakeTail.instances[-1]
    h.heartbeat()
    tail.push(PLANS, KEY.encode(), plan(1, {"m1": [0, 1]}))
    for _ in range(90):  # 90 s: three TTLs without one registration landing
        h.advance(1.0)
        h.heartbeat()
        f.poll(0)
        assert f.assignment() == [(TOPIC, 0), (TOPIC, 1)] and f.mode == "plan"
    assert f.stats["self_fenced"] == 0 and h.broker.registrations() == []
    assert f.stats["registrations_refused"] >= 9  # every refresh (TTL / 3) refused and counted
    if refuse == "fatal":  # a fatal producer is replaced at each refresh, not at every poll
        assert 9 <= h.broker.producers <= 11
    f.close()  # the unregistration is refused too: never raised


def test_a_member_fenced_then_expired_does_not_retake_what_a_newer_plan_gave_away(h: Harness) -> None:
    """Real Kafka, a broker restart: every follower self-fenced; the agent expired one and planned without
    it; that follower, confirmed again, re-took its cached plan while another read the new one."""
    f = h.follower()
    tail = FakeTail.instances[-1]
    h.heartbeat()
    tail.push(PLANS, KEY.encode(), plan(1, {"m1": [0, 1]}))
    f.poll(0)
    h.broker.deliver = False
    for _ in range(21):
        h.advance(1.0)
        h.heartbeat()
        f.poll(0)
    assert f.assignment() == []
    h.broker.deliver = True
    h.advance(10.0)
    h.heartbeat()
    f.poll(0)
    f.poll(0)
    assert f.assignment() == [], "confirmed, but the cached plan may be stale"
    tail.push(PLANS, KEY.encode(), plan(2, {"m2": [0, 1]}))  # the agent's plan without m1, late
    h.advance(2.5)
    h.heartbeat()
    f.poll(0)
    f.poll(0)
    assert f.assignment() == [], "the newer plan gives m1 nothing"


def test_close_commits_releases_and_unregisters(h: Harness) -> None:
    f = h.follower()
    tail = FakeTail.instances[-1]
    h.heartbeat()
    tail.push(PLANS, KEY.encode(), plan(1, {"m1": [0]}))
    h.broker.append(0, 3)
    h.drain(f)
    f.close()
    assert h.broker.committed[(TOPIC, 0)] == 3
    assert h.broker.records[-1] == (REGS, b"consumer/g/m1", None)
    assert h.consumers[0].closed


def test_abort_leaves_everything_as_a_crash_would(h: Harness) -> None:
    f = h.follower()
    tail = FakeTail.instances[-1]
    h.heartbeat()
    tail.push(PLANS, KEY.encode(), plan(1, {"m1": [0]}))
    h.broker.append(0, 3)
    h.drain(f)
    n = len(h.broker.records)
    f.abort()
    assert len(h.broker.records) == n and h.broker.committed[(TOPIC, 0)] == 0


@pytest.mark.parametrize(
    ("config", "settings", "text"),
    [
        ({"bootstrap.servers": "x:1"}, {}, "group.id"),
        ({"group.id": "g"}, {}, "bootstrap.servers"),
        ({"bootstrap.servers": "x:1", "group.id": "g"}, {"agent_timeout_s": 0}, "agent_timeout_s"),
        ({"bootstrap.servers": "x:1", "group.id": "g"}, {"fetch_mode": "closest"}, "fetch_mode"),
    ],
)
def test_bad_configuration_is_refused_with_the_setting_named(
    config: dict[str, Any], settings: dict[str, Any], text: str
) -> None:
    with pytest.raises(FollowerError, match=text):
        PlanFollower(config, ["t"], "m1", settings)


def test_a_tombstoned_plan_releases_everything(h: Harness) -> None:
    f = h.follower()
    tail = FakeTail.instances[-1]
    h.heartbeat()
    tail.push(PLANS, KEY.encode(), plan(4, {"m1": [0, 1]}))
    h.broker.append(0, 2)
    h.drain(f)
    tail.push(PLANS, KEY.encode(), None)
    f.poll(0)
    assert f.assignment() == [] and f.mode == "waiting"
    assert h.broker.committed[(TOPIC, 0)] == 2
    tail.push(PLANS, KEY.encode(), plan(5, {"m1": [1]}))  # the group is planned again
    f.poll(0)
    assert f.assignment() == [(TOPIC, 1)] and f.generation == 5


def test_the_follower_loads_the_protocol_package_not_the_agent() -> None:
    """A library for user apps: importing it must not pull in the agent's settings, planner or loop."""
    import os
    import subprocess
    import sys

    code = "import sys, rackplan.agent.follower; print(*sorted(m for m in sys.modules if m.startswith('rackplan')))"
    loaded = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ),
        timeout=60,
    ).stdout.split()
    assert {"rackplan.agent.protocol.plans", "rackplan.agent.protocol.registrations"} <= set(loaded), loaded
    agent_side = {
        "rackplan.agent.settings",
        "rackplan.agent.planner",
        "rackplan.agent.membership",
        "rackplan.agent.loop",
        "rackplan.agent.registry",
        "rackplan.assignor.parse",
    }
    assert not agent_side & set(loaded), sorted(agent_side & set(loaded))
