"""A KIP-1071 Streams group on rackplan's broker Streams assignor weighs the agent's traffic feed (docs/java.md).

The source topic's six partitions have one replica each, four in az-a and two in az-b; two instances of
the Streams 4.4 app (az-a, az-b) split its twelve tasks six and six, at most three of the source's
(stateless) tasks each. So one az-a partition must be read from az-b: with the feed on
``_rackplan.traffic`` (the brokers' default ``rackplan.traffic.topic``, records in the agent's format)
it is the lightest one. Two topics, each with another light partition: an assignment by counts alone
(all four az-a partitions tie) cannot follow both. The repartition and changelog topics have a replica
in every rack: never read across racks.
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from integration.kafka.apps import JavaApp, streams_group_instance
from integration.kafka.cluster import CLIENTS_JAR

from .conftest import Target
from .test_kafka_java_followers import wait_until
from .test_kafka_operations import create
from .test_kafka_streams_broker_assignor import broker_lines, described, settled

pytestmark = pytest.mark.skipif(not CLIENTS_JAR.exists(), reason=f"{CLIENTS_JAR} missing: run `make clients`")

FEED = "_rackplan.traffic"
REPLICAS = [[1], [4], [1], [4], [2], [5]]  # racks az-a, az-a, az-a, az-a, az-b, az-b
RACKS = {"tw-a": "az-a", "tw-b": "az-b"}


def feed(bootstrap: str, topic: str, rates: list[float]) -> None:
    """The agent's traffic record for ``topic`` (tests/agent/traffic/test_publish.py's format, no MAC)."""
    value = {"schema": 1, "topic": topic, "bytes_per_s": rates, "window_s": 300.0}
    value["measured_at_ms"] = int(time.time() * 1000)
    p = Producer({"bootstrap.servers": bootstrap})
    p.produce(FEED, key=f"traffic/{topic}", value=json.dumps(value).encode())
    assert p.flush(30) == 0


def last_assignment_weighed(real: Target, group: str, members: int) -> bool:
    """The group's latest rack-aware assignment covers ``members`` members and is weighed by traffic."""
    lines = broker_lines(real, f"Streams group {group} assigned rack-aware")
    return bool(lines) and f"on {members} members" in lines[-1] and "weighed by traffic" in lines[-1]


def ensure_feed(bootstrap: str) -> None:
    """The feed topic as the agent creates it (one partition, compacted), unless it exists."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if FEED in admin.list_topics(timeout=10).topics:
        return
    new = NewTopic(FEED, num_partitions=1, replication_factor=3, config={"cleanup.policy": "compact"})
    try:
        admin.create_topics([new])[FEED].result(timeout=30)
    except KafkaException as e:
        if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise


def test_the_streams_broker_assignor_reads_the_light_partition_across_racks(
    real: Target, tmp_path: Path, e2e_report: Any
) -> None:
    kafka = real.kafka
    heavy, light = 50_000.0, 100.0
    crossing: dict[int, list[str]] = {}
    ensure_feed(real.bootstrap)
    for lightest in (1, 2):
        source = create(real, f"tw-in-{lightest}", REPLICAS)
        rates = [light if p == lightest else heavy for p in range(4)] + [1_000.0, 1_000.0]
        feed(real.bootstrap, source, rates)
        p = Producer({"bootstrap.servers": real.bootstrap})
        for i in range(120):
            p.produce(source, key=f"k{i}", value=f"v{i % 11}", partition=i % 6)
        assert p.flush(30) == 0
        app_id = real.name(f"tw-{lightest}")
        apps: list[JavaApp] = []
        try:
            for name, rack in RACKS.items():
                apps.append(
                    streams_group_instance(
                        real.bootstrap, app_id, name, rack, source, tmp_path / app_id, "rackplan"
                    )
                )
                apps[-1].wait_for(lambda line: line.get("state") == "RUNNING", 120, f"{app_id} {name} runs")
                if kafka is not None and len(apps) == 1:
                    wait_until(
                        functools.partial(described, real, app_id), 30, "the plugin described the group"
                    )
            now = settled(apps, quiet_s=8.0, timeout=120)
            if kafka is not None:  # the placement is the assignment rackplan's plugin weighed for both
                weighed = functools.partial(last_assignment_weighed, real, app_id, len(apps))
                wait_until(weighed, 15, "a broker logged the weighed assignment of both members")
        finally:
            for a in apps:
                a.stop()
        assert sorted(len(v["active"]) for v in now.values()) == [6, 6], now
        crossing[lightest] = [t for t in now["tw-b"]["active"] if t.startswith("0_") and int(t[2:]) < 4]
        print(f"light partition {lightest}: placement {now}")
        assert crossing[lightest] == [f"0_{lightest}"], now
    e2e_report(
        target="kafka",
        app="streams group (KIP-1071), 2 instances, traffic feed",
        read_across_racks={f"light {k}": v for k, v in crossing.items()},
    )
