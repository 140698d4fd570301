"""The live locality figures on the real cluster: Java followers counted truly (issue 24, item 1).

Three ``RackplanConsumer`` members (classic, ``rackplan.member.id``, no ``group.instance.id``, as
docs/java.md shows) in racks az-a, az-b and az-c read a topic whose replicas are in az-a and az-b only:
whatever the assignment, the az-c member reads its partitions cross-rack. Kafka names the members
``<client.id>-<uuid>``; their registrations name them by their rackplan id. The agent must judge the
live assignment (DescribeGroups) with each member's registered rack: ``rackplan_live_cross_rack_partitions``
equals the cross-rack partitions counted here from the coordinator's own description and the topic's
replica racks, none counted unknown, and the locality alert fires. Before the fix no live member matched
its registration, every rack counted as none, hence local: 0 and ``ok``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from integration.kafka.apps import JavaApp, plan_member
from integration.kafka.cluster import CLIENTS_JAR
from rackplan.agent.groups.membership import RealGroup

from .conftest import RunningAgent, Target
from .test_kafka_java_followers import PLAN_BOUND_S, dump, live_assignment, plan_assignment, wait_until
from .test_kafka_operations import create

RunAgent = Callable[..., RunningAgent]
#: brokers 1..6 are in racks az-a, az-b, az-c, az-a, az-b, az-c
BROKER_RACK = {b: f"az-{'abc'[(b - 1) % 3]}" for b in range(1, 7)}

pytestmark = pytest.mark.skipif(not CLIENTS_JAR.exists(), reason=f"{CLIENTS_JAR} missing: run `make clients`")


def watched(agent: RunningAgent, group: str) -> dict[int, tuple[RealGroup | None, float, float]]:
    """Per cycle report (by id): the group as the agent described it in that cycle, and its two live
    gauges then (read on the agent's thread at the end of the cycle, so they belong to that report)."""
    labels = {"kind": "consumer", "group": group}
    metrics = agent.agent.metrics
    return agent.each_cycle(
        lambda: (
            agent.agent.term.real_groups.get(group),
            metrics.get("rackplan_live_cross_rack_partitions", labels),
            metrics.get("rackplan_live_unknown_rack_partitions", labels),
        )
    )


def test_java_followers_live_cross_rack_partitions_are_counted_truly(
    real: Target, run_agent: RunAgent, tmp_path: Path, e2e_report: Any
) -> None:
    replicas = [[1], [4], [2], [5], [1], [2]]  # az-a: 0, 1, 4; az-b: 2, 3, 5; az-c: none
    topic = create(real, "lv-orders", replicas)
    group = real.name("lv-java")
    settings = real.agent_settings([])
    first = run_agent(settings)
    first.wait_for(lambda r: r.ok, timeout=60)  # the agent made its topics
    racks = {real.name(f"j-{r}"): f"az-{r}" for r in "abc"}
    members: list[JavaApp] = []
    key = f"consumer/{group}"
    try:
        for name, rack in racks.items():
            members.append(
                plan_member(
                    real.bootstrap, group, name, rack, [topic], "classic", real.control_topics, tmp_path
                )
            )
        report = first.wait_for(
            lambda r: any(
                p.key == key and set(p.document["consumer_group"]["assignment"]) == set(racks)
                for p in r.published
            ),
            timeout=60,
        )
        plan = next(p for p in report.published if p.key == key)
        want = plan_assignment(plan.document)
        wait_until(lambda: live_assignment(real.bootstrap, group) == want, PLAN_BOUND_S, "plan adopted")
        time.sleep(3)
        assert live_assignment(real.bootstrap, group) == want, "the group stays on the plan"
        # A new agent judges the initial state of the group, which now stands still on the plan: it
        # describes the group once its registrations are read.
        first.stop()
        second = run_agent(settings)
        seen = watched(second, group)
        judged = second.wait_for(lambda r: key in r.live, timeout=60)
        described, cross_gauge, unknown_gauge = seen[id(judged)]
        assert described is not None and described.assignment() == {
            m.member_id: [[t, p] for t, p in want[m.client_id]] for m in described.members
        }, "the agent described the group on its plan"
        # The truth, from that description and the topic alone (client.id is the member's rackplan id here).
        truth = sum(
            1
            for m in described.members
            for t, p in m.assignment
            if racks[m.client_id] not in {BROKER_RACK[b] for b in replicas[p]}
        )
        assert truth == 2, f"the az-c member reads its 2 partitions cross-rack: {described}"
        live = judged.live[key]
        assert (live.cross_rack, live.total, live.unknown_rack, live.unknown_members) == (truth, 6, 0, ())
        assert (cross_gauge, unknown_gauge) == (truth, 0)
        state = second.agent.term.alerts.state(key)
        assert state == "firing", state  # 2 of 6 > 0.25, and members in az-a and az-b could read all locally
        shown = second.agent.status().group_json("consumer", group)
        assert shown is not None and shown["live"]["cross_rack"] == truth
        e2e_report(target="kafka", live_cross_rack=truth, live_total=live.total, alert=state)
    finally:
        dump(members, tmp_path)
        for m in members:
            m.stop()
