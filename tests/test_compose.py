"""docker-compose.yml's structure: no Docker engine runs here, so the file is checked, not started."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return doc


def kafka_nodes(compose: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {
        name: svc["environment"]
        for name, svc in compose["services"].items()
        if "apache/kafka" in str(svc.get("image", ""))
    }


def test_three_racks_with_at_least_two_brokers_each(compose: dict[str, Any]) -> None:
    nodes = kafka_nodes(compose)
    racks = Counter(
        env["KAFKA_BROKER_RACK"] for env in nodes.values() if "broker" in env["KAFKA_PROCESS_ROLES"]
    )
    assert len(racks) >= 3
    assert min(racks.values()) >= 2


def test_node_ids_unique_and_rack_aware_selector_everywhere(compose: dict[str, Any]) -> None:
    nodes = kafka_nodes(compose)
    ids = [env["KAFKA_NODE_ID"] for env in nodes.values()]
    assert len(ids) == len(set(ids))
    for env in nodes.values():
        assert env["KAFKA_REPLICA_SELECTOR_CLASS"].endswith("RackAwareReplicaSelector")
        assert env["CLUSTER_ID"] == next(iter(nodes.values()))["CLUSTER_ID"], "one fixed cluster id"


def test_quorum_voters_are_the_controllers(compose: dict[str, Any]) -> None:
    nodes = kafka_nodes(compose)
    controllers = {
        env["KAFKA_NODE_ID"]: name
        for name, env in nodes.items()
        if "controller" in env["KAFKA_PROCESS_ROLES"]
    }
    assert len(controllers) % 2 == 1, "an odd quorum"
    for env in nodes.values():
        voters = dict(v.split("@") for v in env["KAFKA_CONTROLLER_QUORUM_VOTERS"].split(","))
        assert set(voters) == set(controllers)
        for node_id, address in voters.items():
            host, port = address.split(":")
            assert host == controllers[node_id]
            assert f"CONTROLLER://:{port}" in nodes[host]["KAFKA_LISTENERS"]
    controller_racks = {nodes[n]["KAFKA_BROKER_RACK"] for n in controllers.values()}
    assert len(controller_racks) == len(controllers), "one voter per rack survives a zone loss"


def test_listeners_reachable_from_host(compose: dict[str, Any]) -> None:
    for name, env in kafka_nodes(compose).items():
        external = re.search(r"EXTERNAL://localhost:(\d+)", env["KAFKA_ADVERTISED_LISTENERS"])
        assert external, name
        port = external.group(1)
        assert f"{port}:{port}" in compose["services"][name]["ports"]
        assert f"EXTERNAL://:{port}" in env["KAFKA_LISTENERS"]
        assert f"INTERNAL://{name}:" in env["KAFKA_ADVERTISED_LISTENERS"]
        assert compose["services"][name]["healthcheck"]["test"]


def test_agent_wired_to_every_broker(compose: dict[str, Any]) -> None:
    agent = compose["services"]["rackplan-agent"]
    assert agent["build"] == "."
    assert (ROOT / "Dockerfile").exists()
    bootstrap = agent["environment"]["RACKPLAN_KAFKA__BOOTSTRAP_SERVERS"].split(",")
    brokers = [n for n, env in kafka_nodes(compose).items() if "broker" in env["KAFKA_PROCESS_ROLES"]]
    assert sorted(b.split(":")[0] for b in bootstrap) == sorted(brokers)
    assert set(agent["depends_on"]) == set(brokers)
    assert all(dep["condition"] == "service_healthy" for dep in agent["depends_on"].values())


def test_two_agents_share_one_lease(compose: dict[str, Any]) -> None:
    agents = {n: s for n, s in compose["services"].items() if n.startswith("rackplan-agent")}
    assert len(agents) == 2
    ids = {s["environment"]["RACKPLAN_HA__AGENT_ID"] for s in agents.values()}
    assert len(ids) == 2, "distinct agent ids"
    assert all(s["environment"]["RACKPLAN_HA__ENABLED"] == "true" for s in agents.values())
    host_ports = [p.split(":")[0] for s in agents.values() for p in s["ports"]]
    assert len(host_ports) == len(set(host_ports))
