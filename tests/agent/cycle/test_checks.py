"""Issue 24 items 1-3 with fake clients: what operators rely on must be true, and said where they look.

1. A live member matched to its registration by client.id (a Java ``RackplanConsumer`` with
   ``rackplan.member.id`` joins as ``<client.id>-<uuid>``) is judged with its registered rack; a member
   nobody can place is counted as unknown, never as local.
2. A member rack that no broker has is planned as registered, but said: plan reason, log, metric,
   /v1/groups, with the nearest rack names the brokers have.
3. One member's subscription to a missing topic no longer skips the group's plan: the subscription is
   left out, the member named (plan reason, log, metric, /v1/groups), and the topic planned once it exists.
"""

from __future__ import annotations

import io
import json
from typing import Any

from rackplan.agent.groups.live import LiveLocality
from rackplan.agent.runtime.loop import Agent
from rackplan.agent.testing import TP, FakeAdmin, GroupDesc, MemberAssignment, MemberDesc, Node
from tests.agent.cycle.test_run import _restore_logging, cycle, group, make_agent

__all__ = ["_restore_logging"]  # the autouse fixture, imported so it runs here too

LAB = {"kind": "consumer", "group": "g"}
#: partitions 0-3 in az-a (broker 1), 4-5 in az-b (broker 2)
TOPIC = {"t": [[1], [1], [1], [1], [2], [2]]}


def java(member_id: str, client_id: str, parts: list[int]) -> MemberDesc:
    return MemberDesc(member_id, client_id, "/10.0.0.9", MemberAssignment([TP("t", p) for p in parts]))


def events(buf: io.StringIO, name: str) -> list[dict[str, Any]]:
    return [e for line in buf.getvalue().splitlines() if (e := json.loads(line))["event"] == name]


def groups_json(agent: Agent, key: str) -> dict[str, Any]:
    (g,) = [g for g in agent.status().groups_json() if g["key"] == key]
    return g


def test_java_members_are_judged_with_their_registered_racks() -> None:
    # Members g-a (az-a) and g-b (az-b), as RackplanConsumer registers them; live, Kafka named them
    # "<client.id>-<uuid>". g-a reads 4 and 5 (az-b's), g-b reads 1-3 (az-a's): 5 of 6 cross-rack.
    # Before the fix: no member matched, both counted as rackless, hence local: 0 and alert ok.
    admin = FakeAdmin(dict(TOPIC))
    agent, _, _ = make_agent(admin, [group("g")])
    admin.groups = {
        "g": GroupDesc("g", [java("g-a-1d9b4c0e", "g-a", [0, 4, 5]), java("g-b-77e0aa13", "g-b", [1, 2, 3])])
    }
    r = cycle(agent)
    assert r.live["consumer/g"] == LiveLocality(cross_rack=5, total=6)
    assert agent.metrics.get("rackplan_live_cross_rack_partitions", LAB) == 5
    assert agent.metrics.get("rackplan_live_unknown_rack_partitions", LAB) == 0
    (ev,) = r.alerts
    assert (ev.key, ev.status, ev.current) == ("consumer/g", "firing", 5 / 6)
    assert agent.term.alerts.state("consumer/g") == "firing"


def test_a_live_member_of_unknown_rack_is_reported_unknown_never_local() -> None:
    admin = FakeAdmin(dict(TOPIC))
    agent, _, buf = make_agent(admin, [group("g")])
    # g-a reads 0, 4 (one cross-rack); a member nobody registered nor maps reads 1, 2, 3, 5
    admin.groups = {"g": GroupDesc("g", [java("g-a-1d9b", "g-a", [0, 4]), java("x-5f3e", "x", [1, 2, 3, 5])])}
    r = cycle(agent)
    assert r.live["consumer/g"] == LiveLocality(
        cross_rack=1, total=6, unknown_rack=4, unknown_members=("x-5f3e",)
    )
    assert agent.metrics.get("rackplan_live_cross_rack_partitions", LAB) == 1
    assert agent.metrics.get("rackplan_live_assigned_partitions", LAB) == 6
    assert agent.metrics.get("rackplan_live_unknown_rack_partitions", LAB) == 4
    # judged on what is known: 1 of 2 cross-rack, above the 0.25 threshold
    assert [(e.status, e.current) for e in r.alerts] == [("firing", 0.5)]
    live = groups_json(agent, "consumer/g")["live"]
    assert live == {"cross_rack": 1, "total": 6, "unknown_rack": 4, "unknown_rack_members": ["x-5f3e"]}
    cycle(agent)
    (logged,) = events(buf, "live members of unknown rack; their partitions are not judged")  # once
    assert logged["members"] == [{"member_id": "x-5f3e", "client_id": "x", "host": "10.0.0.9"}]
    assert logged["partitions"] == 4


