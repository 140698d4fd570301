"""A real Kafka Streams app on real Kafka (issue scenario 6), next to rackplan's plan for the same app.

Three instances of ``integration/kafka/apps`` StreamsApp (kafka-streams 4.4.0), one per rack, with
``rack.aware.assignment.strategy=balance_subtopology`` and one standby: sub-topology 0 reads the input
topic and repartitions by value, sub-topology 1 counts in the store ``counts``.  The task placement
Kafka's HighAvailabilityTaskAssignor made (each instance prints its tasks) and the plan of
``rackplan assign`` for the same instance are counted by the contract's definition, side by side.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from integration.kafka.apps import JavaApp, streams_instance

from .conftest import RunningAgent, Target, rackplan_assign
from .test_kafka_operations import create

RunAgent = Callable[..., RunningAgent]
BROKER_RACKS = {1: "az-a", 2: "az-b", 3: "az-c", 4: "az-a", 5: "az-b", 6: "az-c"}
PARTITIONS = 6


def cross_rack(
    placement: Mapping[str, Mapping[str, list[str]]],
    racks: Mapping[str, str],
    task_partitions: Callable[[str, bool], list[tuple[str, int]]],
    replicas: Mapping[str, list[list[int]]],
) -> tuple[int, int]:
    """(active, standby) cross-rack pairs by CONTRACT.md: actives over all their topic partitions,
    standbys over their changelog partitions only; a partition is local when a replica is in the rack."""

    def remote(topic: str, p: int, rack: str) -> bool:
        return rack not in {BROKER_RACKS[b] for b in replicas[topic][p]}

    active = standby = 0
    for client, tasks in placement.items():
        for t in tasks["active"]:
            active += sum(remote(tp, p, racks[client]) for tp, p in task_partitions(t, False))
        for t in tasks["standby"]:
            standby += sum(remote(tp, p, racks[client]) for tp, p in task_partitions(t, True))
    return active, standby


def test_streams_app_real_placement_next_to_rackplans_plan(
    real: Target, tmp_path: Path, e2e_report: Any
) -> None:
    app_id = real.name("clicks")
    # The input: one replica per partition, two partitions per rack; a task reading it is local in one rack.
    source = create(real, "clicks-in", [[1], [2], [3], [4], [5], [6]])
    p = Producer({"bootstrap.servers": real.bootstrap})
    for i in range(600):
        p.produce(source, key=f"k{i}", value=f"v{i % 37}", partition=i % PARTITIONS)
    assert p.flush(30) == 0

    racks = {f"p-{r}": f"az-{r}" for r in "abc"}
    apps: list[JavaApp] = []
    try:
        for process, rack in racks.items():
            apps.append(streams_instance(real.bootstrap, app_id, process, rack, source, tmp_path))
        tasks = {f"{s}_{q}" for s in (0, 1) for q in range(PARTITIONS)}

        def stable() -> dict[str, dict[str, list[str]]] | None:
            last = {a.lines[-1]["process"]: a.lines[-1] for a in apps if a.lines}
            if len(last) != len(apps) or any(v["state"] != "RUNNING" for v in last.values()):
                return None
            actives = [t for v in last.values() for t in v["active"]]
            standbys = [t for v in last.values() for t in v["standby"]]
            if sorted(actives) != sorted(tasks) or sorted(standbys) != sorted(
                f"1_{q}" for q in range(PARTITIONS)
            ):
                return None  # every task active once; every stateful task with its one standby
            return {k: {"active": v["active"], "standby": v["standby"]} for k, v in last.items()}

        deadline = time.monotonic() + 180
        placement: dict[str, dict[str, list[str]]] | None = None
        settle_until = deadline
        while placement is None or time.monotonic() < settle_until:
            current = stable()
            if current != placement:
                placement, settle_until = current, time.monotonic() + 5.0  # unchanged for 5 s
            assert time.monotonic() < deadline, f"the app never settled: {[a.last for a in apps]}"
            time.sleep(0.5)
        assert placement is not None

        # The same app as a contract instance: topics as the brokers have them now.
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": real.bootstrap})
        repartition, changelog = f"{app_id}-by-value-repartition", f"{app_id}-counts-changelog"
        md = admin.list_topics(timeout=10).topics
        replicas = {
            t: [list(md[t].partitions[q].replicas) for q in sorted(md[t].partitions)]
            for t in (source, repartition, changelog)
        }
        instance = {
            "cluster": {
                "brokers": [{"id": b, "rack": r} for b, r in BROKER_RACKS.items()],
                "topics": replicas,
            },
            "streams_app": {
                "application_id": app_id,
                "subtopologies": [
                    {"id": "0", "source_topics": [source], "changelog_topics": [], "stateful": False},
                    {
                        "id": "1",
                        "source_topics": [repartition],
                        "changelog_topics": [changelog],
                        "stateful": True,
                    },
                ],
                "clients": [{"process_id": c, "rack": r, "threads": 1} for c, r in racks.items()],
                "num_standby_replicas": 1,
                "rack_aware": {"strategy": "balance_subtopology"},
                "assignor": "high-availability",
            },
        }
        plan = rackplan_assign(instance)
        ours = {
            c: {"active": a["active"], "standby": a["standby"]}
            for c, a in plan["streams_app"]["assignment"].items()
        }

        def task_partitions(task: str, standby: bool) -> list[tuple[str, int]]:
            sub, q = task.split("_")
            if sub == "0":
                return [] if standby else [(source, int(q))]
            return ([] if standby else [(repartition, int(q))]) + [(changelog, int(q))]

        kafka_a, kafka_s = cross_rack(placement, racks, task_partitions, replicas)
        ours_a, ours_s = cross_rack(ours, racks, task_partitions, replicas)
        e2e_report(
            target="kafka",
            kafka_active_cross_rack=kafka_a,
            rackplan_active_cross_rack=ours_a,
            kafka_standby_cross_rack=kafka_s,
            rackplan_standby_cross_rack=ours_s,
            kafka_placement=json.dumps(placement, sort_keys=True),
        )
        # The plan's own statistics count what the test counts.
        assert (plan["stats"]["active_cross_rack"], plan["stats"]["standby_cross_rack"]) == (ours_a, ours_s)
        # Kafka's assignment is a valid one (the invariants rackplan keeps too).
        for c, tasks_of in placement.items():
            assert not set(tasks_of["active"]) & set(tasks_of["standby"]), c
        assert ours_a <= kafka_a, "rackplan's actives read no more cross-rack than Kafka's"
    finally:
        for a in apps:
            a.stop()
