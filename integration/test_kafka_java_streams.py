"""A Kafka Streams app registers itself and follows rackplan's plans on the real cluster (issue 14; docs/java.md).

Three instances of a Streams app (a repartition, a state store, one standby) with
``task.assignor.class=dev.rackplan.kafka.RackplanTaskAssignor``; the agent's settings do not list the app.
Kafka's own default assignment (HighAvailabilityTaskAssignor, run by the fallback) places the tasks first;
the group leader's assignor registers the app's clients (process id, rack, threads, topology) on the
registrations topic; the agent plans the app from those records; the app's tasks move where the plan puts
them. Then an instance that is not the leader stops: the leader's next assignment tombstones its record,
the agent plans the two that are left, and the app follows that plan too.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from integration.kafka.apps import JavaApp, streams_instance
from integration.kafka.cluster import CLIENTS_JAR
from rackplan.agent.groups.registry import decode_registration
from rackplan.agent.protocol.plans import PlanRecord

from .conftest import Target
from .test_kafka_java_followers import RunAgent, process_id, wait_until
from .test_kafka_operations import create

pytestmark = pytest.mark.skipif(not CLIENTS_JAR.exists(), reason=f"{CLIENTS_JAR} missing: run `make clients`")

Placement = dict[str, dict[str, list[str]]]


def placement(apps: list[JavaApp]) -> Placement | None:
    """instance -> its active and standby tasks now, once every instance runs (None before)."""
    last = {a.lines[-1]["process"]: a.lines[-1] for a in apps if a.lines}
    if len(last) != len(apps) or any(v["state"] != "RUNNING" for v in last.values()):
        return None
    return {k: {"active": sorted(v["active"]), "standby": sorted(v["standby"])} for k, v in last.items()}


def planned(plan: PlanRecord, name_of: dict[str, str]) -> Placement:
    """The plan's placement by instance name (warm-ups run as standbys)."""
    return {
        name_of[pid]: {"active": sorted(t["active"]), "standby": sorted(t["standby"] + t["warmup"])}
        for pid, t in plan.document["streams_app"]["assignment"].items()
    }


