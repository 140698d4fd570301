"""The lease's heartbeat records and how commit answers are judged (the group itself runs in integration/)."""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, TopicPartition

from rackplan.agent.core.logging import get_logger
from rackplan.agent.ha.lease import Lease, LeaseLost, LeaseUnconfirmed, lease_orphaned
from rackplan.agent.kafka.embedded import EmbeddedCluster
from rackplan.agent.protocol.lease import Heartbeat, HeartbeatError, decode_heartbeat
from rackplan.agent.settings.ha import HaSettings


def test_heartbeat_round_trips() -> None:
    hb = Heartbeat("agent-1", 7, 1_800_000_000_000, 0.5)
    assert decode_heartbeat(b"leader", hb.encode()) == hb
    assert json.loads(hb.encode())["schema"] == 1


@pytest.mark.parametrize(
    ("key", "value", "text"),
    [
        (b"other", b"{}", "is not b'leader'"),
        (b"leader", None, "tombstone"),
        (b"leader", b"{nope", "not JSON"),
        (b"leader", b'{"schema": 2}', "schema-1"),
        (
            b"leader",
            b'{"schema": 1, "agent_id": "", "epoch": 1, "timestamp_ms": 1, "interval_s": 1}',
            "agent_id",
        ),
        (
            b"leader",
            b'{"schema": 1, "agent_id": "a", "epoch": -1, "timestamp_ms": 1, "interval_s": 1}',
            "epoch",
        ),
        (
            b"leader",
            b'{"schema": 1, "agent_id": "a", "epoch": true, "timestamp_ms": 1, "interval_s": 1}',
            "epoch",
        ),
        (
            b"leader",
            b'{"schema": 1, "agent_id": "a", "epoch": 1, "timestamp_ms": 1, "interval_s": 0}',
            "interval_s",
        ),
    ],
)
def test_malformed_heartbeats_are_refused_with_a_reason(key: bytes, value: bytes | None, text: str) -> None:
    with pytest.raises(HeartbeatError, match=text):
        decode_heartbeat(key, value)


@pytest.fixture
def lease() -> Any:
    # Nothing listens there: the consumer is made but never reaches a broker within the test.
    lease = Lease({"bootstrap.servers": "127.0.0.1:1"}, HaSettings(enabled=True), "agent-x", get_logger("t"))
    yield lease
    lease.close()


def test_the_lease_follows_the_assignment_of_partition_zero(lease: Lease) -> None:
    assert not lease.held
    with pytest.raises(LeaseLost, match="not assigned"):
        lease.confirm(0.1)
    lease._on_assign(None, [TopicPartition("_rackplan.lease", 0)])
    assert lease.held
    lease._on_assign(None, [])  # cooperative: an incremental assignment that adds nothing
    assert lease.held
    lease._on_revoke(None, [TopicPartition("other", 0)])
    assert lease.held
    lease._on_revoke(None, [TopicPartition("_rackplan.lease", 0)])
    assert not lease.held


@pytest.mark.parametrize(
    ("code", "lost"),
    [
        (KafkaError.UNKNOWN_MEMBER_ID, True),
        (KafkaError.FENCED_INSTANCE_ID, True),
        (KafkaError.REBALANCE_IN_PROGRESS, False),
        (KafkaError.ILLEGAL_GENERATION, False),
        (KafkaError.COORDINATOR_NOT_AVAILABLE, False),
    ],
)
def test_commit_answers(lease: Lease, code: int, lost: bool) -> None:
    with pytest.raises(LeaseLost if lost else LeaseUnconfirmed):
        lease._judge(KafkaError(code))


def test_an_unreachable_coordinator_leaves_the_lease_unconfirmed(lease: Lease) -> None:
    lease._on_assign(None, [TopicPartition("_rackplan.lease", 0)])
    with pytest.raises(LeaseUnconfirmed, match="not confirmed within"):
        lease.confirm(0.3)
    assert lease.held, "not knowing is not losing: publishing just waits"
    logging.getLogger().debug("done")


def test_lease_schema_agrees_with_the_decoder() -> None:
    from pathlib import Path

    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).resolve().parents[3] / "docs" / "lease-schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(json.loads(Heartbeat("a", 2, 5, 0.3).encode()), schema)
    for bad in ({"schema": 1, "agent_id": "a", "epoch": -1, "timestamp_ms": 1, "interval_s": 1},):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
        with pytest.raises(HeartbeatError):
            decode_heartbeat(b"leader", json.dumps(bad).encode())


