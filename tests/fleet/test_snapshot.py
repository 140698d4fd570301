"""Fleet snapshot documents: format, validation, traffic estimates, and capture from a cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rackplan.agent.cluster.archive import (
    ClusterState,
    SnapshotError,
    append_archive,
    parse_snapshot,
    per_partition,
    rates_from_offsets,
    read_documents,
    snapshot_files,
    snapshot_json,
    write_snapshot,
)
from rackplan.fleet.synthetic import cluster_document
from tests.embedded import embedded_cluster


def doc(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "schema": 1,
        "cluster_id": "prod:eu/1",
        "taken_at": "2026-11-21T22:00:00Z",
        "brokers": [{"id": 1, "rack": "az-a"}, {"id": 2, "rack": "az-b"}, {"id": 3, "rack": None}],
        "topics": {"orders": [[1, 2], [2, 3], [3]]},
        "consumer_groups": [{"group_id": "g", "members": [], "fetch_mode": "leader"}],
        "streams_apps": [{"application_id": "a", "subtopologies": [], "clients": []}],
    }
    base.update(over)
    return base


def test_roundtrip_and_defaults() -> None:
    snap = parse_snapshot(doc(traffic={"orders": 300}))
    # Leaders default to the first replica; a topic total spreads evenly over its partitions.
    assert snap.state.leaders["orders"] == (1, 2, 3)
    assert snap.state.traffic["orders"] == (100.0, 100.0, 100.0)
    assert snap.consumer_groups[0]["fetch_mode"] == "leader"
    assert snap.streams_apps[0]["fetch_mode"] == "nearest-replica"
    again = parse_snapshot(json.loads(json.dumps(snapshot_json(snap))))
    assert again == snap
    assert snapshot_json(snap)["topics"] == {"orders": [[1, 2], [2, 3], [3]]}
    # The job's rows carry states as JSON and read them back unchecked: the same state.
    assert ClusterState.from_json(json.loads(json.dumps(snap.state.to_json()))) == snap.state


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"schema": 2}, "schema"),
        ({"cluster_id": ""}, "cluster_id"),
        ({"topics": {"orders": [[1, 9]]}}, "topics.orders[0][1]"),
        ({"brokers": [{"id": 1}, {"id": 1}]}, "brokers[1].id"),
        ({"leaders": {"orders": [1, 2]}}, "leaders.orders"),
        ({"leaders": {"orders": [1, 2, 7]}}, "leaders.orders[2]"),
        ({"traffic": {"orders": [1, -1, None]}}, "traffic.orders[1]"),
        ({"traffic": {"orders": [1.0]}}, "traffic.orders"),
        ({"consumer_groups": [{"members": []}]}, "consumer_groups[0].group_id"),
        ({"consumer_groups": [{"group_id": "g", "fetch_mode": "follower"}]}, "consumer_groups[0].fetch_mode"),
        (
            {"streams_apps": [{"application_id": "a"}, {"application_id": "a"}]},
            "streams_apps[1].application_id",
        ),
    ],
)
def test_bad_documents_name_the_field(over: dict[str, Any], field: str) -> None:
    with pytest.raises(SnapshotError) as e:
        parse_snapshot(doc(**over))
    assert e.value.field == field


def test_per_partition_unknowns() -> None:
    assert per_partition([1, None, 2.5], 3, "x") == (1.0, None, 2.5)
    assert per_partition(0, 0, "x") == ()
    with pytest.raises(SnapshotError):
        per_partition(True, 1, "x")


def test_rates_from_offsets() -> None:
    before = {("t", 0): 100, ("t", 1): 50, ("t", 2): 10}
    after = {("t", 0): 300, ("t", 1): 50, ("t", 2): 5}
    rates = rates_from_offsets(before, after, 2.0, 1000.0, {"t": 4})
    # 200 records in 2 s of 1 kB; no change; offsets went backwards (recreated) and missing: unknown.
    assert rates == {"t": [100_000.0, 0.0, None, None]}
    with pytest.raises(ValueError):
        rates_from_offsets(before, after, 0.0, 1.0, {"t": 1})


def test_write_archive_and_read(tmp_path: Path) -> None:
    snap = parse_snapshot(doc())
    path = write_snapshot(snap, tmp_path)
    assert path.name == "prod_eu_1.json"  # a file-safe name for the cluster id
    later = parse_snapshot(doc(taken_at="2026-11-22T00:00:00Z"))
    archive = tmp_path / "history"
    append_archive(snap, archive)
    append_archive(later, archive)
    lines = (archive / "prod_eu_1.jsonl").read_text().splitlines()
    assert [json.loads(x)["taken_at"] for x in lines] == ["2026-11-21T22:00:00Z", "2026-11-22T00:00:00Z"]
    assert [f.name for f in snapshot_files([tmp_path, archive])] == ["prod_eu_1.jsonl", "prod_eu_1.json"]
    assert len(read_documents([tmp_path, archive])) == 3
    with pytest.raises(FileNotFoundError):
        snapshot_files([tmp_path / "missing"])


def test_synthetic_documents_are_valid_and_deterministic() -> None:
    a, b = cluster_document(3, 20, seed=1, streams_apps=2), cluster_document(3, 20, seed=1, streams_apps=2)
    assert a == b and a != cluster_document(3, 20, seed=2)
    snap = parse_snapshot(a)
    assert len(snap.consumer_groups) == 20 and len(snap.streams_apps) == 2
    assert snap.state.racks() == ["az-a", "az-b", "az-c"]


def test_capture_from_an_embedded_cluster(tmp_path: Path) -> None:
    """``rackplan snapshot`` reads the cluster with the agent's metadata reader."""
    from rackplan.agent.cluster.archive import end_offsets
    from rackplan.agent.settings.sections import Settings
    from rackplan.fleet.commands import capture

    # The agent's own topics (every one, the HA lease included) are not part of a snapshot.
    with embedded_cluster(agent_topics=True) as cluster:
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient

        cluster.create_topic("orders", 6, 2)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
        for i in range(12):
            producer.produce("orders", value=b"x" * 10, partition=i % 6)
        assert producer.flush(10) == 0
        traffic = tmp_path / "traffic.yaml"
        traffic.write_text("orders: 600\n")
        settings = Settings.model_validate({
            "kafka": {"bootstrap_servers": cluster.bootstrap_servers},
            "consumer_groups": [
                {"group_id": "pay", "fetch_mode": "leader", "members": [{"member_id": "m", "rack": "az-a", "topics": ["orders"]}]}
            ],
        })  # fmt: skip
        snap = capture(settings, cluster_id="mock", traffic_path=str(traffic))
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        offsets = end_offsets(admin, {"orders": 6}, 10.0)
    assert snap.cluster_id == "mock"
    assert sorted(snap.state.topics) == ["orders"]
    assert dict(snap.state.brokers) == {1: "az-a", 2: "az-b", 3: "az-c"}
    assert all(len(r) == 2 and len(set(r)) == 2 for r in snap.state.topics["orders"])
    assert all(snap.state.leaders["orders"][p] in r for p, r in enumerate(snap.state.topics["orders"]))
    assert snap.state.traffic["orders"] == (100.0,) * 6
    assert snap.consumer_groups[0]["group_id"] == "pay" and snap.consumer_groups[0]["fetch_mode"] == "leader"
    assert offsets == {("orders", p): 2 for p in range(6)}
    assert parse_snapshot(snapshot_json(snap)) == snap


