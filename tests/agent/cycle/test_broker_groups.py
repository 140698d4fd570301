"""Groups the broker assigns (issue 27 §4): no plan published, the live assignment judged against the plan the
agent would publish, the path said in /v1/plans, /v1/status, /v1/groups and the metrics."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rackplan.agent.testing import TP, FakeAdmin, GroupDesc, MemberAssignment, MemberDesc
from tests.agent.cycle.test_run import cycle, group, make_agent

#: partitions 0, 1 on broker 1 (az-a), 2, 3 on broker 2 (az-b)
TOPICS = {"t": [[1], [1], [2], [2]]}


@dataclass
class Kip848Desc(GroupDesc):
    """A KIP-848 group as confluent-kafka 2.16 describes it: its type and the broker's assignor."""

    type: str = "CONSUMER"
    partition_assignor: str = "uniform"


def crossed(gid: str, **kw: Any) -> GroupDesc:
    """The group's az-a member holds az-b's partitions and the other way round: 4 of 4 cross-rack."""
    members = [
        MemberDesc(f"{gid}-a", "c-a", "/10.0.0.1", MemberAssignment([TP("t", 2), TP("t", 3)])),
        MemberDesc(f"{gid}-b", "c-b", "/10.0.0.2", MemberAssignment([TP("t", 0), TP("t", 1)])),
    ]
    return Kip848Desc(gid, members, **kw)


#: the same members each reading their own rack's partitions: 0 of 4 cross-rack
LOCAL = [
    MemberDesc("k-a", "c-a", "/10.0.0.1", MemberAssignment([TP("t", 0), TP("t", 1)])),
    MemberDesc("k-b", "c-b", "/10.0.0.2", MemberAssignment([TP("t", 2), TP("t", 3)])),
]


def plan_keys(publisher: Any) -> set[str]:
    return {key for topic, key, _ in publisher.records if topic == "_rackplan.plans"}


def test_a_kip848_group_gets_no_plan_and_its_live_assignment_is_judged_against_the_agents() -> None:
    admin = FakeAdmin(TOPICS)
    agent, publisher, _ = make_agent(admin, [group("k"), group("c")])
    admin.groups = {"k": crossed("k"), "c": crossed("c", type="CLASSIC", partition_assignor="range")}
    r = cycle(agent)
    assert plan_keys(publisher) == {"consumer/c"}, "the classic group only: KIP-848 members ignore plans"
    assert [p.key for p in r.published] == ["consumer/c"]
    # The judgement: 4 of 4 partitions cross-rack live, 0 in the plan the agent would publish.
    firing = {ev.key: ev for ev in r.alerts if ev.status == "firing"}
    ev = firing["consumer/k"]
    assert (ev.current, ev.planned) == (1.0, 0.0)
    assert "uniform" in ev.reason and "4 of 4" in ev.reason and "would read 0 of 4" in ev.reason
    labels = {"kind": "consumer", "group": "k"}
    assert agent.metrics.get("rackplan_live_cross_rack_partitions", labels) == 4
    achievable = {
        dict(k)["group"]: v
        for k, v in agent.metrics.series("rackplan_achievable_cross_rack_partitions").items()
    }
    assert achievable == {"k": 0}, "only for the group the broker assigns"
    paths = {dict(k)["group"]: dict(k) for k in agent.metrics.series("rackplan_group_path")}
    assert paths["k"]["path"] == "kip848-broker" and paths["k"]["assignor"] == "uniform"
    assert paths["c"]["path"] == "classic-followers" and paths["c"]["assignor"] == "range"
    view = agent.status()
    shown = view.plans_json()["consumer/k"]
    assert shown == {
        "path": "kip848-broker",
        "assignor": "uniform",
        "plan_published": False,
        "live": {"cross_rack": 4, "total": 4, "unknown_rack": 0, "unknown_rack_members": []},
        "achievable": {"cross_rack": 0, "total": 4, "fraction": 0.0},
    }
    assert view.plans_json()["consumer/c"]["path"] == "classic-followers"
    assert view.plans_json()["consumer/c"]["generation"] == 1
    assert view.status_json()["groups"]["consumer/k"]["path"] == "kip848-broker"
    assert view.group_json("consumer", "k")["achievable"]["cross_rack"] == 0  # type: ignore[index]