def test_foreign_writer_is_a_live_agent_outside_our_lease_group() -> None:
    from rackplan.agent.ha.lease import foreign_writer
    from rackplan.agent.protocol.lease import Heartbeat

    now = 1_000_000
    other = Heartbeat("b", 7, now - 2_000, 5.0)  # no lease: an agent with ha.enabled false
    reason = foreign_writer(other, "a", None, now)
    assert reason is not None and "'b'" in reason and "without a lease" in reason and "epoch 7" in reason
    assert foreign_writer(other, "a", "agents", now) is not None, (
        "a lease does not fence an agent without one"
    )
    assert foreign_writer(other, "b", None, now) is None, "our own heartbeat"
    grouped = Heartbeat("b", 7, now - 2_000, 5.0, "agents")
    assert foreign_writer(grouped, "a", "agents", now) is None, "the same lease group: a takeover"
    assert foreign_writer(grouped, "a", "others", now) is not None
    assert foreign_writer(grouped, "a", None, now) is not None
    # Gone: older than three intervals (and 10 s); or released by a clean stop.
    assert foreign_writer(Heartbeat("b", 7, now - 16_000, 5.0), "a", None, now) is None
    assert foreign_writer(Heartbeat("b", 7, now - 2_000, 5.0, released=True), "a", None, now) is None
    # The broker's record timestamp wins over the writer's clock (a heartbeat dated ahead stays old).
    ahead = Heartbeat("b", 7, now + 86_400_000, 5.0, seen_ms=now - 60_000)
    assert foreign_writer(ahead, "a", None, now) is None


def test_heartbeats_round_trip_with_lease_group_and_release() -> None:
    from rackplan.agent.protocol.lease import HEARTBEAT_KEY, Heartbeat, decode_heartbeat

    hb = Heartbeat("a", 3, 42, 1.5, "agents", released=True)
    assert decode_heartbeat(HEARTBEAT_KEY, hb.encode()) == hb
    old = b'{"schema":1,"agent_id":"a","epoch":3,"timestamp_ms":42,"interval_s":1.5}'
    assert decode_heartbeat(HEARTBEAT_KEY, old) == Heartbeat("a", 3, 42, 1.5), (
        "written before the fields existed"
    )


UNKNOWN_TOPIC_OR_PART = 3


def _unknown_while_the_group_forms(cluster: EmbeddedCluster, topic: str) -> threading.Thread:
    """What the real cluster did (CI, 1 run in 4): the subscription saw the new lease topic, then the group
    leader's assignment-time metadata request went to a broker that did not know it yet.  The coordinator
    holds the first JoinGroup answers 2 s here; the topic is unknown from 0.5 s to 3.5 s, then known
    for good."""
    cluster.set_group_rebalance_delay(2000)

    def run() -> None:
        time.sleep(0.5)
        cluster.set_topic_error(topic, UNKNOWN_TOPIC_OR_PART)
        time.sleep(3.0)
        cluster.set_topic_error(topic, 0)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_a_group_that_assigned_the_lease_to_nobody_assigns_it_after_a_rejoin() -> None:
    with EmbeddedCluster(brokers_per_rack=1, racks=3) as c:
        c.create_topic("lease", 1, 1)
        ha = HaSettings(enabled=True, group_id="g", lease_topic="lease", session_timeout_s=6)
        lease = Lease({"bootstrap.servers": c.bootstrap_servers}, ha, "a", get_logger("t"))
        try:
            _unknown_while_the_group_forms(c, "lease").join()
            # librdkafka never rebalances by itself: the partition count it watches did not change.
            assert not lease.poll(6.0), "the stall was not reproduced: the group assigned the lease"
            lease.rejoin()
            # The join waits out the coordinator's 2 s rebalance delay, and the old member's session (6 s)
            # when its LeaveGroup is late: on a loaded CI machine one 6 s poll was too short (1 run seen).
            deadline = time.monotonic() + 20.0
            while not lease.poll(0.5) and time.monotonic() < deadline:
                pass
            assert lease.held, "a new member of the group was not given the lease"
        finally:
            lease.close()


def test_a_standby_rejoins_when_nobody_holds_the_lease_and_then_leads() -> None:
    # The agent end to end on the embedded cluster: before the rejoin it stood by for good.
    from rackplan.agent.demo.run import topic_creator
    from rackplan.agent.ha.rejoin import lease_rejoin_after_s
    from rackplan.agent.runtime.loop import Agent
    from rackplan.agent.settings.sections import Settings

    with EmbeddedCluster(brokers_per_rack=1, racks=3) as c:
        settings = Settings.model_validate(
            {
                "kafka": {"bootstrap_servers": c.bootstrap_servers},
                "poll_interval_s": 0.5,
                "ha": {"session_timeout_s": 3.0},
                "http": {"port": 0},
                "log": {"format": "json", "level": "warning"},
            }
        )
        created = topic_creator(c)

        def create_then_stall(specs: list[Any]) -> None:
            created(specs)
            _unknown_while_the_group_forms(c, settings.ha.lease_topic)

        agent = Agent(settings, create_missing_topics=create_then_stall)
        cycles: list[Any] = []
        agent.on_cycle = cycles.append
        runner = threading.Thread(target=agent.run, daemon=True)
        runner.start()
        try:
            deadline = time.monotonic() + lease_rejoin_after_s(3.0) + 20
            while not cycles and time.monotonic() < deadline:
                time.sleep(0.1)
            assert cycles, "the agent never led: it stood by for a lease nobody held"
            assert agent.metrics.get("rackplan_lease_rejoins_total") == 1.0
        finally:
            agent.stop.set()
            runner.join(30)


