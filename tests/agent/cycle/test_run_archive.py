"""The agent's archive and ``rackplan snapshot`` on the embedded cluster: every group the agent plans,
self-registered ones included, under Kafka's cluster id with ``cluster_name`` as the label (issue 28)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.embedded import embedded_cluster


@pytest.fixture
def cluster() -> Iterator[Any]:
    from confluent_kafka import Producer

    from rackplan.agent.protocol.registrations import consumer_registration

    with embedded_cluster(agent_topics=True) as c:
        c.create_topic("orders", 6, 2)
        p = Producer({"bootstrap.servers": c.bootstrap_servers})
        key, value = consumer_registration(
            "orders-app", "o-1", rack="az-b", topics=["orders"], timestamp_ms=int(time.time() * 1000)
        )
        p.produce("_rackplan.registrations", key=key.encode(), value=value)
        assert p.flush(10) == 0
        yield c


def settings_doc(c: Any, **extra: Any) -> dict[str, Any]:
    member = {"member_id": "p-1", "rack": "az-a", "topics": ["orders"]}
    return {
        "kafka": {"bootstrap_servers": c.bootstrap_servers, "startup_timeout_s": 10},
        "consumer_groups": [{"group_id": "pay", "members": [member]}],
        "cluster_name": "prod-eu",
        "metadata": {"request_timeout_s": 2},
        "io_timeout_s": 10,
        **extra,
    }


def kafka_cluster_id(c: Any) -> str:
    from confluent_kafka.admin import AdminClient

    cid = AdminClient({"bootstrap.servers": c.bootstrap_servers}).list_topics(timeout=10).cluster_id
    assert cid
    return str(cid)


def test_the_agents_archive_holds_self_registered_groups_under_kafkas_cluster_id(
    cluster: Any, tmp_path: Path
) -> None:
    from rackplan.agent.cluster.archive import file_stem
    from rackplan.agent.runtime.loop import Agent
    from rackplan.agent.settings.sections import Settings

    agent = Agent(Settings.model_validate(settings_doc(cluster, archive_dir=str(tmp_path))))
    try:
        agent._first_contact()
        agent.start()
        agent.run_once()
    finally:
        agent.close()
    cid = kafka_cluster_id(cluster)
    (path,) = tmp_path.iterdir()
    assert path.name == f"{file_stem(cid)}.jsonl"
    (line,) = path.read_text().splitlines()
    doc = json.loads(line)
    assert doc["cluster_id"] == cid and doc["cluster_name"] == "prod-eu"
    assert [g["group_id"] for g in doc["consumer_groups"]] == ["orders-app", "pay"]
    (registered,) = [g for g in doc["consumer_groups"] if g["group_id"] == "orders-app"]
    assert registered["members"][0]["member_id"] == "o-1" and registered["members"][0]["rack"] == "az-b"


def test_rackplan_snapshot_holds_them_too(cluster: Any) -> None:
    from rackplan.agent.settings.sections import Settings
    from rackplan.fleet.commands import capture

    snap = capture(Settings.model_validate(settings_doc(cluster)))
    assert snap.cluster_id == kafka_cluster_id(cluster) and snap.cluster_name == "prod-eu"
    assert [g["group_id"] for g in snap.consumer_groups] == ["orders-app", "pay"]


def test_the_first_window_of_measured_traffic_is_archived_for_the_fleet(cluster: Any, tmp_path: Path) -> None:
    """The first snapshot has no traffic (nothing is measured yet); the cycle whose window first gives rates
    archives one more line holding them, per partition, and later quiet cycles add none."""
    from confluent_kafka import Producer

    from rackplan.agent.runtime.loop import Agent
    from rackplan.agent.settings.sections import Settings

    traffic = {"window_s": 60, "min_samples": 2, "record_bytes": 100}
    agent = Agent(Settings.model_validate(settings_doc(cluster, archive_dir=str(tmp_path), traffic=traffic)))
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    try:
        agent._first_contact()
        agent.start()
        agent.run_once()
        for i in range(30):
            p.produce("orders", value=b"x", partition=i % 3)  # partitions 0-2 get 10 records, 3-5 none
        assert p.flush(10) == 0
        time.sleep(0.2)
        for _ in range(3):
            agent.run_once()
    finally:
        agent.close()
    (path,) = tmp_path.iterdir()
    first, second = (json.loads(line) for line in path.read_text().splitlines())
    assert not first.get("traffic")
    rates = second["traffic"]["orders"]
    assert len(rates) == 6 and all(r > 0 for r in rates[:3]) and rates[3:] == [0.0, 0.0, 0.0]
    assert second["topics"] == first["topics"]
