"""Classic Kafka Streams apps judged on what their members hold (issue 24: "the same for ... Streams
clients"): described as the consumer-protocol group they are, each stream thread placed by its registered
client, in the same metrics and alert as consumer groups; KIP-1071 apps not described, and every group's
basis said."""

from __future__ import annotations

from typing import Any

from rackplan.agent.testing import TP, FakeAdmin, GroupDesc, MemberAssignment, MemberDesc
from tests.agent.cycle.test_run import cycle, make_agent

#: partitions 0, 1 on broker 1 (az-a), 2, 3 on broker 2 (az-b)
TOPICS = {"t": [[1], [1], [2], [2]]}
STREAMS = {"kind": "streams", "group": "clicks"}


def app(app_id: str = "clicks", **extra: Any) -> dict[str, Any]:
    return {
        "application_id": app_id,
        "subtopologies": [{"id": "0", "source_topics": ["t"], "changelog_topics": [], "stateful": False}],
        "clients": [{"process_id": "p-a", "rack": "az-a"}, {"process_id": "p-b", "rack": "az-b"}],
        "rack_aware": {"strategy": "min_traffic"},
        **extra,
    }


def thread(client_id: str, *partitions: int, host: str = "/10.0.9.9") -> MemberDesc:
    """A stream thread's consumer as DescribeConsumerGroups shows it: its active tasks' source partitions."""
    return MemberDesc(
        f"{client_id}-0f3e", client_id, host, MemberAssignment([TP("t", p) for p in partitions])
    )


def series(agent: Any, name: str) -> dict[str, dict[str, str]]:
    return {dict(k)["group"]: dict(k) for k in agent.metrics.series(name)}


def test_a_classic_streams_apps_live_assignment_is_judged_with_each_threads_registered_rack() -> None:
    admin = FakeAdmin(TOPICS)
    agent, _, _ = make_agent(admin, [], streams_apps=[app()])
    # p-a (az-a) holds az-b's partitions and p-b (az-b) az-a's: 4 of 4 source partitions cross-rack, while
    # the plan of record (what they should hold) reads none.
    admin.groups = {
        "clicks": GroupDesc(
            "clicks",
            [thread("p-a-StreamThread-1-consumer", 2, 3), thread("p-b-StreamThread-1-consumer", 0, 1)],
        )
    }
    r = cycle(agent)
    assert any("clicks" in ids for ids in admin.groups_described), "the app is described as its group"
    rec = agent.term.book.latest("streams/clicks")
    assert rec is not None and rec.locality_after.cross_rack == 0
    assert agent.metrics.get("rackplan_live_cross_rack_partitions", STREAMS) == 4
    assert agent.metrics.get("rackplan_live_assigned_partitions", STREAMS) == 4
    assert agent.metrics.get("rackplan_live_unknown_rack_partitions", STREAMS) == 0
    firing = {ev.key: ev for ev in r.alerts if ev.status == "firing"}
    assert firing["streams/clicks"].current == 1.0, "the alert judges the live assignment, not the plan"
    assert series(agent, "rackplan_locality_basis")["clicks"]["basis"] == "live"
    shown = agent.status().group_json("streams", "clicks")
    assert shown is not None and shown["locality_basis"] == "live"
    assert shown["live"] == {"cross_rack": 4, "total": 4, "unknown_rack": 0, "unknown_rack_members": []}

    # The members move to their own racks' partitions: the live figure follows, the alert resolves.
    admin.groups = {
        "clicks": GroupDesc(
            "clicks",
            [thread("p-a-StreamThread-1-consumer", 0, 1), thread("p-b-StreamThread-1-consumer", 2, 3)],
        )
    }
    r = cycle(agent)
    assert agent.metrics.get("rackplan_live_cross_rack_partitions", STREAMS) == 0
    assert [(ev.key, ev.status) for ev in r.alerts] == [("streams/clicks", "resolved")]


def test_a_thread_no_registration_places_is_unknown_never_local() -> None:
    admin = FakeAdmin(TOPICS)
    agent, _, buf = make_agent(admin, [], streams_apps=[app()])
    admin.groups = {
        "clicks": GroupDesc(
            "clicks",
            [thread("p-a-StreamThread-1-consumer", 2), thread("web-7-StreamThread-1-consumer", 0, 3)],
        )
    }
    cycle(agent)
    assert agent.metrics.get("rackplan_live_cross_rack_partitions", STREAMS) == 1
    assert agent.metrics.get("rackplan_live_assigned_partitions", STREAMS) == 3
    assert agent.metrics.get("rackplan_live_unknown_rack_partitions", STREAMS) == 2
    live = agent.status().group_json("streams", "clicks")["live"]  # type: ignore[index]
    assert live["unknown_rack_members"] == ["web-7-StreamThread-1-consumer-0f3e"]
    assert (
        "web-7-StreamThread-1-consumer" in buf.getvalue()
        and "process id its client.id names" in buf.getvalue()
    )


def test_kip1071_apps_are_not_described_and_every_groups_basis_is_said() -> None:
    admin = FakeAdmin(TOPICS)
    apps = [app(), app("kclicks", group_protocol="streams"), app("quiet")]
    agent, _, _ = make_agent(admin, [], streams_apps=apps)
    admin.groups = {"clicks": GroupDesc("clicks", [thread("p-a-StreamThread-1-consumer", 0, 1, 2, 3)])}
    cycle(agent)
    described = {g for ids in admin.groups_described for g in ids}
    assert "kclicks" not in described, "librdkafka cannot describe a KIP-1071 group: it is not asked"
    assert {"clicks", "quiet"} <= described
    bases = {g: s["basis"] for g, s in series(agent, "rackplan_locality_basis").items()}
    # quiet: described with no member (the fake's DEAD group): judged on its plan of record.
    assert bases == {"clicks": "live", "kclicks": "none", "quiet": "plan_of_record"}
    assert agent.metrics.get("rackplan_live_cross_rack_partitions", STREAMS) == 2
    assert agent.status().group_json("streams", "kclicks")["locality_basis"] == "none"  # type: ignore[index]


def test_when_the_brokers_cannot_describe_a_classic_app_is_judged_on_its_plan_of_record() -> None:
    admin = FakeAdmin(TOPICS)
    admin.groups = None  # DescribeGroups unsupported (librdkafka's mock cluster, an ACL)
    agent, _, _ = make_agent(admin, [], streams_apps=[app()])
    cycle(agent)
    assert series(agent, "rackplan_locality_basis")["clicks"]["basis"] == "plan_of_record"
    assert "clicks" not in series(agent, "rackplan_live_cross_rack_partitions"), "no live figure: none seen"
