"""docker-compose.yml is the real cluster's configuration: every broker the suite starts is derived from it
by the apache/kafka image's rules, so Kafka itself judges the compose settings on every run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from integration.kafka.cluster import POM, KafkaCluster, LauncherError, kafka_version
from integration.kafka.compose import (
    COMPOSE_FILE,
    ComposeError,
    check_cluster_id,
    env_to_property,
    read_compose,
)


def test_env_names_map_to_properties_as_the_image_does() -> None:
    assert env_to_property("KAFKA_BROKER_RACK") == "broker.rack"
    assert env_to_property("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP") == "listener.security.protocol.map"
    assert env_to_property("KAFKA_LOG_RETENTION__MS") == "log.retention_ms"
    assert env_to_property("KAFKA_SOME___DASHED") == "some-dashed"


def test_the_session_cluster_is_the_compose_files(kafka_cluster: KafkaCluster | None) -> None:
    if kafka_cluster is None:
        pytest.skip("KAFKA_BOOTSTRAP names an external cluster")
    compose = read_compose(COMPOSE_FILE.read_text())
    assert [n.node_id for n in kafka_cluster.brokers] == [n.node_id for n in compose.nodes if n.is_broker]
    for node in kafka_cluster.nodes.values():
        text = (node.dir / "server.properties").read_text()
        props = dict(line.split("=", 1) for line in text.splitlines() if line)
        for key, value in node.spec.properties.items():
            if key in ("listeners", "advertised.listeners", "controller.quorum.voters"):
                continue  # hosts and ports are the launcher's: one machine, free loopback ports
            if key in kafka_cluster.overrides:
                continue
            assert props[key] == value, key
        assert props["replica.selector.class"].endswith("RackAwareReplicaSelector")
    assert kafka_cluster.racks() == {n.node_id: n.rack for n in compose.nodes if n.is_broker}


def test_the_compose_image_is_the_pinned_kafka() -> None:
    pinned = re.search(r"<kafka.version>([^<]+)</kafka.version>", POM.read_text())
    assert pinned is not None
    compose = read_compose(COMPOSE_FILE.read_text())
    assert compose.image == f"apache/kafka:{pinned.group(1)}"
    assert kafka_version() == pinned.group(1), "make kafka resolves the pinned version"


def test_a_malformed_cluster_id_fails() -> None:
    check_cluster_id(read_compose(COMPOSE_FILE.read_text()).cluster_id)
    for bad in ("cmFja3BsYW4tY2x1c3RlcjE", "too-short", "cmFja3BsYW4tY2x1c3Rl!g"):
        with pytest.raises(ComposeError, match="22 characters"):
            check_cluster_id(bad)
    text = COMPOSE_FILE.read_text()
    cid = read_compose(text).cluster_id
    with pytest.raises(ComposeError, match="CLUSTER_ID"):
        read_compose(text.replace(cid, cid + "E"))


def test_a_setting_kafka_rejects_fails_before_any_broker_starts(tmp_path: Path) -> None:
    """Kafka's StorageTool parses each derived server.properties (KafkaConfig): a bad value stops the launch."""
    text = COMPOSE_FILE.read_text().replace(
        'KAFKA_MIN_INSYNC_REPLICAS: "2"', 'KAFKA_MIN_INSYNC_REPLICAS: "two"'
    )
    assert "two" in text
    cluster = KafkaCluster(compose=read_compose(text), workdir=tmp_path)
    with pytest.raises(LauncherError, match=r"min\.insync\.replicas"):
        cluster.start(timeout=60)
    assert not any(n.alive for n in cluster.nodes.values())
    cluster.close()
