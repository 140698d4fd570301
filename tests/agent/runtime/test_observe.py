"""Observe-only mode (``mode: observe``) with fake clients: plans and alerts as in act mode, no record written."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rackplan.agent.runtime.http import route
from rackplan.agent.runtime.observe import WithheldPublisher
from rackplan.agent.settings.sections import Settings
from rackplan.agent.testing import FakeAdmin
from tests.agent.cycle.test_run import cycle, group, keys, make_agent


def plans_served(agent: Any) -> dict[str, Any]:
    code, body, _ctype = route(agent.status(), agent.metrics, "/v1/plans")
    assert code == 200
    doc: dict[str, Any] = json.loads(body)
    return doc


def test_an_observer_plans_and_alerts_over_several_cycles_and_writes_no_record() -> None:
    posts: list[Any] = []
    admin = FakeAdmin({"t": [[1], [1], [2], [2]]})
    agent, pub, log = make_agent(admin, [group("g")], posts=posts, mode="observe")
    first = cycle(agent)
    assert [p.generation for p in first.published] == [1]  # what it would publish
    admin.topics = {"t": [[2], [2], [1], [1]]}  # racks swap: the plan it holds is all cross-rack now
    second = cycle(agent)
    assert [(p.key, p.generation) for p in second.published] == [("consumer/g", 2)]
    assert keys(second.alerts) == [("consumer/g", "firing")]  # the degraded group still alerts
    for _ in range(3):
        cycle(agent)
    assert pub.records == []  # no plan, tombstone, alert record or heartbeat reached Kafka's producer
    assert isinstance(agent.publisher, WithheldPublisher)
    assert agent.publisher.withheld.get("_rackplan.plans") == 2
    assert agent.webhook is not None and agent.webhook.wait_idle(5)
    assert [a["labels"]["group"] for body in posts for a in body] == [
        "g",
        "g",
    ]  # the webhook: fired, resolved
    served = plans_served(agent)
    assert served["consumer/g"]["generation"] == 2 and served["consumer/g"]["published"] is False
    assert agent.metrics.get("rackplan_observe_only") == 1
    assert agent.metrics.get("rackplan_leader") == 0  # it publishes nothing
    assert agent.lease is None and agent.leader  # it runs for no lease, whatever ha.enabled says
    # nothing was published: the counters stay 0, the log says what was withheld
    assert agent.metrics.series("rackplan_plans_published_total") == {}
    assert agent.metrics.get("rackplan_plan_generation", {"kind": "consumer", "group": "g"}) == 2
    events = [json.loads(line)["event"] for line in log.getvalue().splitlines()]
    assert events.count("plan withheld") == 2 and "plan published" not in events
    agent.close()


def test_an_observer_does_not_call_itself_the_leader() -> None:
    # /v1/status answered an observer's role as "leader" while rackplan_leader was 0: run next to the acting
    # agent (what observe mode is for), two agents said they led, and a script asking /v1/status who leads
    # could pick the one that publishes nothing.
    agent, _pub, _log = make_agent(FakeAdmin({"t": [[1], [2]]}), [group("g")], mode="observe")
    cycle(agent)
    code, body, _ctype = route(agent.status(), agent.metrics, "/v1/status")
    status = json.loads(body)
    assert code == 200 and agent.metrics.get("rackplan_leader") == 0
    assert status["role"] == "observer" and status["plans"] == 1 and status["ready"] is True
    agent.close()


def test_an_acting_agent_publishes_and_serves_its_plans_unmarked() -> None:
    admin = FakeAdmin({"t": [[1], [1], [2], [2]]})
    agent, pub, log = make_agent(admin, [group("g")])
    cycle(agent)
    assert [k for k, _ in pub.on("_rackplan.plans")] == ["consumer/g"]
    assert "published" not in plans_served(agent)["consumer/g"]
    assert agent.metrics.get("rackplan_observe_only") == 0
    assert agent.metrics.get("rackplan_plans_published_total", {"kind": "consumer"}) == 1
    assert "plan published" in [json.loads(line)["event"] for line in log.getvalue().splitlines()]


@pytest.mark.parametrize("mode", ["act", "observe"])
def test_mode_is_a_setting_and_its_environment_variable(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RACKPLAN_MODE", mode)
    assert Settings().mode == mode


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="mode"):
        Settings.model_validate({"mode": "dry-run"})


def test_an_observer_brings_followers_in_group_subscription_back_once_not_every_timeout() -> None:
    # Followers see no heartbeat from an observer, so they fall back to group subscription and stay there:
    # they never read its plans.  The observer asked them back every 2 x followers.release_timeout_s (a
    # revoking plan, a timed-out target, again), so its generations climbed without end and its handovers
    # counted as timed out over and over: not what acting would do (one handover, the followers back).
    from tests.agent.planning.test_handover import follow

    admin = FakeAdmin({"t": [[1], [1], [2], [2], [3], [3]]})
    agent, _pub, _log = make_agent(
        admin, [], registrations={"ttl_s": 6000}, followers={"release_timeout_s": 10}, mode="observe"
    )
    follow(agent, "a", "az-a", mode="subscription")
    follow(agent, "b", "az-b", mode="subscription")
    reports = [cycle(agent) for _ in range(8)]
    published = [(p.generation, p.state) for r in reports for p in r.completed + r.published]
    assert published[:2] == [(1, "revoking"), (2, "proposed")]  # what acting would publish: both phases
    assert published[2:] == [], "the same followers, still in subscription, are not asked back again"
    assert agent.metrics.get("rackplan_handovers_total", {"result": "timed_out"}) == 1
    follow(agent, "c", "az-c", mode="subscription")  # a member new to group subscription is brought back
    assert [p.state for p in cycle(agent).published] == ["revoking"]
    assert [p.state for p in cycle(agent).completed] == ["proposed"]
    follow(agent, "a", "az-a", released=4, mode="plan")  # brought back (by an acting agent beside it)
    assert cycle(agent).published == []
    follow(agent, "a", "az-a", released=4, mode="subscription")  # fallen back again: asked back again
    assert [p.state for p in cycle(agent).published] == ["revoking"]
    agent.close()


def test_an_acting_agent_still_asks_followers_in_subscription_back_after_its_gap() -> None:
    from tests.agent.planning.test_handover import follow

    admin = FakeAdmin({"t": [[1], [1], [2], [2], [3], [3]]})
    agent, _pub, _log = make_agent(
        admin, [], registrations={"ttl_s": 6000}, followers={"release_timeout_s": 10}
    )
    follow(agent, "a", "az-a", mode="subscription")
    follow(agent, "b", "az-b", mode="subscription")
    published = [
        (p.generation, p.state) for _ in range(3) for r in [cycle(agent)] for p in r.completed + r.published
    ]
    # asked again: followers that could not come back (another consumer in the group) may come back later
    assert published == [(1, "revoking"), (2, "proposed"), (3, "revoking"), (4, "proposed"), (5, "revoking")]
    agent.close()