def registrations(bootstrap: str, topic: str, prefix: str) -> dict[str, bytes | None]:
    """key -> newest value (None: a tombstone) of the registration records whose key starts with ``prefix``."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "js-reader", "enable.auto.commit": False})
    try:
        tp = TopicPartition(topic, 0, OFFSET_BEGINNING)
        _, high = c.get_watermark_offsets(tp, timeout=10)
        c.assign([tp])
        out: dict[str, bytes | None] = {}
        deadline = time.monotonic() + 30
        while high > 0 and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is None or m.error() is not None:
                continue
            k = (m.key() or b"").decode()
            if k.startswith(prefix):
                out[k] = m.value()
            if (m.offset() or 0) >= high - 1:
                break
        return out
    finally:
        c.close()


def by_plan(apps: list[JavaApp]) -> int:
    """Assignments by a plan so far (the leader's RackplanTaskAssignor counts them; each JVM prints its count)."""
    return max(int((a.last or {}).get("plan_assignments", 0)) for a in apps)


def test_streams_app_registers_its_clients_and_follows_plans_made_from_them(
    real: Target, run_agent: RunAgent, tmp_path: Path, e2e_report: Any
) -> None:
    app_id = real.name("js-clicks")
    source = create(real, "js-clicks-in", [[1], [2], [3], [4], [5], [6]])
    p = Producer({"bootstrap.servers": real.bootstrap})
    for i in range(600):
        p.produce(source, key=f"k{i}", value=f"v{i % 37}", partition=i % 6)
    assert p.flush(30) == 0
    topics = real.control_topics
    agent = run_agent(real.agent_settings([]))  # no streams_apps: the app must register itself
    agent.wait_for(lambda r: r.ok, timeout=60)
    racks = {f"s-{r}": f"az-{r}" for r in "abc"}
    apps: list[JavaApp] = []
    key = f"streams/{app_id}"
    try:
        t0 = time.monotonic()
        for name, rack in racks.items():
            apps.append(
                streams_instance(
                    real.bootstrap,
                    app_id,
                    name,
                    rack,
                    source,
                    tmp_path,
                    plan_topic=topics["plan_topic"],
                    registrations_topic=topics["registrations_topic"],
                )
            )
        tasks = sorted(f"{s}_{q}" for s in (0, 1) for q in range(6))
        wait_until(
            lambda: (
                (now := placement(apps)) is not None
                and sorted(t for v in now.values() for t in v["active"]) == tasks
            ),
            120,
            "the app runs every task",
        )
        pids = {name: process_id(tmp_path / f"state-{name}") for name in racks}
        name_of = {pid: name for name, pid in pids.items()}

        def plan_for(clients: set[str]) -> PlanRecord:
            """The agent's newest plan of the app whose clients are exactly ``clients``."""
            report = agent.wait_for(
                lambda r: any(
                    x.key == key and set(x.document["streams_app"]["assignment"]) == clients
                    for x in r.published
                ),
                timeout=90,
            )
            return next(
                x
                for x in report.published
                if x.key == key and set(x.document["streams_app"]["assignment"]) == clients
            )

        def registration(name: str) -> bytes | None:
            """The newest registration record of instance ``name`` (None: tombstoned)."""
            return registrations(real.bootstrap, topics["registrations_topic"], f"{key}/")[
                f"{key}/{pids[name]}"
            ]

        # The agent planned the app from the leader's registrations: its three live process ids.
        first = plan_for(set(pids.values()))
        planned_s = time.monotonic() - t0
        # Before any plan, the fallback was Kafka's own default assignment (its HA assignor).
        fallbacks = {x.get("fallback") for a in apps for x in list(a.lines)} - {None, ""}
        assert fallbacks == {"HighAvailabilityTaskAssignor"}, fallbacks
        # What the leader published: one record per client, valid for the registration schema and the
        # agent's decoder, with the client's rack and the app's topology.
        validator = jsonschema.Draft202012Validator(
            json.loads((Path(__file__).parents[1] / "docs" / "registration-schema.json").read_text())
        )
        records = registrations(real.bootstrap, topics["registrations_topic"], f"{key}/")
        assert set(records) == {f"{key}/{pid}" for pid in pids.values()}
        for k, raw in records.items():
            assert raw is not None
            doc = json.loads(raw)
            validator.validate(doc)
            entry = decode_registration(k, raw, int(time.time() * 1000))
            assert entry is not None and entry.name == app_id, k
            assert doc["rack"] == racks[name_of[doc["process_id"]]] and doc["threads"] == 1
            assert {
                sub["id"]: (sub["source_topics"], sub["changelog_topics"], sub["stateful"])
                for sub in doc["subtopologies"]
            } == {
                "0": ([source], [], False),
                "1": ([f"{app_id}-by-value-repartition"], [f"{app_id}-counts-changelog"], True),
            }
            assert doc["num_standby_replicas"] == 1
        want = planned(first, name_of)
        # Two assignments by a plan after this one was published (the store reads it within 0.5 s; the
        # follow-up rebalance runs every 3 s): this plan assigned, not an older one nor Kafka's assignor.
        counted = by_plan(apps)
        took = wait_until(
            lambda: placement(apps) == want and by_plan(apps) >= counted + 2,
            60,
            "the tasks are where the plan puts them, by the plan",
        )
        for tasks_of in want.values():
            assert not set(tasks_of["active"]) & set(tasks_of["standby"])

        # An instance that is not the leader leaves: the leader tombstones its registration at the next
        # assignment (after the session timeout, 10 s), the agent plans the two left, the app follows.
        leader = next(a for a in apps if (a.last or {}).get("plan_assignments", 0) > 0)
        victim = next(a for a in apps if a is not leader)
        victim_name = victim.lines[-1]["process"]
        t1 = time.monotonic()
        victim.stop()
        rest = [a for a in apps if a is not victim]
        second = plan_for({pids[n] for n in racks if n != victim_name})
        assert registration(victim_name) is None, "the leader tombstoned the client that left"
        replanned_s = time.monotonic() - t1
        assert second.generation > first.generation
        want2 = planned(second, name_of)
        counted = by_plan(rest)
        took2 = wait_until(
            lambda: placement(rest) == want2 and by_plan(rest) >= counted + 2,
            60,
            "the two left follow the new plan",
        )

        # Now the leader leaves: the last instance leads, new to the app (its JVM registered nobody).
        # It knows the leader only from the plan, and tombstones it: the agent plans the one left well
        # before the registration would expire (registrations.ttl_s: 300 s by default).
        old_leader = next(a for a in rest if by_plan([a]) >= counted + 2)  # it assigned the second plan
        last = next(a for a in rest if a is not old_leader)
        gone_name = old_leader.lines[-1]["process"]
        t2 = time.monotonic()
        old_leader.stop()
        third = plan_for({pids[n] for n in racks if n not in (victim_name, gone_name)})
        assert registration(gone_name) is None, "the new leader tombstoned the planned client that left"
        replanned_leader_s = time.monotonic() - t2
        assert third.generation > second.generation
        want3 = planned(third, name_of)
        took3 = wait_until(lambda: placement([last]) == want3, 60, "the last instance follows its plan")
        e2e_report(
            target="kafka",
            app="streams (registered by its leader, 3 then 2 then 1 instances)",
            plan_generations=f"{first.generation},{second.generation},{third.generation}",
            planned_from_start_s=round(planned_s, 1),
            adopted_s=f"{took:.1f},{took2:.1f},{took3:.1f}",
            replanned_after_leave_s=round(replanned_s, 1),
            replanned_after_leader_left_s=round(replanned_leader_s, 1),
        )
    finally:
        for a in apps:
            a.stop()