def test_the_lease_is_orphaned_only_when_no_live_holder_can_exist() -> None:
    session_s = 10.0
    now = 1_000_000
    fresh = Heartbeat("b", 4, now - 1_000, 1.0)
    assert lease_orphaned(None, now, session_s)  # nobody ever led on these topics
    assert lease_orphaned(Heartbeat("b", 4, now - 1_000, 1.0, released=True), now, session_s)
    assert not lease_orphaned(fresh, now, session_s)
    # Past a live writer's 10 s but within the session timeout: the coordinator may not have evicted it.
    assert not lease_orphaned(Heartbeat("b", 4, now - 15_000, 1.0), now, session_s)
    assert lease_orphaned(Heartbeat("b", 4, now - 21_000, 1.0), now, session_s)
    # A slow writer's three intervals count.
    assert not lease_orphaned(Heartbeat("b", 4, now - 35_000, 10.0), now, session_s)


class _LateAnswers:
    """The lease's group client with the coordinator's answers arriving late, in order: the answer to a
    commit is read off the socket only once the next request goes out (a paused process, a slow coordinator)."""

    def __init__(self, lease: Lease, answers: list[int], prompt: bool = False) -> None:
        self.lease = lease
        self.prompt = prompt  # a coordinator that answers each commit at once
        self.answers = answers  # error code per commit, in order (0: accepted)
        self.sent = 0
        self.arrived = 0  # answers read off the socket
        self.served = 0  # answers whose callback ran
        self.offsets: list[Any] = []  # each commit's offsets: its answer names them
        self.lost: set[int] = set()  # commits whose answer never comes

    def commit(self, offsets: Any, asynchronous: bool) -> None:
        self.offsets.append(offsets)
        self.sent += 1
        # sending this one reads the answers to every earlier one
        self.arrived = self.sent if self.prompt else self.sent - 1

    def poll(self, _timeout: float) -> None:
        if self.served < self.arrived:
            code = self.answers[self.served]
            self.served += 1
            if self.served - 1 not in self.lost:
                self.lease._on_commit(KafkaError(code) if code else None, self.offsets[self.served - 1])
            self.arrived = self.sent  # the rest follow
        else:
            time.sleep(0.005)

    def close(self) -> None:
        pass


def test_a_late_answer_to_an_earlier_commit_does_not_confirm_the_lease(lease: Lease) -> None:
    # The first confirmation times out (its commit is accepted, but the answer comes late); meanwhile the
    # group removed this member.  The second confirmation's commit is refused: the first one's late
    # "accepted" must not pass for its answer, or a deposed leader publishes.
    lease._consumer.close()
    fake = lease._consumer = _LateAnswers(lease, [0, KafkaError.UNKNOWN_MEMBER_ID])
    lease._on_assign(None, [TopicPartition("_rackplan.lease", 0)])
    with pytest.raises(LeaseUnconfirmed):
        lease.confirm(0.1)
    with pytest.raises(LeaseLost, match="UNKNOWN_MEMBER_ID"):
        lease.confirm(1.0)
    assert fake.served == 2


def test_a_rejoined_member_does_not_wait_for_the_answers_of_the_one_it_replaced(lease: Lease) -> None:
    lease._consumer.close()
    lease._consumer = _LateAnswers(lease, [0])
    lease._on_assign(None, [TopicPartition("_rackplan.lease", 0)])
    with pytest.raises(LeaseUnconfirmed):
        lease.confirm(0.1)  # its answer never comes: that member is closed by the rejoin
    lease.rejoin()
    lease._consumer.close()
    fresh = lease._consumer = _LateAnswers(lease, [0], prompt=True)
    lease._on_assign(None, [TopicPartition("_rackplan.lease", 0)])
    lease.confirm(1.0)
    assert fresh.served == 1


class _Refusing:
    """The group client whose every poll returns the coordinator's refusal ``code`` of the join."""

    def __init__(self, code: int) -> None:
        self.code = code

    def poll(self, _timeout: float) -> Any:
        code = self.code

        class Message:
            def error(self) -> KafkaError:
                return KafkaError(code, "JoinGroup failed")

        return Message()

    def close(self) -> None:
        pass


def test_a_session_timeout_the_brokers_refuse_stops_the_agent_naming_the_setting(lease: Lease) -> None:
    from rackplan.agent.core.errors import CannotRun

    lease._consumer.close()
    lease._consumer = _Refusing(KafkaError.GROUP_AUTHORIZATION_FAILED)
    assert not lease.poll(0.1), "no access to the group: logged, asked again (an ACL may be added)"
    lease._consumer = _Refusing(KafkaError.INVALID_SESSION_TIMEOUT)
    with pytest.raises(CannotRun, match=r"ha.session_timeout_s 10 is refused by the brokers"):
        lease.poll(0.1)


def test_an_answer_that_never_comes_delays_no_later_confirmation(lease: Lease) -> None:
    lease._consumer.close()
    fake = lease._consumer = _LateAnswers(lease, [0, 0, 0], prompt=True)
    fake.lost = {0}
    lease._on_assign(None, [TopicPartition("_rackplan.lease", 0)])
    with pytest.raises(LeaseUnconfirmed):
        lease.confirm(0.1)
    lease.confirm(1.0)
    lease.confirm(1.0)
