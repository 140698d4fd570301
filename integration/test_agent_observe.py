"""Observe-only mode on the embedded cluster: plans and alerts as in act mode, no record on any agent topic."""

from __future__ import annotations

import time
from collections.abc import Callable

from confluent_kafka.admin import AdminClient

from rackplan.agent.kafka.embedded import EmbeddedCluster

from .conftest import RunningAgent, agent_settings, range_group

RunAgent = Callable[..., RunningAgent]


def records_on(c: EmbeddedCluster, topic: str) -> int:
    """How many records ``topic`` holds, read from its start (0 when it is empty)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": c.bootstrap_servers, "group.id": "t", "enable.partition.eof": True}
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    count = 0
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is None:
            continue
        if m.error():  # the end of the partition
            break
        count += 1
    consumer.close()
    return count


def test_an_observer_alerts_and_serves_its_plans_and_writes_no_record(
    make_cluster: Callable[..., EmbeddedCluster], run_agent: RunAgent
) -> None:
    from rackplan.agent.demo.run import WebhookReceiver

    c = make_cluster()
    c.create_topic("payments", 6, 1)  # rf 1: decommissioning moves whole partitions between racks
    receiver = WebhookReceiver()
    webhook = {"url": receiver.url, "timeout_s": 2, "backoff_initial_s": 0.05}
    settings = agent_settings(
        c.bootstrap_servers, [range_group("payments", ["payments"])], webhook=webhook, mode="observe"
    )
    agent = run_agent(settings, c)
    first = agent.wait_for(lambda r: r.ok)
    assert [(p.key, p.generation) for p in first.published] == [("consumer/payments", 1)]
    c.decommission(3)
    confirmed = agent.wait_for(lambda r: r.confirmed)
    assert [a.key for a in confirmed.alerts if a.status == "firing"] == ["consumer/payments"]
    for _ in range(3):
        agent.wait_for(lambda r: True)
    served = agent.agent.status().plans_json()["consumer/payments"]
    assert served["published"] is False and served["generation"] >= 2
    assert agent.agent.metrics.get("rackplan_observe_only") == 1
    assert agent.stop() == 0
    assert receiver.statuses()[:1] == [("firing", "consumer/payments")]  # the webhook still gets the alert
    receiver.close()
    existing = AdminClient({"bootstrap.servers": c.bootstrap_servers}).list_topics(timeout=10).topics
    for topic in ("_rackplan.plans", "_rackplan.alerts", "_rackplan.lease"):
        assert topic in existing, topic  # checked or created as in act mode: empty, not absent
        assert records_on(c, topic) == 0, topic  # no plan, tombstone, alert record or heartbeat
