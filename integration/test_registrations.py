"""Registrations on the topic, end to end on the embedded cluster: register, re-plan, skip the malformed,
expire the stale, tombstone the gone, survive a restart; and DescribeGroups degrading on the mock."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, Producer

from rackplan.agent.core.logging import configure
from rackplan.agent.kafka.embedded import EmbeddedCluster
from rackplan.agent.protocol.registrations import registration_key

from .conftest import RunningAgent, agent_settings, range_group

RunAgent = Callable[..., RunningAgent]
TOPIC = "_rackplan.registrations"


def send(c: EmbeddedCluster, records: list[tuple[bytes | str, bytes | None]]) -> None:
    p = Producer({"bootstrap.servers": c.bootstrap_servers})
    for key, value in records:
        p.produce(TOPIC, key=key, value=value)
    assert p.flush(10) == 0


def member(mid: str, rack: str, group: str = "dyn", **kw: Any) -> tuple[str, bytes]:
    value = {"schema": 1, "group_id": group, "member_id": mid, "rack": rack, "topics": ["orders"], **kw}
    return registration_key("consumer", group, mid), json.dumps(value).encode()


def test_registrations_topic_end_to_end(
    make_cluster: Callable[..., EmbeddedCluster], run_agent: RunAgent
) -> None:
    c = make_cluster()
    c.create_topic("orders", 12, 2)
    c.create_topic(TOPIC, 1, 3)  # the mock has no CreateTopics; so clients can register before the agent runs
    stale_ms = int((time.time() - 3600) * 1000)
    send(
        c,
        [
            member("m-a", "az-a", assignor="range"),
            member("m-b", "az-b"),
            (b"consumer/dyn/m-x", b"{not json"),
            member("m-y", "az-a", group="other"),  # key says other/m-y ...
            member("m-old", "az-c", group="old", timestamp_ms=stale_ms),  # expired an hour ago
        ],
    )
    # ... and this one's key does not match its value
    send(c, [(b"consumer/dyn/m-z", member("m-q", "az-a")[1])])
    settings = agent_settings(
        c.bootstrap_servers, [range_group("file", ["orders"])], registrations={"ttl_s": 60}
    )
    a = run_agent(settings, c)
    first = a.wait_for(lambda r: r.ok)
    assert sorted((p.key, p.generation) for p in first.published) == [
        ("consumer/dyn", 1),
        ("consumer/file", 1),
        ("consumer/other", 1),
    ]
    sources = {r.key: r.source for r in a.agent.term.regs}
    assert sources == {"consumer/dyn": "topic", "consumer/file": "file", "consumer/other": "topic"}
    m = a.agent.metrics
    assert m.get("rackplan_registration_records_skipped_total", {"reason": "not_json"}) == 1
    assert m.get("rackplan_registration_records_skipped_total", {"reason": "key_mismatch"}) == 1
    assert m.get("rackplan_registrations_expired_total") == 1  # 'old' never registered

    send(c, [member("m-c", "az-c")])
    r = a.wait_for(lambda r: bool(r.published), timeout=10)
    assert [(p.key, p.generation, p.reason) for p in r.published] == [
        ("consumer/dyn", 2, "registration changed")
    ]
    assert sorted(r.published[0].document["consumer_group"]["assignment"]) == ["m-a", "m-b", "m-c"]
    assert a.stop() == 0

    # A restart replays the registrations before tombstoning anything: nothing is republished.
    a2 = run_agent(settings, c)
    again = a2.wait_for(lambda r: r.ok)
    assert again.published == [] and again.tombstoned == []
    send(c, [(member(mid, "az-a")[0], None) for mid in ("m-a", "m-b", "m-c")])
    r = a2.wait_for(lambda r: bool(r.tombstoned), timeout=10)
    assert r.tombstoned == ["consumer/dyn"] and r.unregistered == ["consumer/dyn"]
    assert a2.stop() == 0


def test_describe_groups_degrades_on_the_mock(
    make_cluster: Callable[..., EmbeddedCluster], run_agent: RunAgent
) -> None:
    """The mock has no DescribeGroups: a group whose members do not register waits, with the reason logged once."""
    c = make_cluster()
    c.create_topic("orders", 6, 2)
    consumer = Consumer(
        {"bootstrap.servers": c.bootstrap_servers, "group.id": "legacy", "client.id": "legacy-az-a-1"}
    )
    consumer.subscribe(["orders"])
    deadline = time.monotonic() + 10
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.1)
    assert consumer.assignment(), "the mock should run the group"
    buf = io.StringIO()
    groups = [{"group_id": "legacy", "members": [], "topics": ["orders"]}, range_group("known", ["orders"])]
    settings = agent_settings(
        c.bootstrap_servers, groups, rack_mapping=[{"client_id": "legacy-az-a-*", "rack": "az-a"}]
    )
    configure("json", "warning", stream=buf)
    a = run_agent(settings, c)
    r = a.wait_for(lambda r: r.ok)
    assert [p.key for p in r.published] == ["consumer/known"]
    assert "no members registered or discovered" in r.skipped["consumer/legacy"]
    a.wait_for(lambda r: True)
    a.wait_for(lambda r: True)
    assert a.stop() == 0
    consumer.close()
    events = [json.loads(line) for line in buf.getvalue().splitlines()]
    unsupported = [e for e in events if "not supported by the brokers" in e["event"]]
    assert len(unsupported) == 1 and unsupported[0]["level"] == "warning"
    assert a.agent.metrics.get("rackplan_describe_groups_failures_total", {"reason": "unsupported"}) == 1
    assert not a.agent.intake.describer.enabled
