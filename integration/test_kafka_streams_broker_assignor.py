"""A KIP-1071 Streams group assigned on the broker by rackplan's Streams assignor (issue 27; docs/java.md).

The brokers load ``dev.rackplan.kafka.streams.RackplanStreamsTaskAssignor`` next to Kafka's ``sticky``
(``group.streams.assignors``, integration/kafka/cluster.py). Three instances of a Kafka Streams 4.4 app
(``group.protocol=streams``, racks az-a/az-b/az-c, a repartition, a state store, one standby) run in a
group that chooses it (group config ``streams.assignor.name=rackplan``), and beside it, on the same input, a
second app's group that keeps Kafka's ``sticky``. The source topic's partition p has its one replica in
rack p % 3, so where a sub-topology-0 task runs decides whether it reads across racks. The instances
start one after another: a group's first assignment comes before the plugin's catalog has described the
group (Kafka's sticky assigns it), so the second starts once a broker logged that describe, and the
next assignments are rackplan's.
"""

from __future__ import annotations

import functools
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from integration.kafka.apps import JavaApp, streams_group_instance
from integration.kafka.cluster import CLIENTS_JAR

from .conftest import Target
from .test_kafka_java_followers import wait_until
from .test_kafka_java_streams import Placement, placement
from .test_kafka_operations import create

pytestmark = pytest.mark.skipif(not CLIENTS_JAR.exists(), reason=f"{CLIENTS_JAR} missing: run `make clients`")

RACKS = {"s-a": "az-a", "s-b": "az-b", "s-c": "az-c"}
#: the source topic's partition p lives on broker p + 1 (racks az-a, az-b, az-c, az-a, az-b, az-c)
SOURCE_RACK = {p: ("az-a", "az-b", "az-c")[p % 3] for p in range(6)}
TASKS = sorted(f"{s}_{q}" for s in (0, 1) for q in range(6))


def cross_rack(now: Placement) -> tuple[int, int]:
    """(sub-topology-0 actives reading their source partition from another rack, standbys in their active's rack).

    Sub-topology 1 reads the repartition topic and the changelog, which Streams creates with 3 replicas
    (one per rack): never across racks."""
    rack_of = {name: RACKS[name] for name in now}
    active_rack = {t: rack_of[n] for n, v in now.items() for t in v["active"]}
    actives = sum(
        1
        for n, v in now.items()
        for t in v["active"]
        if t.startswith("0_") and SOURCE_RACK[int(t.split("_")[1])] != rack_of[n]
    )
    standbys = sum(1 for n, v in now.items() for t in v["standby"] if active_rack.get(t) == rack_of[n])
    return actives, standbys


def broker_lines(real: Target, text: str) -> list[str]:
    """The brokers' log lines that contain ``text``, broker by broker."""
    assert real.kafka is not None
    return [
        line
        for n in real.kafka.brokers
        if n.log.exists()
        for line in n.log.read_text(errors="replace").splitlines()
        if text in line
    ]


def described(real: Target, group: str) -> bool:
    """The plugin's catalog holds the group: an assignment with a member it has seen is rackplan's.

    Before that describe a new group's assignment is Kafka's ``sticky`` (docs/java.md, "Limits"), and no
    later one comes until the next member joins: the second instance must join after it.
    """
    return bool(broker_lines(real, f"Streams group {group} described:"))


def settled(apps: list[JavaApp], quiet_s: float, timeout: float, tasks: list[str] = TASKS) -> Placement:
    """The placement once every task in ``tasks`` runs and nothing changed for ``quiet_s``."""
    last: Placement | None = None
    since = time.monotonic()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = placement(apps)
        if now != last:
            last, since = now, time.monotonic()
        elif (
            now is not None
            and sorted(t for v in now.values() for t in v["active"]) == tasks
            and time.monotonic() - since >= quiet_s
        ):
            return now
        time.sleep(0.2)
    raise AssertionError(f"the app did not settle within {timeout:.0f} s; last {last}")


def run_app(real: Target, source: str, label: str, assignor: str | None, work: Path) -> Placement:
    """Three instances started one by one (each running before the next), settled, then stopped."""
    app_id = real.name(f"sg-{label}")
    apps: list[JavaApp] = []
    try:
        for name, rack in RACKS.items():
            apps.append(
                streams_group_instance(real.bootstrap, app_id, name, rack, source, work / label, assignor)
            )
            apps[-1].wait_for(lambda line: line.get("state") == "RUNNING", 120, f"{label} {name} runs")
            if assignor == "rackplan" and real.kafka is not None and len(apps) == 1:
                wait_until(functools.partial(described, real, app_id), 30, "the plugin described the group")
        return settled(apps, quiet_s=8.0, timeout=120)
    finally:
        for a in apps:
            a.stop()


def test_streams_group_assigned_by_rackplans_broker_assignor(
    real: Target, tmp_path: Path, e2e_report: Any
) -> None:
    source = create(real, "sg-in", [[1], [2], [3], [4], [5], [6]])
    p = Producer({"bootstrap.servers": real.bootstrap})
    for i in range(600):
        p.produce(source, key=f"k{i}", value=f"v{i % 37}", partition=i % 6)
    assert p.flush(30) == 0

    # The two apps' groups are independent: Kafka's sticky runs beside rackplan's, not after it.
    with ThreadPoolExecutor(1) as pool:
        sticky = pool.submit(run_app, real, source, "sticky", None, tmp_path)
        ours = run_app(real, source, "rackplan", "rackplan", tmp_path)
        theirs = sticky.result()
    kafka = real.kafka
    if kafka is not None:  # the brokers' log: rackplan's assignor (not its fallback) assigned the group
        group = real.name("sg-rackplan")
        assigned = functools.partial(broker_lines, real, f"Streams group {group} assigned rack-aware")
        wait_until(lambda: bool(assigned()), 15, "a broker logged rackplan's assignment of the group")
    print(f"rackplan's placement {ours}\nKafka sticky's placement {theirs}")

    for now in (ours, theirs):
        for v in now.values():
            assert not set(v["active"]) & set(v["standby"])
        assert sorted(t for v in now.values() for t in v["active"]) == TASKS
        assert sorted(t for v in now.values() for t in v["standby"]) == sorted(
            t for t in TASKS if t.startswith("1_")
        )
        assert sorted(len(v["active"]) for v in now.values()) == [4, 4, 4]
    our_cross, our_same = cross_rack(ours)
    their_cross, their_same = cross_rack(theirs)
    # Each rack holds two of the six source partitions and one instance: rackplan reads none across racks.
    assert our_cross == 0, ours
    assert our_cross <= their_cross
    print(
        f"streams group, cross-rack actives / standbys in their active's rack: rackplan {our_cross}/{our_same},"
        f" Kafka sticky {their_cross}/{their_same}"
    )
    e2e_report(
        target="kafka",
        app="streams group (KIP-1071), 3 instances, 1 standby",
        cross_rack_actives_rackplan=our_cross,
        cross_rack_actives_sticky=their_cross,
        standbys_in_active_rack_rackplan=our_same,
        standbys_in_active_rack_sticky=their_same,
    )
