"""Kafka's own Java assignors in real groups (issue scenario 5).

Java consumers (kafka-clients 4.4.0, ``integration/kafka/apps`` GroupMember) with ``client.rack`` and
``RangeAssignor`` / ``CooperativeStickyAssignor`` join a real group.  What the cluster says they hold
(DescribeGroups) is compared with

- the differential harness (``oracle/``: Kafka's assignor classes called as a group leader calls
  them) on the same instance, so the harness is checked against live Kafka: range from scratch; for
  cooperative-sticky, the live assignment is a fixed point (Kafka's assignor, given the group as it
  is, keeps it);
- ``rackplan assign`` on the same instance: range identical; cooperative-sticky no more cross-rack.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from integration.kafka.apps import JavaApp, group_member
from rackplan.agent.kafka.timeouts import admin_client_config, operation_timeout_s, result_timeout_s
from tests.kafka_oracle import session_oracle

from .conftest import Target, rackplan_assign
from .test_kafka_operations import create

BROKER_RACKS = {1: "az-a", 2: "az-b", 3: "az-c", 4: "az-a", 5: "az-b", 6: "az-c"}


#: "not yet": Kafka 4.4's group coordinator answers NOT_COORDINATOR to ConsumerGroupDescribe until it has
#: loaded its __consumer_offsets partition (seen right after the cluster's start: the describe timed out)
NOT_YET = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError._TIMED_OUT,
    }
)


def describe(bootstrap: str, group: str) -> dict[str, Any]:
    """member id -> (client id, sorted assignment) as the group coordinator reports it; {} while it cannot say."""
    admin = AdminClient(admin_client_config({"bootstrap.servers": bootstrap}, 20))
    try:
        desc = admin.describe_consumer_groups([group], request_timeout=operation_timeout_s(20))[group].result(
            timeout=result_timeout_s(20)
        )
    except KafkaException as e:
        if e.args[0].code() in NOT_YET or e.args[0].retriable():
            return {}  # the caller's loop asks again until its deadline
        raise
    return {
        m.member_id: (m.client_id, sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions))
        for m in desc.members
    }


def cross_rack(
    assignment: dict[str, list[list[Any]]], member_rack: dict[str, str], replicas: dict[str, list[list[int]]]
) -> int:
    return sum(
        1
        for m, parts in assignment.items()
        for t, p in parts
        if member_rack[m] not in {BROKER_RACKS[b] for b in replicas[t][p]}
    )


@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky"])
def test_java_consumers_with_kafkas_assignors_match_the_harness_and_rackplan(
    real: Target, tmp_path: Path, e2e_report: Any, assignor: str
) -> None:
    # Two topics with rack-skewed replicas (RF 2), so rack-aware choices matter.
    replicas = {
        real.name(f"j-{assignor}-a"): [[1, 2], [4, 5], [2, 3], [5, 6], [3, 1], [6, 4], [1, 5]],
        real.name(f"j-{assignor}-b"): [[2, 4], [3, 5], [1, 6], [4, 2]],
    }
    for name, reps in replicas.items():
        create(real, name.removeprefix(real.prefix), reps)
    topics = sorted(replicas)
    group = real.name(f"java-{assignor}")
    racks = {"ja": "az-a", "jb": "az-b", "jc": "az-c", "jd": "az-a"}
    members: list[JavaApp] = []
    try:
        for name, rack in racks.items():
            members.append(group_member(real.bootstrap, group, name, rack, assignor, topics, tmp_path))
        total = sum(len(r) for r in replicas.values())
        deadline = time.monotonic() + 120
        live: dict[str, Any] = {}
        stable_since = None
        while True:
            now = describe(real.bootstrap, group)
            owned = [tp for _, parts in now.values() for tp in parts]
            ok = len(now) == len(racks) and len(owned) == total and len(set(owned)) == total
            if ok and now == live:
                stable_since = stable_since or time.monotonic()
                if time.monotonic() - stable_since >= 3.0:
                    break
            else:
                stable_since = None
            live = now
            assert time.monotonic() < deadline, f"the group never settled: {now}"
            time.sleep(0.5)

        client_rack = {m: racks[client] for m, (client, _) in live.items()}
        real_assignment = {m: [[t, p] for t, p in parts] for m, (_, parts) in live.items()}
        sticky = assignor == "cooperative-sticky"
        instance = {
            "cluster": {
                "brokers": [{"id": b, "rack": r} for b, r in BROKER_RACKS.items()],
                "topics": replicas,
            },
            "consumer_group": {
                "group_id": group,
                "assignor": assignor,
                "members": [
                    {
                        "member_id": m,
                        "rack": client_rack[m],
                        "topics": topics,
                        **({"owned": real_assignment[m], "generation": 1} if sticky else {}),
                    }
                    for m in sorted(live)
                ],
            },
        }
        (kafka,) = session_oracle().answer_many([instance])
        kafka_assignment = {
            m: sorted(map(list, parts)) for m, parts in kafka["consumer_group"]["assignment"].items()
        }
        ours = rackplan_assign(instance)["consumer_group"]
        live_x = cross_rack(real_assignment, client_rack, replicas)
        ours_x = cross_rack(ours["assignment"], client_rack, replicas)
        e2e_report(
            target="kafka",
            assignor=assignor,
            members=len(live),
            partitions=total,
            live_cross_rack=live_x,
            harness_cross_rack=cross_rack(kafka_assignment, client_rack, replicas),
            rackplan_cross_rack=ours_x,
        )
        # The harness answers what the live group holds (for cooperative-sticky: keeps it, withholding nothing).
        assert kafka_assignment == {m: sorted(p) for m, p in real_assignment.items()}
        if sticky:
            assert not any(kafka["consumer_group"].get("revoked", {}).values())
            assert ours_x <= live_x, "cooperative-sticky: never more cross-rack than Kafka's"
        else:
            assert ours["assignment"] == {m: sorted(p) for m, p in real_assignment.items()}, (
                "range: identical"
            )
    finally:
        for m in members:
            m.stop()