def test_a_member_rack_no_broker_has_is_said_with_the_nearest_rack_names() -> None:
    # AZ names against AZ ids: the brokers say use1-az1/use1-az2/use1-az4, one member says us-east-1a.
    nodes = [Node(1, "use1-az1"), Node(2, "use1-az2"), Node(3, "use1-az4")]
    admin = FakeAdmin({"t": [[1], [2], [3], [1]]}, nodes=nodes)
    g = {
        "group_id": "g",
        "assignor": "range",
        "members": [
            {"member_id": "ok", "rack": "use1-az1", "topics": ["t"]},
            {"member_id": "typo", "rack": "use1-az9", "topics": ["t"]},
            {"member_id": "names", "rack": "us-east-1a", "topics": ["t"]},
        ],
    }
    agent, _, buf = make_agent(admin, [g])
    r = cycle(agent)
    (plan,) = r.published  # planned as registered
    assert plan.reason.startswith("initial plan; ")
    assert "member 'typo' has rack 'use1-az9', which no broker has (nearest: 'use1-az1'" in plan.reason
    assert "member 'names' has rack 'us-east-1a', which no broker has" in plan.reason
    assert agent.metrics.get("rackplan_member_racks_unknown", LAB) == 2
    shown = groups_json(agent, "consumer/g")["unknown_member_racks"]
    assert [m["member"] for m in shown] == ["names", "typo"]
    assert shown[1]["nearest_known_racks"][0] == "use1-az1" and len(shown[1]["nearest_known_racks"]) == 3
    cycle(agent)
    (logged,) = events(buf, "member rack matches no broker")
    assert logged["broker_racks"] == ["use1-az1", "use1-az2", "use1-az4"]
    assert [m["rack"] for m in logged["members"]] == ["us-east-1a", "use1-az9"]


def test_one_members_topic_typo_does_not_skip_the_groups_plan() -> None:
    admin = FakeAdmin({"orders": [[1], [2], [1], [2]]})
    g = {
        "group_id": "g",
        "assignor": "range",
        "members": [
            {"member_id": "a", "rack": "az-a", "topics": ["orders"]},
            {"member_id": "b", "rack": "az-b", "topics": ["orders", "ordrs"]},
        ],
    }
    agent, _, buf = make_agent(admin, [g])
    r = cycle(agent)
    assert r.skipped == {}
    (plan,) = r.published  # before the fix: none, "unknown topic 'ordrs'" for the whole group
    assignment = plan.document["consumer_group"]["assignment"]
    assert sorted(tp for parts in assignment.values() for tp in parts) == [["orders", p] for p in range(4)]
    assert assignment["b"]  # the member with the typo still gets its share of what exists
    assert "member 'b' subscribes to unknown topic 'ordrs', left out of this plan (nearest: 'orders')" in (
        plan.reason
    )
    assert agent.metrics.get("rackplan_unknown_topic_subscriptions", LAB) == 1
    assert groups_json(agent, "consumer/g")["unknown_topic_subscriptions"] == [
        {"member": "b", "topic": "ordrs", "nearest_topics": ["orders"]}
    ]
    cycle(agent)
    (logged,) = events(buf, "subscription to an unknown topic left out of the plan")
    assert logged["subscriptions"] == [{"member": "b", "topic": "ordrs", "nearest_topics": ["orders"]}]
    # The topic is created: planned again with it, and nothing is reported any more.
    admin.topics = {"orders": [[1], [2], [1], [2]], "ordrs": [[1], [2]]}
    r = cycle(agent)
    (plan,) = r.published
    assert ["ordrs", 0] in [
        tp for parts in plan.document["consumer_group"]["assignment"].values() for tp in parts
    ]
    assert plan.reason == "topics added: ordrs"  # nothing left out any more
    assert agent.metrics.get("rackplan_unknown_topic_subscriptions", LAB) == 0
    assert groups_json(agent, "consumer/g")["unknown_topic_subscriptions"] == []


def test_a_group_none_of_whose_topics_exists_is_still_skipped_with_the_topic_named() -> None:
    admin = FakeAdmin({"orders": [[1], [2]]})
    g = {"group_id": "g", "members": [{"member_id": "a", "rack": "az-a", "topics": ["ordrs"]}]}
    agent, _, _ = make_agent(admin, [g])
    r = cycle(agent)
    assert r.published == [] and "no subscribed topic exists ('ordrs')" in r.skipped["consumer/g"]


def test_a_plans_reason_names_a_few_findings_and_v1_groups_all() -> None:
    admin = FakeAdmin({"t": [[1], [2]]})
    members = [{"member_id": f"m-{i}", "rack": f"zone-{i}", "topics": ["t"]} for i in range(7)]
    agent, _, _ = make_agent(admin, [{"group_id": "g", "assignor": "range", "members": members}])
    (plan,) = cycle(agent).published
    assert plan.reason.count("which no broker has") == 5 and plan.reason.endswith("; +2 more (/v1/groups)")
    assert len(groups_json(agent, "consumer/g")["unknown_member_racks"]) == 7
    assert agent.metrics.get("rackplan_member_racks_unknown", LAB) == 7
