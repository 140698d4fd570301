"""Java consumers follow rackplan's plans on the real cluster (issue 14; clients/java, docs/java.md).

- Classic cooperative group: three ``RackplanConsumer`` members (``RackplanAssignor``, ``client.rack``)
  register themselves; the agent plans from the registrations and publishes; the group's actual
  assignment (DescribeGroups) equals the plan within the documented bound. Then a counted stream of
  messages runs through a member's ``kill -9`` (the group falls back to CooperativeStickyAssignor,
  the plan no longer fitting): 0 messages lost, and no partition owned by two members at any moment
  (every assignment callback is logged with its time; ownership intervals must not overlap).
- KIP-848 group: the brokers load ``RackplanServerAssignor`` (``group.consumer.assignors``, see
  integration/kafka/cluster.py); members choose it with ``group.remote.assignor=rackplan``. The
  members are registered first (as a deployment does), the agent publishes the plan, the members
  join: the assignment the coordinator gives equals the plan.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from agent.registry import consumer_registration
from integration.kafka.apps import JavaApp, plan_member
from integration.kafka.cluster import CLIENTS_JAR

from .conftest import RunningAgent, Target

RunAgent = Callable[..., RunningAgent]
Assignment = dict[str, list[tuple[str, int]]]
RACKS = {"a": "az-a", "b": "az-b", "c": "az-c"}
#: docs/java.md: a new plan reaches a classic group within plan.poll.ms + the poll timeout + two rebalances
PLAN_BOUND_S = 15.0

pytestmark = pytest.mark.skipif(not CLIENTS_JAR.exists(), reason=f"{CLIENTS_JAR} missing: run `make clients`")


def live_assignment(bootstrap: str, group: str) -> Assignment:
    """client id (= the member's rackplan id) -> sorted partitions, as the coordinator reports them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    desc = admin.describe_consumer_groups([group])[group].result(timeout=30)
    return {
        m.client_id: sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions)
        for m in desc.members
    }


def plan_assignment(doc: dict[str, Any]) -> Assignment:
    return {m: sorted((t, p) for t, p in parts) for m, parts in doc["consumer_group"]["assignment"].items()}


def wait_until(pred: Callable[[], bool], timeout: float, what: str) -> float:
    """Seconds until ``pred`` held (polled every 0.2 s)."""
    t0 = time.monotonic()
    while not pred():
        assert time.monotonic() - t0 < timeout, f"{what}: not within {timeout:.0f} s"
        time.sleep(0.2)
    return time.monotonic() - t0


def intervals(
    members: Iterable[JavaApp], killed_at_ms: dict[str, int]
) -> dict[tuple[str, int], list[tuple[int, int, str]]]:
    """partition -> [(from_ms, to_ms, member)] from the assignment callbacks; a killed member owns until its kill."""
    out: dict[tuple[str, int], list[tuple[int, int, str]]] = {}
    end_ms = int(time.time() * 1000) + 1
    for app in members:
        owned: dict[tuple[str, int], int] = {}
        name = ""
        for line in list(app.lines):
            name = line["member"]
            tps = [(t, p) for t, p in line["partitions"]]
            if line["event"] == "assigned":
                for tp in tps:
                    owned.setdefault(tp, line["at_ms"])
            elif line["event"] in ("revoked", "lost"):
                for tp in tps:
                    if tp in owned:
                        out.setdefault(tp, []).append((owned.pop(tp), line["at_ms"], name))
        stop = killed_at_ms.get(name, end_ms)
        for tp, since in owned.items():
            out.setdefault(tp, []).append((since, stop, name))
    return out


def overlaps(iv: dict[tuple[str, int], list[tuple[int, int, str]]]) -> list[str]:
    bad = []
    for tp, spans in iv.items():
        spans = sorted(spans)
        for (s1, e1, m1), (s2, _e2, m2) in itertools.pairwise(spans):
            if m1 != m2 and s2 < e1:
                bad.append(f"{tp}: {m1} [{s1}, {e1}) and {m2} from {s2}")
    return bad


def consumed(members: Iterable[JavaApp]) -> set[str]:
    return {
        v
        for app in members
        for line in list(app.lines)
        if line["event"] == "consumed"
        for v in line["values"]
    }


def produce(bootstrap: str, topic: str, values: range) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for v in values:
        p.produce(topic, value=str(v).encode(), key=str(v).encode())
    assert p.flush(30) == 0


