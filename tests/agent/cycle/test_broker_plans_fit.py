"""Plans for a group on rackplan's Java assignors are plans they can apply (KIP-848 on the brokers'
``rackplan``; the classic ``RackplanAssignor`` applies the same completeness check, last test).

``RackplanServerAssignor`` (docs/java.md) finds a group's plan by its members' ``group.instance.id``s, recomputes
the cluster fingerprint over the existing topics the live members subscribe to, and applies only a plan that
assigns every partition of that subscription once (``Plans.mismatch``).  Each test mirrors one of these checks
on what the agent publishes, for a group registered as the roll-out says (``members: []``, its ``topics``,
``rack_mapping``): its members discovered.  All fail before this change.
"""

from __future__ import annotations

from typing import Any

from rackplan.agent.protocol.plans import PlanRecord, fingerprint
from rackplan.agent.runtime.loop import Agent
from rackplan.agent.testing import TP, FakeAdmin, GroupDesc, MemberAssignment, MemberDesc
from tests.agent.cycle.test_broker_groups import TOPICS, Kip848Desc
from tests.agent.cycle.test_run import cycle, make_agent

RULES = [{"host": "10.0.0.1/32", "rack": "az-a"}, {"host": "10.0.0.2/32", "rack": "az-b"}]


def static(kafka_id: str, instance: str, host: str, parts: list[int], topic: str = "t") -> MemberDesc:
    """A static member as the coordinator describes it: Kafka's member id, its ``group.instance.id``."""
    return MemberDesc(kafka_id, "c", f"/{host}", MemberAssignment([TP(topic, p) for p in parts]), instance)


def kip848(*members: MemberDesc, assignor: str = "rackplan") -> GroupDesc:
    return Kip848Desc("k", list(members), partition_assignor=assignor)


def rollout_agent(admin: FakeAdmin, topics: list[str] | None = None, **group: Any) -> Agent:
    """The agent with the group registered as roll-out step 2 says: no members, its topics, rules for racks."""
    spec = {"group_id": "k", "members": [], "topics": topics or ["t"], **group}
    agent, _, _ = make_agent(admin, [spec], rack_mapping=RULES)
    return agent


def plugin_refusal(rec: PlanRecord, live: dict[str, set[str]], counts: dict[str, int]) -> str | None:
    """``Plans.mismatch`` of the Java plugin without the fingerprint: why ``rec`` does not fit the live group
    (``live``: group.instance.id -> subscribed existing topics; ``counts``: those topics' partition counts)."""
    assignment = rec.body["assignment"]
    if set(assignment) != set(live):
        return f"plan members {sorted(assignment)} differ from the live members {sorted(live)}"
    owner: dict[tuple[str, int], str] = {}
    for m, parts in assignment.items():
        for t, p in parts:
            if t not in live[m] or p >= counts.get(t, 0) or owner.setdefault((t, p), m) != m:
                return f"plan gives {t}-{p} to {m}, which cannot take it"
    if len(owner) != sum(counts.values()):
        return f"plan assigns {len(owner)} partitions, the live subscription has {sum(counts.values())}"
    return None


def test_a_discovered_static_group_gets_plans_by_instance_id_and_a_restart_re_plans_nothing() -> None:
    admin = FakeAdmin(TOPICS)
    admin.groups = {
        "k": kip848(
            static("9Lm0Qe-uuid-a", "k-a", "10.0.0.1", [2, 3]),
            static("9Lm0Qe-uuid-b", "k-b", "10.0.0.2", [0, 1]),
        )
    }
    agent = rollout_agent(admin)
    (rec,) = cycle(agent).published
    assert rec.body["assignment"] == {"k-a": [["t", 0], ["t", 1]], "k-b": [["t", 2], ["t", 3]]}
    # The plugin keys the live group by group.instance.id: the plan fits it.
    assert plugin_refusal(rec, {"k-a": {"t"}, "k-b": {"t"}}, {"t": 4}) is None
    live = {"kind": "consumer", "group": "k"}
    assert agent.metrics.get("rackplan_live_cross_rack_partitions", live) == 4, "judged by Kafka's ids"
    reg_fp = agent.term.regs[0].fingerprint
    # k-b restarts: KIP-848 gives it a new member id (sorting before k-a's now), same instance id and rack.
    admin.groups = {
        "k": kip848(
            static("9Lm0Qe-uuid-a", "k-a", "10.0.0.1", [0, 1]), static("0Aa-uuid-c", "k-b", "10.0.0.2", [])
        )
    }
    r = cycle(agent)
    assert r.published == [] and r.reregistered == [], "the same registration: no new generation"
    assert agent.term.regs[0].fingerprint == reg_fp
    assert agent.metrics.get("rackplan_live_cross_rack_partitions", live) == 0, "the new member id judged"


