"""``rackplan plans show`` and ``diff`` as a subprocess on real Kafka, against a running agent (issue 28).

The agent plans a settings group of three members (az-a, az-b, az-c); two confluent-kafka consumers
join the group as the static members az-a and az-b (``group.instance.id`` = their plan ids; Kafka
gives them its own member ids), on the classic protocol, with librdkafka's assignor, not the plan.
``plans show`` must read the agent's plan of record straight from the plan topic; ``plans diff``
must describe the live group (DescribeConsumerGroups, which the embedded cluster lacks), match
Kafka's members to the plan's by instance id, report the az-c member absent and every partition
planned for it held by another member, and agree with the coordinator's own description taken
just before and after it ran (a rebalance between the two is waited out, never slept over).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from rackplan.agent.groups.membership import RealGroup, real_group
from rackplan.agent.kafka.timeouts import admin_client_config, operation_timeout_s, result_timeout_s

from .conftest import RunningAgent, Target
from .test_kafka_groups import PollingConsumer

RunAgent = Callable[..., RunningAgent]


def describe(bootstrap: str, group: str) -> RealGroup | None:
    """The group as its coordinator describes it now; None on a retriable answer (coordinator moving)."""
    admin = AdminClient(admin_client_config({"bootstrap.servers": bootstrap}, 10))
    try:
        futures = admin.describe_consumer_groups([group], request_timeout=operation_timeout_s(10))
        return real_group(futures[group].result(timeout=result_timeout_s(10)))
    except KafkaException:
        return None


def settled(bootstrap: str, group: str, members: int, partitions: int) -> RealGroup | None:
    """The group once stable with ``members`` members holding every partition once; else None."""
    g = describe(bootstrap, group)
    if g is None or g.state != "STABLE" or len(g.members) != members:
        return None
    held = [tp for m in g.members for tp in m.assignment]
    return g if len(held) == partitions == len(set(held)) else None


def rackplan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rackplan", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_plans_show_and_diff_read_the_plan_topic_and_the_live_group(
    real: Target, run_agent: RunAgent, tmp_path: Path, e2e_report: Any
) -> None:
    t0 = time.monotonic()
    topic = real.create_topic("pl-orders", 6, 2)
    group = real.name("pl-pay")
    ids = {r: f"{group}-{r}" for r in "abc"}
    members = [{"member_id": ids[r], "rack": f"az-{r}", "topics": [topic]} for r in "abc"]
    agent = run_agent(real.agent_settings([{"group_id": group, "assignor": "range", "members": members}]))
    key = f"consumer/{group}"
    report = agent.wait_for(lambda r: any(p.key == key for p in r.published), timeout=60)
    plan = next(p for p in report.published if p.key == key)
    config = tmp_path / "rackplan.yaml"  # what an operator writes: where Kafka is and the agent's topics
    config.write_text(yaml.safe_dump(real.agent_doc({"log": {"format": "json", "level": "error"}})))

    shown = rackplan("plans", "show", group, "--config", str(config), "--json")
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert doc["status"] == "planned" and doc["ok"] and doc["plan"]["generation"] == plan.generation
    assert doc["plan"]["agent_id"] == agent.agent.w.agent_id
    assert doc["plan"]["assignment"] == json.loads(json.dumps(plan.body["assignment"]))

    consumers = [
        PollingConsumer(
            {
                "bootstrap.servers": real.bootstrap,
                "group.id": group,
                "group.protocol": "classic",
                "group.instance.id": ids[r],
                "client.id": f"cli-{r}",
                "client.rack": f"az-{r}",
                "session.timeout.ms": 10_000,
                "enable.auto.commit": False,
            },
            topic,
        )
        for r in "ab"
    ]
    try:
        planned_c = {(t, p) for t, p in plan.body["assignment"][ids["c"]]}
        deadline = time.monotonic() + 45
        while True:
            assert time.monotonic() < deadline, "the group did not stand still around a diff within 45 s"
            before = settled(real.bootstrap, group, 2, 6)
            if before is None:
                time.sleep(0.2)
                continue
            diffed = rackplan("plans", "diff", group, "--config", str(config), "--json")
            after = settled(real.bootstrap, group, 2, 6)
            if diffed.stdout and after is not None and after.assignment() == before.assignment():
                break  # the diff saw this assignment: no rebalance in between
        assert diffed.returncode == 1, diffed.stderr  # the live group is off its plan
        d = json.loads(diffed.stdout)
        by = {m["member"]: m for m in d["members"] if m["member"] is not None}
        live_ids = {m.group_instance_id: m.member_id for m in before.members}
        assert by[ids["a"]]["live_member"] == live_ids[ids["a"]] != ids["a"]  # matched by instance id
        assert by[ids["b"]]["live_member"] == live_ids[ids["b"]]
        assert by[ids["c"]]["live_member"] is None and ids["c"] in d["members_differ"]
        for pid in (ids["a"], ids["b"]):
            live = {tuple(tp) for tp in before.assignment()[live_ids[pid]]}
            planned = {(t, p) for t, p in plan.body["assignment"][pid]}
            assert {tuple(tp) for tp in by[pid]["missing"]} == planned - live
            assert {tuple(tp) for tp in by[pid]["extra"]} == live - planned
        assert d["unowned"] == [] and d["owned_twice"] == [] and d["unplanned"] == []
        assert {(w["topic"], w["partition"]) for w in d["wrong_member"]} >= planned_c
        text = rackplan("plans", "diff", group, "--config", str(config))
        assert (
            text.returncode == 1
            and f"member {ids['c']}: planned {len(planned_c)}, not in the live group" in text.stdout
        )
        e2e_report(
            target="kafka",
            plan_generation=plan.generation,
            wrong_member=len(d["wrong_member"]),
            seconds=round(time.monotonic() - t0, 1),
        )
    finally:
        for c in consumers:
            c.close()
