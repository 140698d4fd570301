"""The embedded cluster looks like a real multi-rack cluster to an AdminClient."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient

from rackplan.agent.kafka.embedded import EmbeddedCluster, EmbeddedClusterError, rack_names


def test_brokers_report_their_racks(embedded_cluster: EmbeddedCluster) -> None:
    admin = AdminClient({"bootstrap.servers": embedded_cluster.bootstrap_servers})
    desc = admin.describe_cluster(request_timeout=5).result(timeout=10)
    assert {n.id: n.rack for n in desc.nodes} == {
        1: "az-a",
        2: "az-a",
        3: "az-b",
        4: "az-b",
        5: "az-c",
        6: "az-c",
    }
    assert all(n.host == "127.0.0.1" for n in desc.nodes)
    assert desc.controller is not None


def test_topics_have_replicas(embedded_cluster: EmbeddedCluster) -> None:
    admin = AdminClient({"bootstrap.servers": embedded_cluster.bootstrap_servers})
    desc = admin.describe_topics(TopicCollection(["orders"]), request_timeout=5)["orders"].result(timeout=10)
    assert len(desc.partitions) == 12
    assert all(len(p.replicas) == 2 and p.leader is not None for p in desc.partitions)


def test_decommission_reassigns_replicas(make_cluster: Callable[..., EmbeddedCluster]) -> None:
    cluster = make_cluster()
    cluster.create_topic("t", 6, 1)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})

    def replicas() -> list[list[int]]:
        d = admin.describe_topics(TopicCollection(["t"]), request_timeout=5)["t"].result(timeout=10)
        return [[r.id for r in p.replicas] for p in sorted(d.partitions, key=lambda p: p.id)]

    before = replicas()
    assert [3] in before
    cluster.decommission(3)
    deadline = time.monotonic() + 5
    while [3] in (after := replicas()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(3 not in r for r in after) and after != before
    assert 3 not in cluster.broker_racks
    nodes = admin.describe_cluster(request_timeout=5).result(timeout=10).nodes
    assert sorted(n.id for n in nodes) == [1, 2, 4, 5, 6]


def test_errors_are_clear(make_cluster: Callable[..., EmbeddedCluster]) -> None:
    cluster = make_cluster(brokers_per_rack=1, racks=2)
    with pytest.raises(EmbeddedClusterError, match="replication factor 3"):
        cluster.create_topic("t", 1, 3)
    with pytest.raises(EmbeddedClusterError, match="no live broker 9"):
        cluster.decommission(9)
    cluster.close()
    cluster.close()  # idempotent
    with pytest.raises(EmbeddedClusterError, match="closed"):
        cluster.create_topic("t", 1, 1)


def test_rack_names() -> None:
    assert rack_names(3) == ("az-a", "az-b", "az-c")
    with pytest.raises(ValueError):
        rack_names(0)


def test_librdkafka_logs_go_through_structlog(make_cluster: Callable[..., EmbeddedCluster]) -> None:
    """The mock's own handle (ctypes log callback) and every agent client log as structured events."""
    import io
    import json

    from rackplan.agent.core.logging import configure
    from rackplan.agent.kafka.publisher import Publisher

    buf = io.StringIO()
    configure("json", "debug", stream=buf)
    cluster = make_cluster(brokers_per_rack=1, racks=2)  # at debug, the mock's handle logs its own lines
    cluster.create_topic("t", 1, 1)
    publisher = Publisher({"bootstrap.servers": cluster.bootstrap_servers}, 1_000_000)
    publisher.publish("t", "k", b"v", 10)
    cluster.set_down(-1)
    deadline = time.monotonic() + 5
    while "FAIL" not in buf.getvalue() and time.monotonic() < deadline:
        publisher.poll()
        time.sleep(0.05)
    cluster.set_up(-1)
    publisher.flush(1)
    events = [json.loads(line) for line in buf.getvalue().splitlines()]
    kafka = [e for e in events if e.get("logger") == "rackplan.librdkafka"]
    mock = [e for e in kafka if e.get("client") == "embedded-cluster"]
    assert any(e["facility"] == "MOCK" and "Created topic" in e["event"] for e in mock)
    fails = [e for e in kafka if e.get("facility") == "FAIL" and e["client"].startswith("rdkafka#producer")]
    assert fails and fails[0]["level"] in ("warning", "error", "info") and "thread" in fails[0]
    assert not any(e["event"].startswith("[thrd:") for e in kafka)  # the thread is a field, not noise