def test_the_plan_fingerprint_is_the_one_the_plugin_recomputes_over_existing_subscribed_topics() -> None:
    # 'later' is subscribed (the group's topics) but does not exist: no live member has its topic id, so the
    # plugin's fingerprint covers 't' alone, the rack set of each partition in order (Plans.fingerprint).
    admin = FakeAdmin(TOPICS)
    admin.groups = {
        "k": kip848(static("u-a", "k-a", "10.0.0.1", [0, 1]), static("u-b", "k-b", "10.0.0.2", [2, 3]))
    }
    agent = rollout_agent(admin, topics=["t", "later"])
    (rec,) = cycle(agent).published
    t_racks = [["az-a"], ["az-a"], ["az-b"], ["az-b"]]
    assert rec.cluster_fingerprint == fingerprint({"t": t_racks})
    # Created later: the topics change, so the fingerprint does, and the group is planned with it at once.
    admin.topics = {**TOPICS, "later": [[2], [1]]}
    (again,) = cycle(agent).published
    assert again.generation == 2
    assert again.cluster_fingerprint == fingerprint({"later": [["az-b"], ["az-a"]], "t": t_racks})
    assert sorted(tp for parts in again.body["assignment"].values() for tp in map(tuple, parts)) == [
        ("later", 0),
        ("later", 1),
        ("t", 0),
        ("t", 1),
        ("t", 2),
        ("t", 3),
    ]
    assert cycle(agent).published == [], "and it holds"


def test_a_cooperative_group_on_rackplan_gets_complete_plans() -> None:
    # The group's assignor is the default cooperative-sticky: moving a partition takes Kafka's consumer two
    # rounds, but the plugin needs the whole assignment in one plan (the coordinator revokes first).
    admin = FakeAdmin(TOPICS)
    admin.groups = {
        "k": kip848(static("u-a", "k-a", "10.0.0.1", [0, 1]), static("u-b", "k-b", "10.0.0.2", [2, 3]))
    }
    agent = rollout_agent(admin)
    (first,) = cycle(agent).published
    assert first.body["assignment"] == {"k-a": [["t", 0], ["t", 1]], "k-b": [["t", 2], ["t", 3]]}
    admin.topics = {"t": [[2], [2], [1], [1]]}  # the racks swap: every partition moves
    (rec,) = cycle(agent).published
    assert rec.body["assignment"] == {"k-a": [["t", 2], ["t", 3]], "k-b": [["t", 0], ["t", 1]]}
    assert rec.body["revoked"] == {} and rec.state == "proposed"
    assert plugin_refusal(rec, {"k-a": {"t"}, "k-b": {"t"}}, {"t": 4}) is None


def test_an_incomplete_plan_of_record_is_replaced_once_the_group_is_on_rackplan() -> None:
    # On the classic protocol the group's cooperative plan withholds what moves (its consumers take two
    # rounds); moved onto rackplan, that plan does not fit the plugin: a complete one follows at once.
    members = (static("u-a", "k-a", "10.0.0.1", [0, 1]), static("u-b", "k-b", "10.0.0.2", [2, 3]))
    admin = FakeAdmin(TOPICS)
    admin.groups = {
        "k": Kip848Desc("k", list(members), type="CLASSIC", partition_assignor="cooperative-sticky")
    }
    agent = rollout_agent(admin)
    cycle(agent)
    admin.topics = {"t": [[2], [2], [1], [1]]}
    (withheld,) = cycle(agent).published
    assert withheld.body["revoked"] == {"k-a": [["t", 0], ["t", 1]], "k-b": [["t", 2], ["t", 3]]}
    assert cycle(agent).published == [], "classic: the follow-up round is the consumers' own"
    admin.groups = {"k": kip848(*members)}
    (rec,) = cycle(agent).published
    assert rec.reason.startswith("the plan of record withholds partitions")
    assert rec.body["revoked"] == {}
    assert plugin_refusal(rec, {"k-a": {"t"}, "k-b": {"t"}}, {"t": 4}) is None
    assert cycle(agent).published == [], "complete now: it holds"


def test_a_classic_group_on_the_java_rackplan_assignor_gets_complete_plans_too() -> None:
    # RackplanAssignor (classic protocol "rackplan") refuses a plan that withholds partitions, like the
    # broker plugin, and applies the cooperative rule itself: the agent folds the follow-up round in at once.
    members = (static("u-a", "k-a", "10.0.0.1", [0, 1]), static("u-b", "k-b", "10.0.0.2", [2, 3]))
    admin = FakeAdmin(TOPICS)
    admin.groups = {"k": Kip848Desc("k", list(members), type="CLASSIC", partition_assignor="rackplan")}
    agent = rollout_agent(admin)
    cycle(agent)
    admin.topics = {"t": [[2], [2], [1], [1]]}
    (rec,) = cycle(agent).published
    assert rec.body["assignment"] == {"k-a": [["t", 2], ["t", 3]], "k-b": [["t", 0], ["t", 1]]}
    assert rec.body["revoked"] == {} and plugin_refusal(rec, {"k-a": {"t"}, "k-b": {"t"}}, {"t": 4}) is None