def test_capture_with_plans_owns_the_last_published_assignment() -> None:
    """``--with-plans``: members own what the agent's last plan on the plan topic gave them."""
    from rackplan.agent.protocol.plans import Locality, PlanRecord, encode_value
    from rackplan.agent.settings.sections import Settings
    from rackplan.fleet.commands import capture

    with embedded_cluster(racks=2) as cluster:
        from confluent_kafka import Producer

        cluster.create_topic("orders", 4, 1)
        cluster.create_topic("_rackplan.plans", 1, 1)
        assignment = {"m-1": [["orders", 0], ["orders", 1]], "m-2": [["orders", 2], ["orders", 3]]}
        record = PlanRecord(
            key="consumer/pay",
            generation=7,
            cluster_fingerprint="c" * 64,
            registration_fingerprint="0" * 64,
            reason="test",
            created_at="2026-11-21T22:00:00Z",
            document={
                "consumer_group": {"group_id": "pay", "assignment": assignment, "revoked": {}},
                "stats": {"partitions": 4, "assigned": 4, "cross_rack": 0, "max_minus_min": 0, "moved": 0},
            },
            moved=0,
            fetch_mode="nearest-replica",
            locality_before=None,
            locality_after=Locality(0, 4),
        )
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers})
        producer.produce("_rackplan.plans", key=b"consumer/pay", value=encode_value(record))
        assert producer.flush(10) == 0
        members = [{"member_id": m, "rack": "az-a", "topics": ["orders"]} for m in ("m-1", "m-2", "m-3")]
        settings = Settings.model_validate(
            {
                "kafka": {"bootstrap_servers": cluster.bootstrap_servers},
                "io_timeout_s": 10,
                "consumer_groups": [{"group_id": "pay", "members": members}],
            }
        )
        snap = capture(settings, cluster_id="mock", with_plans=True)
    got = {m["member_id"]: (m.get("owned"), m.get("generation")) for m in snap.consumer_groups[0]["members"]}
    assert got == {
        "m-1": ([["orders", 0], ["orders", 1]], 7),
        "m-2": ([["orders", 2], ["orders", 3]], 7),
        "m-3": ([], 7),
    }
    assert "_rackplan.plans" not in snap.state.topics


@pytest.mark.parametrize(
    ("rates", "field"),
    [
        (10**400, "traffic.orders"),
        (-(10**400), "traffic.orders"),
        (float("inf"), "traffic.orders"),
        ([1, 10**400], "traffic.orders[1]"),
        ([float("nan"), 1], "traffic.orders[0]"),
    ],
)
def test_traffic_beyond_any_float_is_a_snapshot_error_naming_the_field(rates: object, field: str) -> None:
    """An integer too large for a float (JSON has no limit) is refused like NaN, inf or a negative figure,
    with the field named; not an ``OverflowError``."""
    with pytest.raises(SnapshotError) as e:
        parse_snapshot(doc(topics={"orders": [[1], [2]]}, traffic={"orders": rates}))
    assert e.value.field == field
    assert per_partition(10**300, 2, "x") == (5e299, 5e299)  # large, but a float holds it
