"""The status view the HTTP server reads, and the one way a plan is committed (``publishing.commit_plan``)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from rackplan.agent.cycle.publishing import commit_plan
from rackplan.agent.testing import FakeAdmin
from tests.agent.cycle.test_run import cycle, group, make_agent
from tests.agent.planning.test_handover import follow


def test_a_status_view_is_a_value_the_next_cycle_does_not_touch() -> None:
    admin = FakeAdmin({"t": [[1], [2]], "u": [[1], [2]]})
    agent, _, _ = make_agent(admin, [group("g")])
    before = agent.status()
    assert not before.ready and before.plans == ()  # built at start-up: nothing planned yet
    cycle(agent)
    first = agent.status()
    assert first is not before and first.ready
    shown = json.dumps([first.plans_json(), first.groups_json()])
    admin.topics = {"t": [[2], [1]], "u": [[1], [2]]}  # racks swap: a new plan of g
    assert [p.generation for p in cycle(agent).published] == [2]
    assert json.dumps([first.plans_json(), first.groups_json()]) == shown, "the old view is unchanged"
    assert agent.status().plans_json()["consumer/g"]["generation"] == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.ready = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        first.discrepancies["consumer/x"] = {}  # type: ignore[index]
    with pytest.raises(TypeError):
        first.groups[0].followers["m"] = None  # type: ignore[index]
    agent.close()


def test_the_view_shows_what_the_loop_knows_at_the_end_of_a_cycle() -> None:
    admin = FakeAdmin({"t": [[1], [1], [2], [2], [3], [3]]})
    agent, _, _ = make_agent(admin, [], registrations={"ttl_s": 600}, followers={"release_timeout_s": 600})
    follow(agent, "a", "az-a")
    follow(agent, "b", "az-b")
    cycle(agent)
    follow(agent, "c", "az-c")
    assert agent.status().groups[0].handover is None
    cycle(agent)  # a revoking plan: a handover in flight
    (g,) = agent.status().groups
    assert g.plan is not None and g.plan.state == "revoking" and g.handover is not None
    assert sorted(g.followers) == ["a", "b", "c"]
    assert g.as_json()["handover"]["awaiting"] == list(g.handover.awaiting)
    assert agent.status().groups_json() == [g.as_json()]
    agent.close()


def test_commit_plan_is_the_one_place_a_record_lands() -> None:
    admin = FakeAdmin({"t": [[1], [1], [2], [2], [3], [3]]})
    agent, _, _ = make_agent(admin, [], registrations={"ttl_s": 600}, followers={"release_timeout_s": 600})
    follow(agent, "a", "az-a")
    follow(agent, "b", "az-b")
    (first,) = cycle(agent).published
    follow(agent, "c", "az-c")
    (revoking,) = cycle(agent).published
    term, w = agent.term, agent.w
    rec = term.groups["consumer/g"]
    assert rec.handover is not None and rec.handover.generation == revoking.generation
    published = agent.metrics.get("rackplan_plans_published_total", {"kind": "consumer"})
    # A stale record (not above the newest generation) changes nothing.
    assert not commit_plan(w, term, "consumer/g", first)
    assert term.book.latest("consumer/g") == revoking and rec.handover is not None
    # A plan above it ends the handover and is counted; a tombstone is counted as one.
    later = dataclasses.replace(first, generation=revoking.generation + 1)
    assert commit_plan(w, term, "consumer/g", later)
    assert rec.handover is None and agent.metrics.get("rackplan_handovers_pending") == 0
    assert agent.metrics.get("rackplan_plans_published_total", {"kind": "consumer"}) == published + 1
    assert (
        agent.metrics.get("rackplan_plan_generation", {"kind": "consumer", "group": "g"}) == later.generation
    )
    assert commit_plan(w, term, "consumer/g", None) and term.book.latest("consumer/g") is None
    assert agent.metrics.get("rackplan_tombstones_published_total", {"kind": "consumer"}) == 1
    # A late delivery (counted=False) lands without being counted again.
    again = dataclasses.replace(first, generation=later.generation + 1)
    assert commit_plan(w, term, "consumer/g", again, counted=False)
    assert agent.metrics.get("rackplan_plans_published_total", {"kind": "consumer"}) == published + 1
    agent.close()


def test_a_standby_answers_who_leads_the_leader_its_plans_unchanged() -> None:
    """Issue 28: a standby's /v1/plans answered ``{}``; the leader's answer is the plans of record, as before."""
    from rackplan.agent.cycle.status import build_status
    from rackplan.agent.ha.leader_watch import LeaderWatch
    from rackplan.agent.protocol.lease import Heartbeat
    from rackplan.agent.runtime.http import route
    from tests.agent.ha.test_leader_watch import FakeTail, record

    admin = FakeAdmin({"t": [[1], [2]], "u": [[1], [2]]})
    agent, _, _ = make_agent(admin, [group("g")])
    cycle(agent)
    leading = agent.status()
    assert leading.plans_json() == build_status(agent.term).plans_json()
    assert set(leading.plans_json()) == {"consumer/g"}
    assert leading.status_json() == {
        "role": "leader", "agent_id": agent.agent_id, "epoch": agent.epoch, "ready": True, "plans": 1,
        "groups": {"consumer/g": {"path": "unknown", "assignor": None}},
        "replica_selector": {"state": "unknown", "setting": "replica.selector.class", "brokers": {
            str(b): {"error": "_UNSUPPORTED_FEATURE"} for b in (1, 2, 3)}},  # the fake admin's brokers do not say
    }  # fmt: skip
    now_ms = int(agent.clock() * 1000)
    hb = Heartbeat("other-agent", 4, now_ms - 1_500, 1.0, "agents")
    agent.leader = False  # as after a lost lease: the old term's plans are still in the published view
    agent.leader_watch = LeaderWatch(lambda: FakeTail([record(hb, 0)]), "l", None, 1.0, 1.0, agent.log)
    agent.leader_watch.refresh()
    code, body, _ = route(agent.status(), agent.metrics, "/v1/plans")
    shown = json.loads(body)
    assert code == 200 and shown["role"] == "standby" and "consumer/g" not in shown
    assert shown["leader"]["agent_id"] == "other-agent" and shown["leader"]["epoch"] == 4
    assert shown["plan_topic"] == agent.settings.plan_topic
    code, body, _ = route(agent.status(), agent.metrics, "/v1/status")
    assert code == 200 and json.loads(body)["leader"] == shown["leader"]
    agent.close()
