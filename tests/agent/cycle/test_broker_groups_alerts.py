"""Groups the broker assigns: when their alert resolves, on which snapshot their live assignment is judged,
and which of them are described at all (docs/agent.md, "Groups the broker assigns").

Each test here failed before its fix: an alert that never resolved once no plan could be made, a metadata
flap the debounce had not confirmed paging a KIP-848 group, a KIP-1071 app judged on the consumer group of
its name, live figures left at their last value once nobody held a partition."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError

from rackplan.agent.runtime.loop import Agent
from rackplan.agent.testing import FakeAdmin, MemberAssignment, MemberDesc, kafka_error
from tests.agent.cycle.test_broker_groups import LOCAL, TOPICS, Kip848Desc, crossed
from tests.agent.cycle.test_run import cycle, group, make_agent

LIVE_METRICS = (
    "rackplan_live_cross_rack_partitions",
    "rackplan_live_assigned_partitions",
    "rackplan_live_unknown_rack_partitions",
)


def statuses(events: Any) -> list[tuple[str, str]]:
    return [(ev.key, ev.status) for ev in events]


def live_series(agent: Agent, name: str) -> dict[tuple[str, str], float]:
    """``name``'s series by (kind, group)."""
    return {(dict(k)["kind"], dict(k)["group"]): v for k, v in agent.metrics.series(name).items()}


def test_a_discovered_kip848_group_described_empty_resolves_though_no_plan_can_be_made() -> None:
    # The discovered roll-out: `members: []`, the members' racks from rack_mapping. Once the group is
    # described empty, no plan can be made ("no members registered or discovered"): nobody reads across
    # racks, so the alert resolves all the same (it stayed firing for good).
    admin = FakeAdmin(TOPICS, groups={"k": crossed("k")})  # described from the start: its members discovered
    rollout = {"group_id": "k", "assignor": "range", "members": [], "topics": ["t"]}
    rules = [{"host": "10.0.0.1/32", "rack": "az-a"}, {"host": "10.0.0.2/32", "rack": "az-b"}]
    agent, _, _ = make_agent(admin, [rollout], rack_mapping=rules)
    assert statuses(cycle(agent).alerts) == [("consumer/k", "firing")]
    admin.groups = {"k": Kip848Desc("k", [], state="EMPTY")}
    r = cycle(agent)
    assert "no members registered or discovered" in r.skipped["consumer/k"]
    assert agent.term.group("consumer/k").achievable is None
    assert statuses(r.alerts) == [("consumer/k", "resolved")]
    assert r.alerts[0].current == 0.0
    assert cycle(agent).alerts == [] and agent.term.alerts.state("consumer/k") == "ok"


def test_a_kip848_group_whose_topic_is_deleted_resolves_while_its_members_stay() -> None:
    admin = FakeAdmin(TOPICS)
    agent, _, _ = make_agent(admin, [group("k")])
    admin.groups = {"k": crossed("k")}
    assert statuses(cycle(agent).alerts) == [("consumer/k", "firing")]
    admin.topics = {"other": [[1]]}  # t deleted; the members stay, holding nothing
    idle = [MemberDesc(m.member_id, m.client_id, m.host, MemberAssignment([])) for m in crossed("k").members]
    admin.groups = {"k": Kip848Desc("k", idle)}
    r = cycle(agent)
    assert r.confirmed and agent.term.group("consumer/k").achievable is None  # no plan without its topic
    assert statuses(r.alerts) == [("consumer/k", "resolved")]
    assert agent.term.alerts.state("consumer/k") == "ok"


def test_a_kip848_group_is_not_paged_by_a_metadata_flap_the_debounce_has_not_confirmed() -> None:
    # One poll shows t's replicas in az-c, the next one shows them back: never confirmed, so the plans are not
    # touched, and neither group is judged on it: the classic one never was, the KIP-848 one fired and resolved.
    admin = FakeAdmin(TOPICS)
    agent, _, _ = make_agent(admin, [group("k"), group("c")], change_persist_polls=3)
    admin.groups = {"k": Kip848Desc("k", LOCAL), "c": Kip848Desc("c", LOCAL, type="CLASSIC")}
    assert cycle(agent).alerts == []
    admin.topics = {"t": [[3], [3], [3], [3]]}
    flapped = cycle(agent)
    assert flapped.change is not None and not flapped.confirmed
    assert flapped.alerts == []
    live = live_series(agent, "rackplan_live_cross_rack_partitions")
    assert live == {("consumer", "k"): 0, ("consumer", "c"): 0}, "counted under the confirmed snapshot"
    assert agent.status().plans_json()["consumer/k"]["live"]["cross_rack"] == 0
    admin.topics = TOPICS
    assert cycle(agent).alerts == []
    assert agent.term.alerts.state("consumer/k") == "ok"
    # The same move seen in three polls in a row is confirmed, and both groups are judged on it alike: no plan
    # reads az-c's partitions from az-a and az-b, so each is reported unfixable.
    admin.topics = {"t": [[3], [3], [3], [3]]}
    assert cycle(agent).alerts == [] and cycle(agent).alerts == []
    r = cycle(agent)
    assert r.confirmed
    assert sorted(statuses(r.alerts)) == [("consumer/c", "unfixable"), ("consumer/k", "unfixable")]
    assert live_series(agent, "rackplan_live_cross_rack_partitions")[("consumer", "k")] == 4