def test_classic_cooperative_group_follows_the_plan_and_loses_nothing_through_a_kill(
    real: Target, run_agent: RunAgent, tmp_path: Path, e2e_report: Any
) -> None:
    topic = real.create_topic("jf-orders", 12, 2)
    group = real.name("jf-classic")
    agent = run_agent(real.agent_settings([]))
    agent.wait_for(lambda r: r.ok, timeout=60)  # the agent made its topics
    names = {real.name(f"m-{r}"): rack for r, rack in RACKS.items()}
    members = [
        plan_member(real.bootstrap, group, n, rack, [topic], "classic", real.control_topics, tmp_path)
        for n, rack in names.items()
    ]
    try:
        produce(real.bootstrap, topic, range(0, 1000))
        key = f"consumer/{group}"
        report = agent.wait_for(
            lambda r: any(
                p.key == key and set(p.document["consumer_group"]["assignment"]) == set(names)
                for p in r.published
            ),
            timeout=60,
        )
        plan = next(p for p in report.published if p.key == key)
        want = plan_assignment(plan.document)
        took = wait_until(
            lambda: live_assignment(real.bootstrap, group) == want, PLAN_BOUND_S, "plan adopted"
        )

        # A counted stream through a kill -9: the rest of the group takes over (fallback: plan members gone).
        feeder = threading.Thread(
            target=lambda: [produce(real.bootstrap, topic, range(i, i + 250)) for i in range(1000, 3000, 250)]
        )
        feeder.start()
        time.sleep(1.0)
        victim = members[2]
        victim_name = list(names)[2]
        killed_at_ms = int(time.time() * 1000)
        victim.kill()
        feeder.join(60)
        wait_until(
            lambda: (
                sorted(tp for parts in live_assignment(real.bootstrap, group).values() for tp in parts)
                == [(topic, p) for p in range(12)]
                and len(live_assignment(real.bootstrap, group)) == 2
            ),
            40,
            "the survivors hold every partition",
        )
        wait_until(lambda: len(consumed(members)) == 3000, 40, "every message consumed")
        lost = 3000 - len(consumed(members) & {str(v) for v in range(3000)})
        twice = overlaps(intervals(members, {victim_name: killed_at_ms}))
        # What the leaders' RackplanAssignor said (each callback line carries its counters).
        lines = [x for m in members for x in list(m.lines) if "plan_assignments" in x]
        by_plan = max(x["plan_assignments"] for x in lines)
        after_kill = [x for x in lines if x["at_ms"] > killed_at_ms and x["member"] != victim_name]
        fallback_reasons = {x["reason"] for x in after_kill if x["fallbacks"] > 0}
        e2e_report(
            target="kafka",
            protocol="classic-cooperative",
            plan_generation=plan.generation,
            adopted_s=round(took, 1),
            messages=3000,
            lost=lost,
            owned_twice=len(twice),
            plan_rebalances=by_plan,
        )
        assert by_plan >= 1, "the leader assigned by the plan"
        assert any("differ from the live members" in r for r in fallback_reasons), fallback_reasons
        assert lost == 0
        assert twice == [], twice
    finally:
        for m in members:
            m.stop()


def test_kip848_group_gets_the_plan_from_the_brokers_assignor(
    real: Target, run_agent: RunAgent, tmp_path: Path, e2e_report: Any
) -> None:
    topic = real.create_topic("jf-kip848", 9, 2)
    group = real.name("jf-kip848")
    agent = run_agent(real.agent_settings([]))
    agent.wait_for(lambda r: r.ok, timeout=60)
    names = {real.name(f"k-{r}"): rack for r, rack in RACKS.items()}
    # Registered before they join (as a deployment does): the plan is there when the group forms.
    p = Producer({"bootstrap.servers": real.bootstrap})
    now_ms = int(time.time() * 1000)
    for n, rack in names.items():
        k, v = consumer_registration(
            group,
            n,
            rack=rack,
            topics=[topic],
            timestamp_ms=now_ms,
            group_instance_id=n,
            assignor="rack-optimal",
        )
        p.produce(real.control_topics["registrations_topic"], key=k, value=v)
    assert p.flush(10) == 0
    key = f"consumer/{group}"
    report = agent.wait_for(lambda r: any(x.key == key for x in r.published), timeout=60)
    plan = next(x for x in report.published if x.key == key)
    want = plan_assignment(plan.document)
    assert set(want) == set(names)
    members: list[JavaApp] = []
    try:
        for n, rack in names.items():
            members.append(
                plan_member(
                    real.bootstrap, group, n, rack, [topic], "consumer", real.control_topics, tmp_path
                )
            )

        def owned() -> Assignment:
            out: Assignment = {}
            for app in members:
                last = [x for x in list(app.lines) if x["event"] in ("assigned", "revoked", "lost")]
                state: set[tuple[str, int]] = set()
                for x in last:
                    tps = {(t, q) for t, q in x["partitions"]}
                    state = state | tps if x["event"] == "assigned" else state - tps
                if app.lines:
                    out[app.lines[0]["member"]] = sorted(state)
            return out

        took = wait_until(lambda: owned() == want, 60, "KIP-848 members hold the plan")
        try:
            described: Assignment | None = live_assignment(real.bootstrap, group)
        except Exception as e:  # librdkafka may not describe KIP-848 groups
            described = None
            print(f"describe_consumer_groups on a KIP-848 group: {e!r}")
        e2e_report(
            target="kafka",
            protocol="consumer(KIP-848)",
            plan_generation=plan.generation,
            adopted_s=round(took, 1),
            described=described == want if described is not None else None,
        )
        if described is not None:
            assert described == want
        if real.kafka is not None:  # the brokers' assignor says it applied the plan (not a coincidence)
            logs = "".join(n.log.read_text(errors="replace") for n in real.kafka.brokers if n.log.exists())
            assert f"assigned by plan {key}@{plan.generation}" in logs
        assert overlaps(intervals(members, {})) == []
    finally:
        for m in members:
            m.stop()