def test_the_alert_resolves_once_the_broker_assigns_as_well_as_the_agent_would() -> None:
    admin = FakeAdmin(TOPICS)
    agent, publisher, _ = make_agent(admin, [group("k")])
    admin.groups = {"k": crossed("k")}
    assert [ev.status for ev in cycle(agent).alerts] == ["firing"]
    admin.groups = {"k": Kip848Desc("k", LOCAL, partition_assignor="range")}
    r = cycle(agent)
    assert [ev.status for ev in r.alerts] == ["resolved"]
    assert agent.status().plans_json()["consumer/k"]["assignor"] == "range"
    assert plan_keys(publisher) == set()


def test_a_kip848_group_on_the_rackplan_assignor_is_fed_plans_from_the_cycle_it_switches() -> None:
    # RackplanServerAssignor reads the plan topic and applies a plan that fits (docs/java.md): its groups get
    # plans, as classic followers do, and are judged on them.
    admin = FakeAdmin(TOPICS)
    agent, publisher, _ = make_agent(admin, [group("k")])
    admin.groups = {"k": crossed("k")}
    cycle(agent)
    assert plan_keys(publisher) == set()
    admin.groups = {"k": Kip848Desc("k", LOCAL, partition_assignor="rackplan")}
    r = cycle(agent)
    assert [p.key for p in r.published] == ["consumer/k"], (
        "no metadata change: the switch itself makes it due"
    )
    assert [ev.status for ev in r.alerts] == ["resolved"]
    shown = agent.status().plans_json()["consumer/k"]
    assert (shown["path"], shown["assignor"], shown["generation"]) == ("kip848-broker", "rackplan", 1)
    assert "plan_published" not in shown
    achievable = agent.metrics.series("rackplan_achievable_cross_rack_partitions")
    assert achievable == {}, "judged on its plan of record now"


def test_a_classic_group_that_moves_to_kip848_gets_no_further_plan_even_while_it_is_empty() -> None:
    admin = FakeAdmin(TOPICS)
    agent, publisher, _ = make_agent(admin, [group("k")])
    admin.groups = {"k": crossed("k", type="CLASSIC", partition_assignor="range")}
    cycle(agent)
    assert plan_keys(publisher) == {"consumer/k"}
    publisher.records.clear()
    admin.groups = {"k": crossed("k")}  # the rolling upgrade: group.protocol=consumer
    admin.topics = {"t": [[2], [1], [2], [2]]}  # a change that would give the group a new plan
    cycle(agent)
    assert agent.term.alerts.state("consumer/k") == "firing"  # 4 of 4 cross-rack live, 0 achievable
    admin.groups = {"k": Kip848Desc("k", [], state="EMPTY")}
    assert [ev.status for ev in cycle(agent).alerts] == ["resolved"], "nobody reads across racks any more"
    cycle(agent)
    assert plan_keys(publisher) == set()
    shown = agent.status().plans_json()["consumer/k"]
    assert shown["path"] == "unknown" and shown["plan_published"] is False
    assert shown["generation"] == 1, "the plan of record from its classic days, still shown"


def test_a_streams_app_on_the_streams_protocol_gets_no_plan() -> None:
    admin = FakeAdmin(TOPICS)
    app = {
        "application_id": "clicks",
        "group_protocol": "streams",
        "subtopologies": [{"id": "0", "source_topics": ["t"], "changelog_topics": [], "stateful": False}],
        "clients": [{"process_id": "p-1", "rack": "az-a"}, {"process_id": "p-2", "rack": "az-b"}],
    }
    classic = {k: v for k, v in app.items() if k != "group_protocol"} | {"application_id": "old"}
    agent, publisher, _ = make_agent(admin, [], streams_apps=[app, classic])
    cycle(agent)
    assert plan_keys(publisher) == {"streams/old"}, "group_protocol: classic (KIP-924) by default"
    shown = agent.status().plans_json()["streams/clicks"]
    assert shown["path"] == "streams-broker" and shown["live"] is None  # librdkafka cannot describe it
    # What the agent would publish: the very plan the same app on the classic protocol gets.
    published = agent.term.book.latest("streams/old")
    assert published is not None and shown["achievable"] == published.locality_after.as_json()
