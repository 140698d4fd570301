"""Java consumers follow rackplan's plans on the real cluster (issue 14; clients/java, docs/java.md).

- Classic group (cooperative, and eager): three ``RackplanConsumer`` members (``RackplanAssignor``, ``client.rack``)
  register themselves; the agent plans from the registrations and publishes; the group's actual
  assignment (DescribeGroups) equals the plan within the documented bound. Then a counted stream of
  messages runs through a member's ``kill -9`` (the group falls back to CooperativeStickyAssignor,
  the plan no longer fitting): 0 messages lost, and no partition owned by two members at any moment
  (every assignment callback is logged with its time; ownership intervals must not overlap).
- KIP-848 group: the brokers load ``RackplanServerAssignor`` (``group.consumer.assignors``, see
  integration/kafka/cluster.py); members choose it with ``group.remote.assignor=rackplan`` and register
  themselves. The agent publishes the plan; each member's ``RackplanConsumer`` bumps the group epoch, the
  brokers' assignor applies the plan: what the members hold (and DescribeConsumerGroups) equals it.
  After a reassignment that changes rack sets, the agent's next plan is adopted the same way; then, the agent
  stopped, a newer plan that swaps two partitions (which only the members' epoch bump can bring) too.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from integration.kafka.apps import KAFKA_43_LIB, JavaApp, plan_member, streams_instance
from integration.kafka.cluster import CLIENTS_JAR, KafkaCluster
from rackplan.agent.kafka.timeouts import admin_client_config, operation_timeout_s, result_timeout_s
from rackplan.agent.protocol.plans import PlanRecord, encode_value

from .conftest import RunningAgent, Target
from .test_kafka_operations import create
from .test_kafka_streams import cross_rack as streams_cross_rack

RunAgent = Callable[..., RunningAgent]
Assignment = dict[str, list[tuple[str, int]]]
RACKS = {"a": "az-a", "b": "az-b", "c": "az-c"}
#: docs/java.md: a new plan reaches a classic group within plan.poll.ms + the poll timeout + two rebalances
PLAN_BOUND_S = 15.0
#: docs/java.md: KIP-848: 2 x plan.poll.ms + three heartbeat intervals (Kafka's default: 5 s) + slack
KIP848_BOUND_S = 25.0

pytestmark = pytest.mark.skipif(not CLIENTS_JAR.exists(), reason=f"{CLIENTS_JAR} missing: run `make clients`")


#: answers that mean "ask again": the group's coordinator is loading or moving
COORDINATOR_MOVING = frozenset(
    {
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
    }
)


def live_assignment(bootstrap: str, group: str) -> Assignment:
    """client id (= the member's rackplan id) -> sorted partitions, as the coordinator reports them.

    A retriable answer (the coordinator still loading its partition of ``__consumer_offsets``, or
    moving: one CI run got COORDINATOR_LOAD_IN_PROGRESS right after a member was killed) is asked
    again for up to 20 s.
    """
    admin = AdminClient(admin_client_config({"bootstrap.servers": bootstrap}, 20))
    deadline = time.monotonic() + 20
    while True:
        try:
            desc = admin.describe_consumer_groups([group], request_timeout=operation_timeout_s(20))[
                group
            ].result(timeout=result_timeout_s(20))
            break
        except KafkaException as e:
            error = e.args[0]
            if not (error.retriable() or error.code() in COORDINATOR_MOVING) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    return {
        m.client_id: sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions)
        for m in desc.members
    }


def held(members: Iterable[JavaApp]) -> Assignment:
    """member -> what it holds now, from its own assignment callbacks."""
    out: Assignment = {}
    for app in members:
        state: set[tuple[str, int]] = set()
        for x in list(app.lines):
            tps = {(t, q) for t, q in x["partitions"]}
            if x["event"] == "assigned":
                state |= tps
            elif x["event"] in ("revoked", "lost"):
                state -= tps
        if app.lines:
            out[app.lines[0]["member"]] = sorted(state)
    return out


def plan_assignment(doc: Mapping[str, Any]) -> Assignment:
    return {m: sorted((t, p) for t, p in parts) for m, parts in doc["consumer_group"]["assignment"].items()}


def brokers_logged_plan(kafka: KafkaCluster, key: str, generation: int, timeout: float = 15) -> None:
    """The brokers' RackplanServerAssignor says the plan (not its fallback) assigned ``key``'s group (the
    members already hold it: the wait is for the broker's log file under load)."""
    line = f"assigned by plan {key}@{generation}"
    wait_until(
        lambda: any(line in n.log.read_text(errors="replace") for n in kafka.brokers if n.log.exists()),
        timeout,
        f"the brokers' log says {line!r}",
    )


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


def dump(members: Iterable[JavaApp], where: Path) -> None:
    """Every line a member printed, kept for a post-mortem (``consumed`` values left out)."""
    for m in members:
        lines = [{k: v for k, v in x.items() if k != "values"} for x in list(m.lines)]
        if lines:
            (where / f"{lines[0]['member']}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


def feed(
    bootstrap: str, topic: str, values: range, batch: int = 250, pause_s: float = 0.5
) -> threading.Thread:
    """``values`` produced in the background, ``batch`` at a time every ``pause_s`` (2,000 take about 4 s):
    a stream still in flight while a test kills something. Join the thread to wait for the last batch."""

    def run() -> None:
        for i in range(values.start, values.stop, batch):
            produce(bootstrap, topic, range(i, min(i + batch, values.stop)))
            time.sleep(pause_s)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def produce(bootstrap: str, topic: str, values: range) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for v in values:
        p.produce(topic, value=str(v).encode(), key=str(v).encode())
    assert p.flush(30) == 0


@pytest.mark.parametrize("protocol", ["classic", "eager", "classic-kafka-4.3.1"])
def test_classic_group_follows_the_plan_and_loses_nothing_through_a_kill(
    real: Target, run_agent: RunAgent, tmp_path: Path, e2e_report: Any, protocol: str
) -> None:
    """``classic``: cooperative rebalancing (RackplanAssignor withholds moving partitions for a round);
    ``eager``: Kafka revokes everything first, the plan is applied in one round;
    ``classic-kafka-4.3.1``: cooperative, the members a Kafka 4.3 application (kafka-clients 4.3.1 on the
    classpath; rackplan's jar is built against 4.4), the cluster 4.4."""
    kafka_lib = KAFKA_43_LIB if protocol.endswith("-kafka-4.3.1") else None
    protocol = protocol.removesuffix("-kafka-4.3.1")
    # Brokers 1..6 are in racks az-a, az-b, az-c, az-a, az-b, az-c: every partition has a local member.
    topic = create(real, "jf-orders", [[1 + p % 3, 1 + (p + 1) % 3] for p in range(12)])
    group = real.name("jf-classic")
    agent = run_agent(real.agent_settings([]))
    agent.wait_for(lambda r: r.ok, timeout=60)  # the agent made its topics
    names = {real.name(f"m-{r}"): rack for r, rack in RACKS.items()}
    members = [
        plan_member(
            real.bootstrap, group, n, rack, [topic], protocol, real.control_topics, tmp_path, kafka_lib
        )
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
        try:
            took = wait_until(
                lambda: live_assignment(real.bootstrap, group) == want, PLAN_BOUND_S, "plan adopted"
            )
        except AssertionError:
            tails = {m.lines[0]["member"]: m.lines[-3:] for m in members if m.lines}
            live = live_assignment(real.bootstrap, group)
            raise AssertionError(f"plan {plan.generation} {want} not adopted: live {live}; {tails}") from None

        # A reassignment that changes a partition's rack set (partition 0 from az-a + az-b to az-c only):
        # a new plan, which the group adopts the same way.
        assert real.kafka is not None, "the launcher's cluster (reassignments are ours to make)"
        real.kafka.reassign({(topic, 0): [3, 6]})
        c_member = next(n for n, rack in names.items() if rack == "az-c")
        report = agent.wait_for(
            lambda r: any(
                p.key == key
                and p.generation > plan.generation
                and [topic, 0] in p.document["consumer_group"]["assignment"].get(c_member, [])
                for p in r.published
            ),
            timeout=60,
        )
        replanned = next(p for p in report.published if p.key == key)
        want2 = plan_assignment(replanned.document)
        took_after_reassignment = wait_until(
            lambda: live_assignment(real.bootstrap, group) == want2, PLAN_BOUND_S, "new plan adopted"
        )

        # A counted stream through a kill -9: the rest of the group takes over (fallback: plan members gone).
        feeder = feed(real.bootstrap, topic, range(1000, 3000))  # in flight across the kill
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
        def fallback_reasons() -> set[str]:
            """Reasons the survivors' RackplanAssignor gave for falling back, after the kill."""
            return {
                x["reason"]
                for m in members[:2]
                for x in list(m.lines)
                if "plan_assignments" in x and x["at_ms"] > killed_at_ms and x["fallbacks"] > 0
            }

        wait_until(
            lambda: any("differ from the live members" in r for r in fallback_reasons()), 20, "fallback"
        )
        lines = [x for m in members for x in list(m.lines) if "plan_assignments" in x]
        by_plan = max(x["plan_assignments"] for x in lines)
        e2e_report(
            target="kafka",
            protocol=f"classic-{'eager' if protocol == 'eager' else 'cooperative'}",
            kafka_clients="4.3.1" if kafka_lib else "4.4.0",
            plan_generations=f"{plan.generation},{replanned.generation}",
            adopted_s=f"{took:.1f},{took_after_reassignment:.1f}",
            messages=3000,
            lost=lost,
            owned_twice=len(twice),
            plan_rebalances=by_plan,
        )
        for m in members[:2]:
            assert m.process.poll() is None, f"a member died: {m.log.read_text(errors='replace')[-1500:]}"
        versions = {x.get("kafka_version") for m in members for x in list(m.lines)}
        assert versions == {"4.3.1" if kafka_lib else "4.4.0"}, versions
        assert by_plan >= 1, "the leader assigned by the plan"
        assert lost == 0
        assert twice == [], twice
    finally:
        dump(members, tmp_path)
        for m in members:
            m.stop()


def test_kip848_group_gets_its_plans_from_the_brokers_assignor(
    real: Target, run_agent: RunAgent, tmp_path: Path, e2e_report: Any
) -> None:
    # Brokers 1..6 are in racks az-a, az-b, az-c, az-a, az-b, az-c: two partitions per rack, RF 1,
    # so the reassignment below must move partitions in the plan.
    topic = create(real, "jf-kip848", [[1], [4], [2], [5], [3], [6]])
    group = real.name("jf-kip848")
    agent = run_agent(real.agent_settings([]))
    agent.wait_for(lambda r: r.ok, timeout=60)
    names = {real.name(f"k-{r}"): rack for r, rack in RACKS.items()}
    key = f"consumer/{group}"
    members: list[JavaApp] = []

    def owned() -> Assignment:
        return held(members)

    def adopted(plan: PlanRecord, before: Assignment, only_by_plan: bool = False) -> float:
        """Seconds until the members hold ``plan``.  With ``only_by_plan`` (an assignment the rack-aware
        fallback never gives) the brokers' log must also say the plan assigned it; for the others the
        fallback may reach the same assignment first while the group forms or after a reassignment
        (seen in a CI run under load), and then nothing tells the two apart."""
        want = plan_assignment(plan.document)
        took = wait_until(
            lambda: owned() == want, KIP848_BOUND_S, f"KIP-848 members hold plan {plan.generation}"
        )
        kafka = real.kafka
        if kafka is not None and only_by_plan and before != want:
            brokers_logged_plan(kafka, key, plan.generation)
        return took

    try:
        for n, rack in names.items():
            members.append(
                plan_member(
                    real.bootstrap, group, n, rack, [topic], "consumer", real.control_topics, tmp_path
                )
            )
        # The members joined (rack-aware uniform) and registered; the agent plans for all three.
        first = next(
            p
            for p in agent.wait_for(
                lambda r: any(
                    p.key == key and set(p.document["consumer_group"]["assignment"]) == set(names)
                    for p in r.published
                ),
                timeout=60,
            ).published
            if p.key == key
        )
        took_first = adopted(first, owned())
        described = live_assignment(real.bootstrap, group)
        assert described == plan_assignment(first.document)

        # A reassignment that changes rack sets (partition 0 to az-b, 2 to az-a): a new plan (new
        # cluster fingerprint) that moves both, adopted the same way.
        assert real.kafka is not None, "the launcher's cluster (reassignments are ours to make)"
        real.kafka.reassign({(topic, 0): [2], (topic, 2): [1]})
        second = next(
            p
            for p in agent.wait_for(
                lambda r: any(
                    p.key == key and p.generation > first.generation and p.locality_after.cross_rack == 0
                    for p in r.published
                ),
                timeout=60,
            ).published
            if p.key == key and p.locality_after.cross_rack == 0
        )
        took_second = adopted(second, owned())
        assert plan_assignment(second.document) != plan_assignment(first.document), "the plan moved"
        # The reassignment itself bumps the epoch (the coordinator sees new racks) and the rack-aware
        # fallback may then give what the plan gives. A plan only RackplanConsumer's bump can bring: the
        # agent stops (nothing else changes) and a newer plan swaps two partitions between two members.
        agent.stop()
        third = swapped(second, second.generation + 100)
        publish_plan(real, third)
        before = owned()
        assert before != plan_assignment(third.document)
        took_third = adopted(third, before, only_by_plan=True)
        plan_topics = {x["partitions"][0][0] for m in members for x in list(m.lines) if x["partitions"]}
        e2e_report(
            target="kafka",
            protocol="consumer(KIP-848)",
            plan_generations=f"{first.generation},{second.generation},{third.generation}",
            adopted_s=f"{took_first:.1f},{took_second:.1f},{took_third:.1f}",
            moved=second.moved,
        )
        assert plan_topics == {topic}, "the plan topic (epoch bump) is never assigned"
        assert overlaps(intervals(members, {})) == []
    finally:
        dump(members, tmp_path)
        for m in members:
            m.stop()


def swapped(plan: PlanRecord, generation: int) -> PlanRecord:
    """``plan`` as a newer generation in which the first two members trade their first partitions."""
    doc = json.loads(json.dumps(plan.document))
    a = doc["consumer_group"]["assignment"]
    m1, m2 = sorted(m for m in a if a[m])[:2]
    a[m1][0], a[m2][0] = a[m2][0], a[m1][0]
    return dataclasses.replace(plan, generation=generation, document=doc)


def publish_plan(real: Target, plan: PlanRecord) -> None:
    """``plan`` on the plan topic, as a test's own record (the agent writes in transactions; readers read both)."""
    p = Producer({"bootstrap.servers": real.bootstrap, "acks": "all"})
    p.produce(real.control_topics["plan_topic"], key=plan.key.encode(), value=encode_value(plan))
    assert p.flush(30) == 0


def process_id(state_dir: Path) -> str:
    """The Streams process id (a UUID) Kafka Streams keeps in its state directory."""
    deadline = time.monotonic() + 60
    while True:
        for f in state_dir.rglob("kafka-streams-process-metadata"):
            doc = json.loads(f.read_text())
            return str(doc["processId"])
        assert time.monotonic() < deadline, f"no process metadata under {state_dir}"
        time.sleep(0.5)


def test_streams_app_follows_its_plan_with_the_task_assignor(
    real: Target, run_agent: RunAgent, tmp_path: Path, e2e_report: Any
) -> None:
    """Three Streams instances (a repartition, a state store, one standby) with ``RackplanTaskAssignor``:
    Kafka's HighAvailabilityTaskAssignor first (no plan), then the agent's plan, picked up by a follow-up
    rebalance."""
    app_id = real.name("jf-clicks")
    source = create(real, "jf-clicks-in", [[1], [2], [3], [4], [5], [6]])
    p = Producer({"bootstrap.servers": real.bootstrap})
    for i in range(600):
        p.produce(source, key=f"k{i}", value=f"v{i % 37}", partition=i % 6)
    assert p.flush(30) == 0
    plan_topic = real.control_topics["plan_topic"]
    racks = {f"s-{r}": f"az-{r}" for r in "abc"}
    apps: list[JavaApp] = []

    def placement() -> dict[str, dict[str, list[str]]] | None:
        last = {a.lines[-1]["process"]: a.lines[-1] for a in apps if a.lines}
        if len(last) != len(apps) or any(v["state"] != "RUNNING" for v in last.values()):
            return None
        return {k: {"active": sorted(v["active"]), "standby": sorted(v["standby"])} for k, v in last.items()}

    try:
        for name, rack in racks.items():
            apps.append(
                streams_instance(
                    real.bootstrap,
                    app_id,
                    name,
                    rack,
                    source,
                    tmp_path,
                    plan_topic=plan_topic,
                    registrations_topic=real.control_topics["registrations_topic"],
                )
            )
        tasks = sorted(f"{s}_{q}" for s in (0, 1) for q in range(6))

        def settled() -> bool:
            now = placement()
            return now is not None and sorted(t for v in now.values() for t in v["active"]) == tasks

        wait_until(settled, 120, "the app runs every task (fallback: no plan yet)")
        # The fallback is Kafka's own default assignment, its HighAvailabilityTaskAssignor.
        assert {x.get("fallback") for a in apps for x in list(a.lines)} - {None, ""} == {
            "HighAvailabilityTaskAssignor"
        }
        before = placement()
        assert before is not None
        pids = {name: process_id(tmp_path / f"state-{name}") for name in racks}
        name_of = {pid: name for name, pid in pids.items()}
        app_doc = {
            "application_id": app_id,
            "subtopologies": [
                {"id": "0", "source_topics": [source], "changelog_topics": [], "stateful": False},
                {
                    "id": "1",
                    "source_topics": [f"{app_id}-by-value-repartition"],
                    "changelog_topics": [f"{app_id}-counts-changelog"],
                    "stateful": True,
                },
            ],
            "clients": [{"process_id": pids[n], "rack": r, "threads": 1} for n, r in racks.items()],
            "num_standby_replicas": 1,
            "rack_aware": {"strategy": "balance_subtopology"},
            "assignor": "high-availability",
        }
        agent = run_agent(real.agent_settings([], {"streams_apps": [app_doc]}))
        key = f"streams/{app_id}"
        plan = next(
            x
            for x in agent.wait_for(lambda r: any(x.key == key for x in r.published), timeout=60).published
            if x.key == key
        )
        want = {
            name_of[pid]: {"active": sorted(t["active"]), "standby": sorted(t["standby"] + t["warmup"])}
            for pid, t in plan.document["streams_app"]["assignment"].items()
        }
        took = wait_until(lambda: placement() == want, 60, "the app's tasks are where the plan puts them")
        # The leader's RackplanTaskAssignor assigned by the plan (not Kafka's assignor by coincidence).
        wait_until(
            lambda: any(a.last is not None and a.last.get("plan_assignments", 0) > 0 for a in apps),
            15,
            "an assignment by the plan",
        )
        # Cross-rack (active, standby) task partitions of Kafka's placement and of the plan's, as the
        # contract counts them, on the brokers' replicas now.
        md = AdminClient({"bootstrap.servers": real.bootstrap}).list_topics(timeout=10).topics
        repartition, changelog = f"{app_id}-by-value-repartition", f"{app_id}-counts-changelog"
        replicas = {
            t: [list(md[t].partitions[q].replicas) for q in sorted(md[t].partitions)]
            for t in (source, repartition, changelog)
        }

        def task_partitions(task: str, standby: bool) -> list[tuple[str, int]]:
            sub, q = task.split("_")
            if sub == "0":
                return [] if standby else [(source, int(q))]
            return ([] if standby else [(repartition, int(q))]) + [(changelog, int(q))]

        x_before = streams_cross_rack(before, racks, task_partitions, replicas)
        x_after = streams_cross_rack(want, racks, task_partitions, replicas)
        e2e_report(
            target="kafka",
            app="streams (3 instances, 1 standby)",
            plan_generation=plan.generation,
            adopted_s=round(took, 1),
            kafka_cross_rack_active_standby=x_before,
            plan_cross_rack_active_standby=x_after,
        )
        assert x_after[0] <= x_before[0], "the plan's actives read no more cross-rack than Kafka's placement"
        for tasks_of in want.values():
            assert not set(tasks_of["active"]) & set(tasks_of["standby"])
    finally:
        for a in apps:
            a.stop()
