"""A classic Kafka Streams app's live assignment judged on the real cluster (issue 24: "the same for ...
Streams clients"), next to a KIP-1071 app that cannot be.

One instance (``client.id`` ``p-c``, rack az-c) of the Streams app of integration/kafka/apps (a
repartition, a store; Kafka's own HighAvailabilityTaskAssignor, no rackplan client) reads a source
topic whose replicas are all in az-c's absence (brokers 1 and 4, az-a): every source partition it holds is
read across racks. The agent's settings list the app with its one client (process id ``p-c``), as an
operator would. DescribeConsumerGroups (confluent-kafka 2.16) describes the app as the consumer-protocol
group it is: one member per stream thread, ``client.id`` ``p-c-StreamThread-1-consumer``, holding its
active tasks' source partitions. The agent must place that member in az-c by its registered client and
count ``rackplan_live_cross_rack_partitions{kind="streams"}`` as the test counts from the same description
and the topics' replica racks; before this change the app was never described and had no live figure.
Beside it, one instance of the same app on ``group.protocol=streams`` (KIP-1071): the agent does not
describe it and says its locality has no basis (``none``), and the test records what DescribeConsumerGroups
itself answers for such a group. A second test runs the app with its own ``client.id`` registering itself
through RackplanTaskAssignor (no settings entry): its member is known by the registered
``consumer_client_ids`` alone.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from integration.kafka.apps import JavaApp, streams_group_instance, streams_instance
from integration.kafka.cluster import CLIENTS_JAR
from rackplan.agent.groups.membership import RealGroup
from rackplan.agent.runtime.loop import CycleReport

from .conftest import RunningAgent, Target
from .test_kafka_operations import create

RunAgent = Callable[..., RunningAgent]
#: brokers 1..6 are in racks az-a, az-b, az-c, az-a, az-b, az-c
BROKER_RACK = {b: f"az-{'abc'[(b - 1) % 3]}" for b in range(1, 7)}
PARTITIONS = 4

pytestmark = pytest.mark.skipif(not CLIENTS_JAR.exists(), reason=f"{CLIENTS_JAR} missing: run `make clients`")


def app_entry(app_id: str, source: str, process: str, rack: str, **extra: Any) -> dict[str, Any]:
    """The app as a ``streams_apps`` settings entry (its topology as integration/kafka/apps builds it)."""
    return {
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
        "clients": [{"process_id": process, "rack": rack, "threads": 1}],
        **extra,
    }


def watched(agent: RunningAgent, app_id: str) -> dict[int, tuple[RealGroup | None, float, float, str]]:
    """Per cycle report (by id): the app's group as the agent described it in that cycle, its live gauges
    and its locality basis then (read on the agent's thread at the end of the cycle)."""
    labels = {"kind": "streams", "group": app_id}
    metrics = agent.agent.metrics

    def read() -> tuple[RealGroup | None, float, float, str]:
        g = agent.agent.term.groups.get(f"streams/{app_id}")
        return (
            agent.agent.term.real_groups.get(app_id),
            metrics.get("rackplan_live_cross_rack_partitions", labels),
            metrics.get("rackplan_live_unknown_rack_partitions", labels),
            str(getattr(g, "basis", "")),
        )

    return agent.each_cycle(read)


def test_a_classic_streams_apps_live_cross_rack_partitions_are_counted_and_kip1071_is_said_unseen(
    real: Target, run_agent: RunAgent, tmp_path: Path, e2e_report: Any
) -> None:
    replicas = [[1], [4]] * (PARTITIONS // 2)  # az-a only: nothing in az-c
    source = create(real, "sl-in", replicas)
    app_id, kip_id = real.name("sl-clicks"), real.name("sl-kclicks")
    settings = real.agent_settings(
        [],
        {
            "streams_apps": [
                app_entry(app_id, source, "p-c", "az-c"),
                app_entry(kip_id, source, "k-c", "az-c", group_protocol="streams"),
            ]
        },
    )
    agent = run_agent(settings)
    agent.wait_for(lambda r: r.ok, timeout=60)
    seen = watched(agent, app_id)
    key = f"streams/{app_id}"
    apps: list[JavaApp] = []
    try:
        t0 = time.monotonic()
        apps.append(streams_instance(real.bootstrap, app_id, "p-c", "az-c", source, tmp_path, standbys=0))
        apps.append(streams_group_instance(real.bootstrap, kip_id, "k-c", "az-c", source, tmp_path, None, 0))

        # The agent's cycle that described the app with every source partition held (the instance has all
        # of both sub-topologies' tasks once its group is stable; before that it may hold fewer).
        # A classic group described mid-rebalance shows no protocol (assignor "") while its members still
        # hold their partitions: wait for a cycle that saw it stable, as the assertions below describe it.
        def settled(r: CycleReport) -> bool:
            group = seen.get(id(r), (None,))[0]
            whole = key in r.live and r.live[key].total == 2 * PARTITIONS
            return whole and group is not None and group.assignor == "stream"

        judged = agent.wait_for(settled, timeout=90)
        described, cross_gauge, unknown_gauge, basis = seen[id(judged)]
        assert described is not None, "the app was described as its consumer-protocol group"
        assert [m.client_id for m in described.members] == ["p-c-StreamThread-1-consumer"], described
        assert described.type == "CLASSIC" and described.assignor == "stream", (
            described.type,
            described.assignor,
        )
        topics = AdminClient({"bootstrap.servers": real.bootstrap}).list_topics(timeout=10).topics
        # The truth, from that description and the topics alone: the member is p-c's thread, in az-c.
        truth = sum(
            1
            for m in described.members
            for t, p in m.assignment
            if "az-c" not in {BROKER_RACK[b] for b in topics[t].partitions[p].replicas}
        )
        held = {t for m in described.members for t, _ in m.assignment}
        assert held == {source, f"{app_id}-by-value-repartition"}, "source partitions only: no changelog"
        assert truth >= PARTITIONS, "every partition of the source topic is read from az-a"
        live = judged.live[key]
        assert (live.cross_rack, live.total, live.unknown_rack) == (truth, 2 * PARTITIONS, 0)
        assert (cross_gauge, unknown_gauge, basis) == (truth, 0, "live")
        shown = agent.agent.status().group_json("streams", app_id)
        assert shown is not None and shown["live"]["cross_rack"] == truth
        judged_s = time.monotonic() - t0

        # KIP-1071: not described by the agent (librdkafka has no StreamsGroupDescribe), its basis "none".
        apps[1].wait_for(lambda line: line.get("state") == "RUNNING", 60, "the KIP-1071 instance runs")
        assert kip_id not in agent.agent.term.real_groups
        bases = {
            dict(k)["group"]: dict(k)["basis"] for k in agent.agent.metrics.series("rackplan_locality_basis")
        }
        assert bases[kip_id] == "none", bases
        # What DescribeConsumerGroups answers for a running KIP-1071 group: no error, but a dead, empty classic
        # group (confluent-kafka 2.16 on Kafka 4.4), indistinguishable from a group that does not exist.
        admin = AdminClient({"bootstrap.servers": real.bootstrap})  # kept referenced until answered
        d = admin.describe_consumer_groups([kip_id], request_timeout=20)[kip_id].result(timeout=30)
        kip_answer = f"state {d.state.name}, type {d.type.name}, members {len(d.members or [])}"
        assert kip_answer == "state DEAD, type CLASSIC, members 0", kip_answer
        e2e_report(
            target="kafka",
            live_cross_rack=truth,
            live_total=live.total,
            judged_after_s=round(judged_s, 1),
            kip1071_describe=kip_answer,
        )
    finally:
        for i, a in enumerate(apps):  # every line each instance printed, for a post-mortem
            (tmp_path / f"app-{i}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in list(a.lines)))
            a.stop()


def registered_clients(agent: RunningAgent, key: str) -> dict[int, list[dict[str, Any]]]:
    """Per cycle report (by id): the clients of ``key``'s registration the agent judged that cycle with."""

    def read() -> list[dict[str, Any]]:
        reg = next((x for x in agent.agent.term.regs if x.key == key), None)
        return [dict(c) for c in (reg.spec.get("clients") or [])] if reg is not None else []

    return agent.each_cycle(read)


def test_an_app_with_its_own_client_id_registered_by_rackplans_task_assignor_is_judged_with_its_racks(
    real: Target, run_agent: RunAgent, tmp_path: Path, e2e_report: Any
) -> None:
    """The app sets ``client.id`` ``web-c`` and registers through RackplanTaskAssignor, so its registered
    process id is Streams' UUID, which no member's client.id carries: the member is known only by the
    ``consumer_client_ids`` the leader registers (before them, every partition it held was unknown)."""
    replicas = [[1], [4]] * (PARTITIONS // 2)  # az-a only: nothing in az-c
    source = create(real, "sj-in", replicas)
    app_id = real.name("sj-clicks")
    topics = real.control_topics
    agent = run_agent(real.agent_settings([]))  # no streams_apps: the app registers itself
    agent.wait_for(lambda r: r.ok, timeout=60)
    key = f"streams/{app_id}"
    seen = watched(agent, app_id)
    clients = registered_clients(agent, key)
    app: JavaApp | None = None
    try:
        t0 = time.monotonic()
        app = streams_instance(
            real.bootstrap,
            app_id,
            "web-c",
            "az-c",
            source,
            tmp_path,
            standbys=0,
            plan_topic=topics["plan_topic"],
            registrations_topic=topics["registrations_topic"],
        )

        # A cycle that described the stable group with every source partition held and judged every member
        # by its registration. A member that rejoined after the leader's last registration (a new member
        # id) is unknown until the leader registers again, so the wait is for such a cycle, not the first.
        def judged_by_registration(r: CycleReport) -> bool:
            group = seen.get(id(r), (None,))[0]
            live = r.live.get(key)
            whole = live is not None and live.total == 2 * PARTITIONS
            stable = group is not None and group.assignor == "stream"
            return whole and stable and live is not None and live.unknown_rack == 0

        judged = agent.wait_for(judged_by_registration, timeout=60)
        described, cross_gauge, unknown_gauge, basis = seen[id(judged)]
        assert described is not None
        assert [m.client_id for m in described.members] == ["web-c-StreamThread-1-consumer"], described
        (client,) = clients[id(judged)]
        pid = str(client["process_id"])
        assert pid not in described.members[0].client_id, "the process id is Streams' UUID, not in client.id"
        ids = client["consumer_client_ids"]
        assert ids == sorted(ids) and described.members[0].member_id in ids, (ids, described.members)
        assert client["rack"] == "az-c"
        topic_meta = AdminClient({"bootstrap.servers": real.bootstrap}).list_topics(timeout=10).topics
        truth = sum(
            1
            for m in described.members
            for t, p in m.assignment
            if "az-c" not in {BROKER_RACK[b] for b in topic_meta[t].partitions[p].replicas}
        )
        assert truth >= PARTITIONS, "every partition of the source topic is read from az-a"
        live = judged.live[key]
        assert (live.cross_rack, live.total, live.unknown_rack) == (truth, 2 * PARTITIONS, 0)
        assert (cross_gauge, unknown_gauge, basis) == (truth, 0, "live")
        e2e_report(
            target="kafka",
            live_cross_rack=truth,
            live_total=live.total,
            registered_consumer_ids=ids,
            judged_after_s=round(time.monotonic() - t0, 1),
        )
    finally:
        if app is not None:
            (tmp_path / "app-web-c.jsonl").write_text("".join(json.dumps(x) + "\n" for x in list(app.lines)))
            app.stop()
