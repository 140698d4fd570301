"""A deposed leader's plan record landing after the new leader replayed the plan topic (the window a lease
leaves between confirmation and publish; on real Kafka the new leader fences the old producer only at its own
first plan-topic publish): followers act on it when it is above every generation, so the new leader must too."""

from __future__ import annotations

import json
from typing import Any

from rackplan.agent.kafka.publisher import LEASE_GROUP_HEADER, WRITER_HEADER
from rackplan.agent.kafka.tail import RawRecord
from rackplan.agent.protocol.plans import decode_record
from rackplan.agent.protocol.registrations import registration_key
from rackplan.agent.runtime.loop import Agent
from rackplan.agent.testing import FakeAdmin, FakePublisher
from tests.agent.cycle.test_run import PlanTail, cycle, make_agent
from tests.agent.planning.test_handover import follow

KEY = "consumer/g"
SETTINGS: dict[str, Any] = {"registrations": {"ttl_s": 600}, "followers": {"release_timeout_s": 60}}


def ha(agent_id: str) -> dict[str, Any]:
    return {"enabled": True, "group_id": "agents", "agent_id": agent_id}


def taken_over_before_a_late_revoking_plan() -> tuple[Agent, FakePublisher, dict[str, Any]]:
    """Agent a-1 plans 1 (followers a and b hold everything), sees c join and publishes revoking plan 2
    late: agent a-2 took over and replayed plan 1 only, and c has left meanwhile.  Agent a-2 (its publisher),
    reading plan 2 on its plan-topic tail, and plan 2."""
    admin = FakeAdmin({"t": [[1], [1], [2], [2], [3], [3]]})
    old, pub, _ = make_agent(admin, [], ha=ha("a-1"), **SETTINGS)
    follow(old, "a", "az-a")
    follow(old, "b", "az-b")
    cycle(old)
    follow(old, "c", "az-c")
    assert [p.state for p in cycle(old).published] == ["revoking"]
    (k1, v1), (k2, v2) = pub.on("_rackplan.plans")
    new, pub2, _ = make_agent(admin, [], ha=ha("a-2"), **SETTINGS)
    new._new_term()
    for e in old.term.store.entries():
        if e.key != registration_key("consumer", "g", "c"):  # c left
            new.term.store.apply(e.key, e, int(new.tick[0] * 1000))  # type: ignore[attr-defined]
    new.begin([(k1, decode_record(k1, json.dumps(v1).encode()))])
    headers = ((WRITER_HEADER, b"a-1"), (LEASE_GROUP_HEADER, b"agents"))
    late = RawRecord(0, 1, k2.encode(), json.dumps(v2).encode(), 1, "_rackplan.plans", headers)
    new.plan_tail = PlanTail([late])  # type: ignore[assignment]
    return new, pub2, v2


def test_a_late_revoking_plan_of_the_deposed_leader_gets_its_target() -> None:
    new, pub, revoking = taken_over_before_a_late_revoking_plan()
    taken_from_followers = sum(len(v) for v in revoking["consumer_group"]["assignment"].values())
    assert revoking["state"] == "revoking" and taken_from_followers < 6, "c's partitions: read by nobody"
    assert cycle(new).published == []
    latest = new.term.book.latest(KEY)
    assert latest is not None and latest.generation == 2, "what followers act on is the plan of record"
    assert new.metrics.get("rackplan_plan_generation", {"kind": "consumer", "group": "g"}) == 2
    assert [k for k, _ in new.term.handovers()] == [KEY], "its handover resumed"
    follow(new, "a", "az-a", released=2)
    follow(new, "b", "az-b", released=2)
    cycle(new)
    published = [v for k, v in pub.on("_rackplan.plans") if k == KEY and v]
    assert [v["generation"] for v in published] == [3, 4]
    final = published[-1]["consumer_group"]["assignment"]
    assert sorted(final) == ["a", "b"] and sum(len(v) for v in final.values()) == 6, (
        "every partition read again"
    )


def test_a_late_plan_of_a_group_the_new_leader_does_not_plan_is_tombstoned() -> None:
    admin = FakeAdmin({"t": [[1], [1], [2], [2], [3], [3]]})
    old, pub, _ = make_agent(admin, [], ha=ha("a-1"), **SETTINGS)
    follow(old, "a", "az-a")
    cycle(old)
    ((key, value),) = pub.on("_rackplan.plans")
    new, pub2, _ = make_agent(admin, [], ha=ha("a-2"), **SETTINGS)  # replayed nothing; nobody registered
    headers = ((WRITER_HEADER, b"a-1"), (LEASE_GROUP_HEADER, b"agents"))
    late = RawRecord(0, 0, key.encode(), json.dumps(value).encode(), 1, "_rackplan.plans", headers)
    new.plan_tail = PlanTail([late])  # type: ignore[assignment]
    assert cycle(new).tombstoned == [key], "followers act on it: this agent, not planning the group, ends it"
    assert pub2.on("_rackplan.plans") == [(key, None)] and new.term.book.latest(key) is None
