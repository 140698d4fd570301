"""Issue 11 through real clients: poison records on every control topic (librdkafka's mock cluster, and one
compacted poison record on real Kafka), a plan follower fed poison, and a publish that times out and lands
later (the reason a generation is never reused after an uncertain delivery).

The agent's decisions around these (skip and count, reserve a generation, refuse forged registrations,
judge heartbeats by record time) are tested with fake clients in tests/agent/test_hostile_records.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from rackplan.agent.follower import PlanFollower
from rackplan.agent.kafka.embedded import EmbeddedCluster
from rackplan.agent.kafka.exceptions import PublishError
from rackplan.agent.kafka.publisher import Publisher
from rackplan.agent.protocol.lease import Heartbeat
from rackplan.agent.protocol.registrations import registration_key
from rackplan.agent.runtime.loop import topic_specs

from .conftest import FOLLOWER_AGENT_SETTINGS, RunningAgent, Target, agent_settings, range_group
from .e2e import FollowerApp, Ledger, wait_until
from .test_followers import settled

RunAgent = Callable[..., RunningAgent]
DEEP = 100_000
POISON = b'{"x":' + b"[" * DEEP + b"]" * DEEP + b"}"
PLANS, REGS, LEASE = "_rackplan.plans", "_rackplan.registrations", "_rackplan.lease"


def produce(bootstrap: str, topic: str, records: Sequence[tuple[bytes, bytes | None]]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    errors: list[str] = []
    for key, value in records:
        p.produce(
            topic,
            key=key,
            value=value,
            on_delivery=lambda err, _m: None if err is None else errors.append(str(err)),
        )
    assert p.flush(30) == 0 and errors == []


def registration(group: str, member: str, rack: str, topics: list[str]) -> tuple[bytes, bytes]:
    value = {"schema": 1, "group_id": group, "member_id": member, "rack": rack, "topics": topics}
    return registration_key("consumer", group, member).encode(), json.dumps(value).encode()


def plan_value(group: str, generation: int, assignment: dict[str, list[list[Any]]]) -> bytes:
    return json.dumps(
        {
            "schema": 1,
            "generation": generation,
            "state": "proposed",
            "consumer_group": {"group_id": group, "assignment": assignment, "revoked": {}},
            "stats": {},
        }
    ).encode()


def skipped(agent: RunningAgent, topic: str) -> float:
    return agent.agent.metrics.get("rackplan_records_skipped_total", {"topic": topic, "reason": "too_deep"})


def test_poison_on_every_control_topic_leaves_the_agent_working(
    make_cluster: Callable[..., EmbeddedCluster], run_agent: RunAgent, e2e_report: Any
) -> None:
    """Found: a 100,000-deep record made every restart exit 1 (plans, registrations, lease), and a running
    agent lost the rest of a registrations fetch."""
    c = make_cluster()
    c.create_topic("orders", 6, 2)
    for topic in (PLANS, REGS, LEASE):
        c.create_topic(topic, 1, 3)
    b = c.bootstrap_servers
    released = Heartbeat("gone", 5, int(time.time() * 1000), 1.0, released=True).encode()
    produce(
        b,
        PLANS,
        [(b"consumer/file", POISON), (b"consumer/file", plan_value("file", 3, {})), (b"consumer/x", POISON)],
    )
    produce(b, LEASE, [(b"leader", released), (b"leader", POISON)])
    produce(
        b,
        REGS,
        [registration("dyn", f"m-{i}", f"az-{'abc'[i % 3]}", ["orders"]) for i in range(2)]
        + [(b"consumer/dyn/poison", POISON)]
        + [registration("dyn", f"m-{i}", f"az-{'abc'[i % 3]}", ["orders"]) for i in range(2, 5)],
    )
    settings = agent_settings(b, [range_group("file", ["orders"])], io_timeout_s=10)
    t0 = time.monotonic()
    a = run_agent(settings, c)
    first = a.wait_for(lambda r: r.ok and len(r.published) == 2, timeout=30)
    started_s = time.monotonic() - t0
    gens = {p.key: p.generation for p in first.published}
    dyn = next(p for p in first.published if p.key == "consumer/dyn")
    assert gens["consumer/file"] == 4, "generations continue past the poison"
    assert sorted(dyn.body["assignment"]) == [f"m-{i}" for i in range(5)], "every neighbour of the poison"
    assert a.agent.epoch == 6
    assert (skipped(a, "plans"), skipped(a, "registrations"), skipped(a, "lease")) == (2, 1, 1)

    # While running: poison again on each topic, next to a new member.
    produce(b, REGS, [(b"consumer/dyn/poison2", POISON), registration("dyn", "m-5", "az-c", ["orders"])])
    produce(b, PLANS, [(b"consumer/dyn", POISON)])
    produce(b, LEASE, [(b"leader", POISON)])
    r = a.wait_for(lambda r: any(p.key == "consumer/dyn" for p in r.published), timeout=20)
    assert len(r.published[0].body["assignment"]) == 6
    wait_until(
        lambda: skipped(a, "plans") == 3 and skipped(a, "lease") == 2, 10, "the running agent to skip poison"
    )
    assert skipped(a, "registrations") == 2
    assert a.agent.term.discrepancies() == {}, "poison is not something followers act on"
    assert a.stop() == 0
    e2e_report(
        agent_start_s=round(started_s, 2),
        valid_registrations_applied=6,
        poison_skipped_plans=int(skipped(a, "plans")),
        poison_skipped_registrations=int(skipped(a, "registrations")),
        poison_skipped_lease=int(skipped(a, "lease")),
    )


def test_a_plan_follower_survives_poison_in_its_constructor_and_poll(
    make_cluster: Callable[..., EmbeddedCluster], e2e_report: Any
) -> None:
    """Found: PlanFollower raised RecursionError from its constructor and from poll()."""
    c = make_cluster()
    c.create_topic("orders", 4, 2)
    for topic in (PLANS, REGS, LEASE):
        c.create_topic(topic, 1, 3)
    b = c.bootstrap_servers
    produce(b, PLANS, [(b"consumer/g", POISON)])
    produce(b, LEASE, [(b"leader", POISON)])
    f = PlanFollower(
        {"bootstrap.servers": b, "group.id": "g", "client.rack": "az-a", "auto.offset.reset": "earliest"},
        ["orders"],
        "m1",
        {"io_timeout_s": 5, "registration_ttl_s": 30},
    )
    try:
        hb = Heartbeat("agent", 1, int(time.time() * 1000), 1.0).encode()
        produce(
            b,
            PLANS,
            [
                (b"consumer/g", POISON),
                (b"consumer/g", plan_value("g", 1, {"m1": [["orders", 0], ["orders", 2]]})),
            ],
        )
        produce(b, LEASE, [(b"leader", POISON), (b"leader", hb)])
        deadline = time.monotonic() + 20
        while f.assignment() != [("orders", 0), ("orders", 2)] and time.monotonic() < deadline:
            f.poll(0.1)
        assert f.assignment() == [("orders", 0), ("orders", 2)] and f.generation == 1
        assert f.stats["records_skipped_too_deep"] == 4
        e2e_report(
            follower_poison_skipped=f.stats["records_skipped_too_deep"], follower_generation=f.generation
        )
    finally:
        f.close()


def test_a_publish_that_times_out_is_uncertain_and_lands_later(
    make_cluster: Callable[..., EmbeddedCluster],
) -> None:
    """The premise of 'one generation, one content': a timed-out record stays queued and is delivered
    once the leader is back.  The publisher says so (DeliveryUncertain), and the agent then never plans
    that generation with another content (tests/agent/test_hostile_records.py)."""
    from rackplan.agent.kafka.exceptions import DeliveryUncertain

    c = make_cluster()
    c.create_topic(PLANS, 1, 3)
    b = c.bootstrap_servers
    leader = AdminClient({"bootstrap.servers": b}).list_topics(timeout=10).topics[PLANS].partitions[0].leader
    pub = Publisher({"bootstrap.servers": b}, 1_000_000)
    pub.publish(PLANS, "consumer/g", plan_value("g", 1, {}), 10)
    c.set_down(leader)
    t0 = time.monotonic()
    with pytest.raises(DeliveryUncertain):
        pub.publish(PLANS, "consumer/g", plan_value("g", 2, {}), 1.0)
    timed_out_s = time.monotonic() - t0
    c.set_up(leader)
    assert pub.flush(20) == 0
    consumer = Consumer({"bootstrap.servers": b, "group.id": "check", "enable.partition.eof": True})
    consumer.assign([TopicPartition(PLANS, 0, 0)])
    values = []
    while True:
        m = consumer.poll(5)
        assert m is not None
        if m.error() is not None:
            break
        values.append(json.loads(m.value() or b"null")["generation"])
    consumer.close()
    print(f"publish timed out after {timed_out_s:.2f} s; generations on the topic afterwards: {values}")
    assert values == [1, 2], "the timed-out record was delivered after all"
    assert issubclass(DeliveryUncertain, PublishError)


def test_the_agent_starts_and_works_with_a_compacted_poison_record_on_real_kafka(
    real: Target, run_agent: RunAgent, e2e_report: Any
) -> None:
    """Real Kafka keeps the poison (compaction keeps a key's last record): the agent must start, restart
    and keep planning with it there."""
    orders = real.create_topic("orders", 6, 2)
    topics = real.control_topics
    settings = real.agent_settings([range_group(real.name("file"), [orders])])
    # The agent's topics as it creates them (compacted), made first so the poison is there before it starts.
    admin = AdminClient({"bootstrap.servers": real.bootstrap})
    specs = [s for s in topic_specs(settings) if s.name != topics["alerts_topic"]]
    futures = admin.create_topics([NewTopic(s.name, s.partitions, 3, config=dict(s.config)) for s in specs])
    for f in futures.values():
        f.result(timeout=30)
    produce(real.bootstrap, topics["plan_topic"], [(f"consumer/{real.name('file')}".encode(), POISON)])
    produce(real.bootstrap, topics["registrations_topic"], [(b"consumer/dyn/poison", POISON)])
    produce(real.bootstrap, topics["lease_topic"], [(b"leader", POISON)])
    starts = []
    for attempt in range(2):  # a restart replays the same poison
        t0 = time.monotonic()
        a = run_agent(settings, real.cluster)
        r = a.wait_for(lambda r: r.ok, timeout=60)
        starts.append(round(time.monotonic() - t0, 2))
        if attempt == 0:
            assert [p.key for p in r.published] == [f"consumer/{real.name('file')}"]
        assert (skipped(a, "plans"), skipped(a, "registrations"), skipped(a, "lease")) == (1, 1, 1)
        a.wait_for(lambda r: r.ok, timeout=30)  # and it keeps cycling
        assert a.stop() == 0
    e2e_report(target=real.kind, starts_s=starts, poison_records=3)


def test_a_heartbeat_forged_a_day_ahead_does_not_delay_fallback_on_real_kafka(
    real: Target, run_agent: RunAgent, e2e_report: Any
) -> None:
    """Found: one heartbeat dated a day ahead kept followers from falling back 45 s after the agent died
    (control: 13 s).  The lease topic takes the broker's append time and followers bound the skew."""
    agent_timeout_s, grace_s = 3.0, 0.5
    orders = real.create_topic("orders", 6, 2)
    agent = run_agent(real.agent_settings([], FOLLOWER_AGENT_SETTINGS), real.cluster)
    agent.wait_for(lambda r: r.ok, timeout=60)
    group = real.name("hb")
    fs = real.follower_settings({"agent_timeout_s": agent_timeout_s, "fallback_grace_s": grace_s})
    ledger = Ledger()
    apps = [FollowerApp(real.bootstrap, group, f"hb-{r}", f"az-{r}", [orders], ledger, fs) for r in "ab"]
    try:
        wait_until(lambda: settled(agent, f"consumer/{group}", apps), 60, "the followers to apply a plan")
        agent_id, epoch = agent.agent.agent_id, agent.agent.epoch
        agent.agent.stop.set()
        agent.thread.join(30)  # the agent is gone (its last heartbeat says so); then the forgery
        day_ahead_ms = int((time.time() + 86_400) * 1000)
        forged = Heartbeat(agent_id, epoch, day_ahead_ms, 1.0).encode()
        p = Producer({"bootstrap.servers": real.bootstrap})
        p.produce(real.control_topics["lease_topic"], key=b"leader", value=forged, timestamp=day_ahead_ms)
        assert p.flush(10) == 0
        t0 = time.monotonic()
        wait_until(
            lambda: all(a.follower.mode == "subscription" for a in apps), 60, "both followers to fall back"
        )
        fallback_s = time.monotonic() - t0
    finally:
        for a in apps:
            a.stop()
    print(
        f"fallback {fallback_s:.1f} s after a heartbeat forged a day ahead (agent_timeout_s {agent_timeout_s})"
    )
    e2e_report(target=real.kind, fallback_after_forged_heartbeat_s=round(fallback_s, 2))
    assert fallback_s <= agent_timeout_s + grace_s + 5.0


def test_every_generation_ever_written_has_one_content_when_publishes_time_out(
    make_cluster: Callable[..., EmbeddedCluster], run_agent: RunAgent, e2e_report: Any
) -> None:
    """Found: a publish that timed out landed later while the retry planned again under the same generation
    (generation 2 written 5 times with two contents).  The plan topic's leader answers 2.5 s late, the agent
    waits 1 s; registrations change meanwhile."""
    c = make_cluster()
    c.create_topic("orders", 6, 2)
    c.create_topic(PLANS, 1, 3)
    c.create_topic(LEASE, 1, 3)
    c.create_topic(REGS, 6, 3)
    b = c.bootstrap_servers
    md = AdminClient({"bootstrap.servers": b}).list_topics(timeout=10)
    slow = md.topics[PLANS].partitions[0].leader
    part = next(p for p, pm in sorted(md.topics[REGS].partitions.items()) if pm.leader != slow)

    def register(member: str, rack: str) -> None:
        key, value = registration("dyn", member, rack, ["orders"])
        p = Producer({"bootstrap.servers": b, "linger.ms": 0})
        p.produce(REGS, key=key, value=value, partition=part)
        assert p.flush(10) == 0

    register("m-a", "az-a")
    a = run_agent(agent_settings(b, [], io_timeout_s=1.0), c)
    a.wait_for(lambda r: any(p.key == "consumer/dyn" for p in r.published), timeout=20)
    m = a.agent.metrics
    c.set_rtt(slow, 2500)
    try:
        register("m-b", "az-b")
        wait_until(
            lambda: m.get("rackplan_publish_failures_total", {"record": "plan"}) >= 1,
            30,
            "a timed-out publish",
        )
        register("m-c", "az-c")  # another content while generation 2 may still land
        time.sleep(3.0)  # a few cycles with the slow leader
    finally:
        c.set_rtt(slow, 0)

    def members() -> list[str]:
        rec = a.agent.term.book.latest("consumer/dyn")
        return [] if rec is None else sorted(rec.body["assignment"])

    wait_until(lambda: members() == ["m-a", "m-b", "m-c"], 30, "the plan with all three members confirmed")
    a.stop()
    consumer = Consumer({"bootstrap.servers": b, "group.id": "check", "enable.partition.eof": True})
    consumer.assign([TopicPartition(PLANS, 0, 0)])
    by_generation: dict[int, set[bytes]] = {}
    records = 0
    while True:
        msg = consumer.poll(5)
        assert msg is not None
        if msg.error() is not None:
            break
        value = msg.value()
        if msg.key() == b"consumer/dyn" and value is not None:
            records += 1
            by_generation.setdefault(json.loads(value)["generation"], set()).add(value)
    consumer.close()
    counts = {g: len(v) for g, v in sorted(by_generation.items())}
    failures = int(m.get("rackplan_publish_failures_total", {"record": "plan"}))
    print(f"{records} plan records, contents per generation {counts}; {failures} publishes timed out")
    assert all(n == 1 for n in counts.values()), f"a generation written with two contents: {counts}"
    reserved = int(m.get("rackplan_generations_reserved_total", {"reason": "uncertain_delivery"}))
    e2e_report(plan_records=records, generations=len(counts), timed_out=failures, reserved=reserved)
    assert reserved >= 1
