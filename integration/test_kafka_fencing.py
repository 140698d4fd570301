"""Producer-epoch fencing of the plan publisher on real Kafka (issue 9, "Also").

The agent publishes plan-topic records in transactions whose ``transactional.id`` is one per lease
group and plan topic (:func:`rackplan.agent.kafka.publisher.transactional_id`).  When another agent of the same
settings starts publishing, its InitProducerId bumps the producer epoch: the broker aborts the
previous holder's open transaction and refuses its next send or commit.  Readers read the plan topic
read_committed, so a deposed agent's records sent in the window between its last lease confirmation
and its publish never reach them.

librdkafka's mock cluster accepts transactions but never fences (checked when this was written:
a second producer of the same id leaves the first one publishing), so these run on real Kafka only, and
the agent on the embedded cluster keeps its plain producer (agent/runtime/loop.py ``start``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from integration.e2e import AgentProcess
from integration.kafka.cluster import KafkaCluster
from rackplan.agent.core.errors import CannotRun
from rackplan.agent.core.ports import PlanPublisher
from rackplan.agent.kafka.exceptions import ProducerFenced, TopicReadError
from rackplan.agent.kafka.publisher import WRITER_HEADER, Publisher, transactional_id
from rackplan.agent.kafka.tail import RawRecord, TopicTail
from rackplan.agent.protocol.plans import decode_record

from .conftest import RunningAgent, Target, range_group
from .test_kafka_operations import create

RunAgent = Callable[..., RunningAgent]


def read_plan_topic(bootstrap: str, topic: str, isolation: str = "read_committed") -> list[RawRecord]:
    tail = TopicTail({"bootstrap.servers": bootstrap}, topic, 30, overrides={"isolation.level": isolation})
    try:
        records, complete = tail.read_available(30)
    finally:
        tail.close()
    assert complete, f"{topic} not read to its end"
    return records


def writer(r: RawRecord) -> str:
    return (r.header(WRITER_HEADER) or b"").decode()


def test_a_zombie_publishers_open_transaction_is_fenced_and_never_read(real: Target, e2e_report: Any) -> None:
    """A publisher stalled inside a transaction (records sent and acknowledged, commit not yet called)
    when a newer one of the same transactional.id initialises: its commit is refused (ProducerFenced),
    its records are in the log but aborted, so read_committed readers never see them; and it can never
    publish again."""
    topic = create(real, "fence-plans", [[1, 2, 3]], {"cleanup.policy": "compact"})
    conf = {"bootstrap.servers": real.bootstrap}
    tid = transactional_id(real.name("agents"), topic)

    def publisher(name: str) -> Publisher:
        return Publisher(
            conf,
            1_000_000,
            headers=[(WRITER_HEADER, name.encode())],
            transactional_id=tid,
            fenced_topics=[topic],
        )

    old = publisher("old")
    t0 = time.monotonic()
    old.publish_many(topic, [("consumer/g", b'{"g":1}')], 30)
    first_txn_s = time.monotonic() - t0
    # The window: the old leader begins a transaction, its records reach the brokers... and it stalls.
    producer = old._transactional(30)
    producer.begin_transaction()
    producer.produce(
        topic, key=b"consumer/g", value=b'{"g":2,"zombie":true}', headers=[(WRITER_HEADER, b"old")]
    )
    assert producer.flush(30) == 0
    t1 = time.monotonic()
    new = publisher("new")
    new.publish_many(topic, [("consumer/g", b'{"g":3}')], 60)  # InitProducerId aborts the old transaction
    takeover_s = time.monotonic() - t1
    with pytest.raises(ProducerFenced, match="publishes now"):
        producer_commit_or_publish(old, topic)
    assert old.fenced is not None
    with pytest.raises(ProducerFenced):  # and never again
        old.publish_many(topic, [("consumer/g", b'{"g":4}')], 10)

    committed = read_plan_topic(real.bootstrap, topic)
    everything = read_plan_topic(real.bootstrap, topic, "read_uncommitted")
    assert [(writer(r), r.value) for r in committed] == [("old", b'{"g":1}'), ("new", b'{"g":3}')]
    zombies = [r for r in everything if r.value is not None and b"zombie" in r.value]
    assert len(zombies) == 1, "the stalled record did reach the log: the window was real"
    e2e_report(
        target="kafka",
        first_transaction_s=round(first_txn_s, 3),
        takeover_publish_s=round(takeover_s, 3),
        records_in_log=len(everything),
        records_read_committed=len(committed),
        zombie_records_read_committed=0,
    )


def producer_commit_or_publish(old: Publisher, topic: str) -> None:
    """The stalled publisher resumes: commits its open transaction as the agent would (through the
    publisher's error handling)."""
    from confluent_kafka import KafkaException

    try:
        old._txn.commit_transaction(30)
    except KafkaException as e:
        raise old._txn_failed(e, 30) from e


def test_a_paused_leader_resumed_after_a_takeover_lands_nothing_and_steps_down(
    real: Target, launched: KafkaCluster, tmp_path: Path, e2e_report: Any
) -> None:
    """Two agents with the same settings (HA); the leader is paused (SIGSTOP), the other takes over and
    publishes a new plan after a reassignment; the first is resumed (SIGCONT): nothing it writes lands
    after the takeover (plan topic read read_committed, by the rackplan-agent header), it steps down
    and keeps running, and generations never go backwards."""
    pay = create(real, "fpay", [[1], [4], [1], [2], [5], [2]])
    group = {**range_group(real.name("fpay"), [pay], racks="ab"), "assignor": "rack-optimal"}
    key = f"consumer/{group['group_id']}"
    settings = real.agent_settings(
        [group],
        {
            "poll_interval_s": 0.5,
            "change_persist_polls": 2,
            "log": {"format": "json", "level": "info"},
            "http": {"port": 0},
        },
        {"ha": {"enabled": True, "session_timeout_s": 6.0}},  # brokers refuse less than 6 s,
    ).model_dump(mode="json")
    settings["ha"].pop("agent_id", None)
    plan_topic = settings["plan_topic"]
    agent_pid: int | None = None
    a = AgentProcess(settings, tmp_path, "agent-a")
    b = AgentProcess(settings, tmp_path, "agent-b")
    try:
        t0 = time.monotonic()
        a.start()
        deadline = time.monotonic() + 120
        while not any(writer(r) == "agent-a" and r.key == key.encode() for r in _plans(real, plan_topic)):
            assert time.monotonic() < deadline, a.log_path.read_text()[-3000:]
            assert a.proc is not None and a.proc.poll() is None, a.log_path.read_text()[-3000:]
            time.sleep(0.5)
        first_publish_s = time.monotonic() - t0
        b.start()
        time.sleep(5)  # B stands by (group joined)
        assert a.proc is not None
        agent_pid = supervised_child(a.proc.pid)
        os.kill(agent_pid, signal.SIGSTOP)
        paused_at = time.monotonic()
        # While A is paused: a reassignment across racks that B, once leading, plans for.
        launched.reassign({(pay, 0): [2], (pay, 3): [1]})
        b_plans = plans_written_by(real, plan_topic, key, b)
        takeover_s = time.monotonic() - paused_at
        before_resume = len(_plans(real, plan_topic))
        os.kill(agent_pid, signal.SIGCONT)
        resumed_at = time.monotonic()
        deadline = time.monotonic() + 60
        while not (stepped := [e for e in a.events() if e.get("event") == "leadership lost; standing by"]):
            assert time.monotonic() < deadline, a.log_path.read_text()[-3000:]
            time.sleep(0.5)
        step_down_s = time.monotonic() - resumed_at
        time.sleep(3 * 0.5 + 2)  # a few of A's cycles after resuming
        assert a.proc.poll() is None and supervised_child(a.proc.pid) == agent_pid, "never crashes: stands by"
        records, generations = nothing_late(real, plan_topic, key, b_plans, "agent-a")
        fenced = [e for e in a.events() if e.get("event", "").startswith("plan producer fenced")]
        e2e_report(
            target="kafka",
            first_publish_s=round(first_publish_s, 2),
            takeover_after_pause_s=round(takeover_s, 2),
            step_down_after_resume_s=round(step_down_s, 2),
            step_down_reason=stepped[0].get("reason"),
            producer_fenced_events=len(fenced),
            plan_records=len(records),
            records_at_resume=before_resume,
            late_records_of_deposed_agent=0,
            generations=generations,
        )
    finally:
        if agent_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(agent_pid, signal.SIGCONT)
        a.stop()
        b.stop()


def stall_plan_publishes(
    publisher: PlanPublisher, plan_topic: str
) -> tuple[threading.Event, threading.Event]:
    """``publisher`` stalls before sending to ``plan_topic`` (the window a pause leaves: planned, confirmed,
    not yet sent) until ``release`` is set; ``stalled`` is set when it does."""
    stalled, release = threading.Event(), threading.Event()
    real_publish = publisher.publish_each

    def stalling_publish(
        topic: str, records: list[tuple[str, bytes | None]], timeout_s: float
    ) -> Sequence[Exception | None]:
        if topic == plan_topic and not release.is_set():
            stalled.set()
            release.wait(120)
        return real_publish(topic, records, timeout_s)

    publisher.publish_each = stalling_publish  # type: ignore[method-assign]
    return stalled, release


def plans_written_by(
    real: Target, topic: str, key: str, agent: AgentProcess, timeout: float = 120
) -> list[RawRecord]:
    """The committed plan records of ``key`` that ``agent`` wrote, once there is one (the agent must live)."""
    deadline = time.monotonic() + timeout
    while not (mine := [r for r in _plans(real, topic) if writer(r) == agent.name and r.key == key.encode()]):
        assert time.monotonic() < deadline, agent.log_path.read_text()[-3000:]
        assert agent.proc is not None and agent.proc.poll() is None, agent.log_path.read_text()[-3000:]
        time.sleep(0.5)
    return mine


def nothing_late(
    real: Target, topic: str, key: str, successor: list[RawRecord], deposed: str
) -> tuple[list[RawRecord], list[int]]:
    """The committed plan records and ``key``'s generations, asserting that ``deposed`` wrote nothing after the
    successor's first record and that generations only go up."""
    records = _plans(real, topic)
    takeover_offset = min(r.offset for r in successor)
    late = [r for r in records if writer(r) == deposed and r.offset > takeover_offset]
    assert late == [], [(r.offset, r.key) for r in late]
    generations = [
        rec.generation
        for r in records
        if r.key == key.encode() and (rec := decode_record(r.key, r.value)) is not None
    ]
    assert generations == sorted(generations) and len(set(generations)) == len(generations), generations
    return records, generations


def supervised_child(pid: int) -> int:
    """The agent process under ``rackplan agent run``'s supervisor (agent/runtime/supervisor.py): the one to pause."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


def _plans(real: Target, topic: str) -> list[RawRecord]:
    try:
        return read_plan_topic(real.bootstrap, topic)
    except TopicReadError:  # the topic may not exist until the first agent created it
        return []


def test_a_leader_stalled_between_confirmation_and_publish_is_fenced_by_its_successor(
    real: Target, launched: KafkaCluster, run_agent: RunAgent, tmp_path: Path, e2e_report: Any
) -> None:
    """The window the lease leaves, made to happen: agent A confirms its lease for a new plan, then stalls
    before sending it (its publish blocked here) for longer than ``ha.max_cycle_s``, so the group gives the
    lease to agent B, which plans and publishes.  A then sends: the broker refuses its transaction (B's
    InitProducerId bumped the epoch), A logs it, counts it and stands by; nothing of A lands after B."""
    pay = create(real, "zpay", [[1], [4], [1], [2], [5], [2]])
    group = {**range_group(real.name("zpay"), [pay], racks="ab"), "assignor": "rack-optimal"}
    key = f"consumer/{group['group_id']}"
    doc = {
        "poll_interval_s": 0.5,
        "change_persist_polls": 2,
        "http": {"port": 0},
        "log": {"format": "json", "level": "info"},
        # max_cycle_s: a leader stalled longer than the session timeout (6 s) is removed from the group
        "ha": {"enabled": True, "session_timeout_s": 6.0, "max_cycle_s": 1.0},
    }
    a_settings = real.agent_settings([group], doc, {"ha": {"agent_id": "agent-a"}})
    a = run_agent(a_settings)
    a.wait_for(lambda r: any(p.key == key for p in r.published), timeout=60)
    agent = a.agent
    publisher = agent.publisher
    assert publisher is not None
    stalled, release = stall_plan_publishes(publisher, a_settings.plan_topic)
    b_doc = a_settings.model_dump(mode="json")
    b_doc["ha"].pop("agent_id", None)
    b = AgentProcess(b_doc, tmp_path, "agent-b")
    try:
        b.start()
        time.sleep(5)  # B joins the group and stands by
        launched.reassign({(pay, 0): [2], (pay, 3): [1]})
        assert stalled.wait(60), "A never planned for the reassignment"
        stalled_at = time.monotonic()
        b_plans = plans_written_by(real, a_settings.plan_topic, key, b)
        takeover_s = time.monotonic() - stalled_at
        release.set()
        deadline = time.monotonic() + 60
        while not agent.metrics.get("rackplan_publisher_fenced_total"):
            assert time.monotonic() < deadline, "A's late publish was not fenced"
            assert a.error is None, repr(a.error)
            time.sleep(0.2)
        time.sleep(2)
        assert a.thread.is_alive() and a.error is None and not agent.leader, "A stands by, never crashes"
        records, generations = nothing_late(real, a_settings.plan_topic, key, b_plans, "agent-a")
        everything = read_plan_topic(real.bootstrap, a_settings.plan_topic, "read_uncommitted")
        e2e_report(
            target="kafka",
            takeover_after_stall_s=round(takeover_s, 2),
            publisher_fenced=agent.metrics.get("rackplan_publisher_fenced_total"),
            plan_records_committed=len(records),
            plan_records_in_log=len(everything),
            late_records_of_deposed_agent=0,
            generations=generations,
        )
    finally:
        release.set()
        b.stop()


def test_without_ha_a_stalled_agent_is_fenced_by_its_replacement_and_exits_2(
    real: Target, launched: KafkaCluster, run_agent: RunAgent, tmp_path: Path, e2e_report: Any
) -> None:
    """``ha.enabled: false`` (one agent, no lease): agent A stalls between planning and publishing (a long
    pause, a frozen VM) until its heartbeat looks gone, and an operator starts agent B with the same
    settings.  B's InitProducerId bumps the producer epoch of the shared ``transactional.id``; when A
    resumes, the broker refuses its publish: A exits with the reason (``rackplan agent run``: exit 2),
    nothing of A lands after B, and generations never go backwards."""
    pay = create(real, "npay", [[1], [4], [1], [2], [5], [2]])
    group = {**range_group(real.name("npay"), [pay], racks="ab"), "assignor": "rack-optimal"}
    key = f"consumer/{group['group_id']}"
    doc = {
        "poll_interval_s": 0.5,
        "change_persist_polls": 2,
        "http": {"port": 0},
        "log": {"format": "json", "level": "info"},
        # max_cycle_s: A's heartbeats (their own thread) pause once its stalled cycle passes 1 s, as a
        # frozen process's stop; otherwise B would see A alive and refuse to start beside it
        "ha": {"enabled": False, "max_cycle_s": 1.0},
    }
    a_settings = real.agent_settings([group], doc, {"ha": {"agent_id": "agent-a"}})
    a = run_agent(a_settings)
    a.wait_for(lambda r: any(p.key == key for p in r.published), timeout=60)
    publisher = a.agent.publisher
    assert publisher is not None
    stalled, release = stall_plan_publishes(publisher, a_settings.plan_topic)
    b_doc = a_settings.model_dump(mode="json")
    b_doc["ha"].pop("agent_id", None)
    b = AgentProcess(b_doc, tmp_path, "agent-b")
    try:
        launched.reassign({(pay, 0): [2], (pay, 3): [1]})
        assert stalled.wait(60), "A never planned for the reassignment"
        stalled_at = time.monotonic()
        b.start()  # A's last heartbeat is fresh: B waits two of its intervals for a newer one, then starts
        b_plans = plans_written_by(real, a_settings.plan_topic, key, b)
        replaced_s = time.monotonic() - stalled_at
        release.set()
        a.thread.join(60)
        assert not a.thread.is_alive(), "A kept running after its publish was refused"
        assert isinstance(a.error, CannotRun), repr(a.error)
        assert "publishes now" in str(a.error) and "exits" in str(a.error), str(a.error)
        assert a.agent.metrics.get("rackplan_publisher_fenced_total") == 1
        assert b.proc is not None and b.proc.poll() is None, "B keeps publishing"
        records, generations = nothing_late(real, a_settings.plan_topic, key, b_plans, "agent-a")
        everything = read_plan_topic(real.bootstrap, a_settings.plan_topic, "read_uncommitted")
        e2e_report(
            target="kafka",
            replacement_published_after_s=round(replaced_s, 2),
            publisher_fenced=1,
            a_error=str(a.error)[:80],
            plan_records_committed=len(records),
            plan_records_in_log=len(everything),
            late_records_of_fenced_agent=0,
            generations=generations,
        )
    finally:
        release.set()
        b.stop()
        a.error = None  # its CannotRun is this test's expected outcome, asserted above


def test_a_tail_that_already_read_a_transaction_reads_to_its_end_at_once(real: Target) -> None:
    """The plan topic is written in transactions, so each partition ends in a commit marker: an offset
    that no reader is ever given.  A follower's tail reads new plans as they come (``read_new``), then,
    when it unfences, reads to the topics' ends (``read_available``).  That read must see its position
    is already past the marker, not wait for a record or an end-of-partition event that never comes
    (found as followers that stayed fenced for good after a broker outage in the chaos test)."""
    topic = create(real, "tail-txn", [[1, 2, 3], [2, 3, 4]], {"cleanup.policy": "compact"})
    conf = {"bootstrap.servers": real.bootstrap}
    pub = Publisher(
        conf, 1_000_000, transactional_id=transactional_id(real.name("tail"), topic), fenced_topics=[topic]
    )
    try:
        pub.publish_many(topic, [("consumer/g", b'{"g":1}')], 30)
        tail = TopicTail(conf, topic, 30)
        try:
            # The end a read_committed reader is given is the last stable offset: a transaction's records
            # count once its commit marker is written, just after the commit returns.
            first: list[RawRecord] = []
            deadline = time.monotonic() + 30
            while not first and time.monotonic() < deadline:
                got, complete = tail.read_available(30)
                assert complete
                first += got
            assert [r.value for r in first] == [b'{"g":1}']
            pub.publish_many(topic, [("consumer/g", b'{"g":2}')], 30)
            seen: list[RawRecord] = []
            deadline = time.monotonic() + 30
            while not seen and time.monotonic() < deadline:
                seen += tail.read_new()[0]
                time.sleep(0.1)
            assert [r.value for r in seen] == [b'{"g":2}']
            time.sleep(1.0)  # the end-of-partition event after the marker arrives, and read_new takes it
            assert tail.read_new()[0] == []
            t0 = time.monotonic()
            rest, complete = tail.read_available(5)
            took = time.monotonic() - t0
        finally:
            tail.close()
    finally:
        pub.flush(10)
    assert complete, "read_available waited for an offset no reader is given (the commit marker)"
    assert rest == [] and took < 2.0, took
