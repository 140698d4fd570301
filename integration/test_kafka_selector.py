"""The rack-aware replica selector on the real cluster (issue 26 §5): what nearest-replica figures rest on.

The cluster's brokers set ``replica.selector.class=...RackAwareReplicaSelector`` (from
docker-compose.yml, as production brokers must). A partition led by broker 1 (az-a) with a follower
on broker 2 (az-b), written to continuously; a consumer with ``client.rack=az-b`` must end up
fetching from broker 2, not the leader: librdkafka's statistics (``statistics.interval.ms``) say, per
partition, the broker it fetches from (``broker``) and the leader (``leader``). And the agent's check
(DescribeConfigs on every broker) must call the cluster ``rack-aware``. Waits on conditions only.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import structlog
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from rackplan.agent.settings.traffic import TrafficSettings
from rackplan.agent.traffic.selector import RACK_AWARE, SelectorCheck

from .conftest import Target
from .test_kafka_operations import create


def test_the_brokers_run_the_rack_aware_selector_as_the_agent_checks_it(real: Target) -> None:
    admin = AdminClient({"bootstrap.servers": real.bootstrap})
    brokers = sorted(admin.list_topics(timeout=10).brokers)
    check = SelectorCheck(admin, TrafficSettings(request_timeout_s=10), structlog.get_logger())
    r = check.check(brokers)
    assert r is not None and r.state == "rack-aware", r
    assert sorted(r.values) == brokers and set(r.values.values()) == {RACK_AWARE}


def test_a_consumer_with_client_rack_fetches_from_the_follower_in_its_rack(
    real: Target, e2e_report: Any
) -> None:
    topic = create(real, "sel", [[1, 2]])  # leader broker 1 (az-a), follower broker 2 (az-b)
    stop = threading.Event()
    producer = Producer({"bootstrap.servers": real.bootstrap, "linger.ms": 5, "acks": "all"})

    def produce() -> None:
        while not stop.is_set():
            producer.produce(topic, value=b"x" * 100, partition=0)
            producer.poll(0)
            stop.wait(0.02)
        producer.flush(10)

    seen: list[tuple[int, int]] = []  # (broker fetched from, leader) per statistics event

    def on_stats(doc: str) -> None:
        part = json.loads(doc).get("topics", {}).get(topic, {}).get("partitions", {}).get("0")
        if part is not None:
            seen.append((int(part["broker"]), int(part["leader"])))

    writer = threading.Thread(target=produce, daemon=True)
    writer.start()
    consumer = Consumer(
        {
            "bootstrap.servers": real.bootstrap,
            "group.id": real.name("sel"),
            "client.rack": "az-b",
            "enable.auto.commit": False,
            "statistics.interval.ms": 500,
            "stats_cb": on_stats,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    started = time.monotonic()
    consumed = after = 0
    moved_after: float | None = None
    try:
        deadline = started + 60
        while moved_after is None or after < 20:  # moved to the follower, then 20 more records read there
            assert time.monotonic() < deadline, f"not read from the az-b follower: statistics {seen[-3:]}"
            msg = consumer.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            consumed += 1
            if moved_after is None and seen and seen[-1] == (2, 1):
                moved_after = time.monotonic() - started
            elif moved_after is not None:
                after += 1
    finally:
        consumer.close()
        stop.set()
        writer.join(20)
    e2e_report(fetched_from_follower_after_s=round(moved_after, 1), consumed=consumed)
    assert seen[-1] == (2, 1), seen[-5:]  # still the follower, the leader unchanged