def test_a_kip1071_app_is_not_judged_on_the_consumer_group_of_its_name() -> None:
    admin = FakeAdmin(TOPICS)
    app = {
        "application_id": "k",
        "group_protocol": "streams",
        "subtopologies": [{"id": "0", "source_topics": ["t"], "changelog_topics": [], "stateful": False}],
        # clients whose process ids the consumer group's client.ids are: its members would pass for them
        "clients": [{"process_id": "c-a", "rack": "az-a"}, {"process_id": "c-b", "rack": "az-b"}],
    }
    agent, _, _ = make_agent(admin, [group("k")], streams_apps=[app])
    admin.groups = {"k": crossed("k")}  # the consumer group k: 4 of 4 cross-rack
    r = cycle(agent)
    assert statuses(r.alerts) == [("consumer/k", "firing")], "the consumer group only"
    view = agent.status()
    shown = view.plans_json()["streams/k"]
    assert shown["path"] == "streams-broker" and shown["live"] is None
    streams = view.group_json("streams", "k")
    assert streams is not None and streams["live"] is None and streams["locality_basis"] == "none"
    assert view.group_json("consumer", "k")["locality_basis"] == "live"  # type: ignore[index]
    for name in LIVE_METRICS:
        assert set(live_series(agent, name)) == {("consumer", "k")}, name
    cycle(agent)
    assert agent.term.alerts.state("streams/k") == "ok"


def test_live_figures_go_once_a_group_is_described_with_nobody_holding_a_partition() -> None:
    # A KIP-848 group (k) and a classic one (c): described empty, neither keeps its last description's figures.
    admin = FakeAdmin(TOPICS)
    agent, _, _ = make_agent(admin, [group("k"), group("c")])
    admin.groups = {"k": crossed("k"), "c": crossed("c", type="CLASSIC", partition_assignor="range")}
    assert ("consumer/k", "firing") in statuses(cycle(agent).alerts)
    both = {("consumer", "k"): 4, ("consumer", "c"): 4}
    assert live_series(agent, "rackplan_live_cross_rack_partitions") == both
    # Not described this cycle (the coordinator not answering): the last description is all there is.
    admin.groups = {g: kafka_error(KafkaError.COORDINATOR_NOT_AVAILABLE) for g in "kc"}
    cycle(agent)
    assert live_series(agent, "rackplan_live_cross_rack_partitions") == both
    assert agent.status().plans_json()["consumer/k"]["live"]["cross_rack"] == 4
    admin.groups = {
        g: Kip848Desc(g, [], state="EMPTY", type=t) for g, t in (("k", "CONSUMER"), ("c", "CLASSIC"))
    }
    assert ("consumer/k", "resolved") in statuses(cycle(agent).alerts)
    for name in LIVE_METRICS:
        assert live_series(agent, name) == {}, name
    view = agent.status()
    assert view.plans_json()["consumer/k"]["live"] is None
    for gid, basis in (("k", "none"), ("c", "plan_of_record")):
        shown = view.group_json("consumer", gid)
        assert shown is not None and shown["live"] is None and shown["locality_basis"] == basis
    # Described again with partitions held: the figures come back.
    admin.groups = {"k": Kip848Desc("k", LOCAL)}
    cycle(agent)
    assert live_series(agent, "rackplan_live_assigned_partitions") == {("consumer", "k"): 4}


def test_a_kip848_group_whose_members_hold_nothing_resolves() -> None:
    # Its member stays (the group is not empty) but holds nothing: nobody reads across racks.
    admin = FakeAdmin(TOPICS)
    agent, _, _ = make_agent(admin, [group("k")])
    admin.groups = {"k": crossed("k")}
    cycle(agent)
    admin.groups = {"k": Kip848Desc("k", [MemberDesc("k-a", "c-a", "/10.0.0.1", MemberAssignment([]))])}
    assert statuses(cycle(agent).alerts) == [("consumer/k", "resolved")]
