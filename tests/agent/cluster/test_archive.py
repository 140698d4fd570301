"""Fleet snapshots hold every group the agent plans, under one id (Kafka's cluster id), ``cluster_name`` a label."""

from __future__ import annotations

from rackplan.agent.cluster.archive import build_snapshot, fleet_cluster_id, parse_snapshot, snapshot_json
from rackplan.agent.cluster.metadata import Snapshot, TopicState
from rackplan.agent.planning.planner import make_registration
from rackplan.agent.settings.sections import Settings

SNAP = Snapshot(
    {1: "az-a"}, {"orders": TopicState(((1,),), (1,))}, taken_at=1_800_000_000.0, cluster_id="Lq0cWkd4"
)


def settings(**extra: object) -> Settings:
    group = {
        "group_id": "pay",
        "fetch_mode": "leader",
        "members": [{"member_id": "p", "rack": "az-a", "topics": ["orders"]}],
    }
    return Settings.model_validate(
        {"kafka": {"bootstrap_servers": "k:9092"}, "consumer_groups": [group], **extra}
    )


def test_registered_groups_are_in_the_snapshot_beside_the_files() -> None:
    s = settings(cluster_name="prod-eu")
    registered = make_registration(
        "consumer", {"group_id": "orders-app", "members": [{"member_id": "o", "rack": "az-a", "topics": ["orders"]}]},
        "nearest-replica", "topic",
    )  # fmt: skip
    app = make_registration(
        "streams", {"application_id": "clicks", "subtopologies": [], "clients": []}, "leader", "topic"
    )
    file_pay = make_registration("consumer", dict(s.consumer_groups[0]), s.fetch_mode, "file")
    snap = build_snapshot(fleet_cluster_id(SNAP, s), SNAP, {1: "az-a"}, s, regs=[file_pay, registered, app])
    assert [g["group_id"] for g in snap.consumer_groups] == ["orders-app", "pay"]
    assert [g["fetch_mode"] for g in snap.consumer_groups] == ["nearest-replica", "leader"]
    assert [a["application_id"] for a in snap.streams_apps] == ["clicks"]
    doc = snapshot_json(snap)
    assert doc["cluster_id"] == "Lq0cWkd4" and doc["cluster_name"] == "prod-eu"
    assert parse_snapshot(doc) == snap


def test_without_registrations_the_files_groups_and_without_a_name_no_label() -> None:
    s = settings()
    snap = build_snapshot(fleet_cluster_id(SNAP, s), SNAP, {1: "az-a"}, s)
    assert [g["group_id"] for g in snap.consumer_groups] == ["pay"] and snap.consumer_groups[0][
        "fetch_mode"
    ] == "leader"
    assert "cluster_name" not in snapshot_json(snap)


def test_the_id_is_kafkas_and_old_documents_stay_readable() -> None:
    assert fleet_cluster_id(SNAP, settings(cluster_name="prod-eu")) == "Lq0cWkd4"
    nameless = Snapshot({}, {}, cluster_id=None)  # brokers that do not say: the name, then the servers
    assert fleet_cluster_id(nameless, settings(cluster_name="prod-eu")) == "prod-eu"
    assert fleet_cluster_id(nameless, settings()) == "k:9092"
    old = {
        "schema": 1,
        "cluster_id": "prod-eu",
        "taken_at": "2026-11-21T22:00:00Z",
        "brokers": [],
        "topics": {},
    }
    assert (
        parse_snapshot(old).cluster_name is None
        and parse_snapshot({**old, "cluster_name": None}).cluster_id == "prod-eu"
    )
