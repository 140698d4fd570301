"""The agent's leadership terms (agent/runtime/loop.py ``_run_ha``): a lost term's readers are closed.

The soak (bench/soak.py) lost the lease to broker outages eleven times in 20 minutes; each term opens a
plan tail, a lease tail and a registrations tail (each a librdkafka client with a thread per broker).
Here the lease, the leader watch, the term's start-up and its serving are stand-ins, so the test drives
the real ``_run_ha`` through two terms, the first lost, and looks at which readers were closed when.
"""

from __future__ import annotations

from typing import Any

import pytest

import rackplan.agent.runtime.loop as loop
from rackplan.agent.ha.leader_watch import LeaderWatch
from rackplan.agent.ha.lease import LeaseLost
from rackplan.agent.runtime.loop import Agent
from rackplan.agent.testing import FakeAdmin, FakePublisher
from tests.agent.cycle.test_run import make_agent


class Reader:
    """A tail that knows whether it was closed."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def read_new(self, max_records: int = 100_000) -> tuple[list[Any], list[str]]:
        return [], []


class AlwaysGranted:
    held = True

    def acquire(self, timeout_s: float) -> bool:
        return True

    def poll(self, timeout_s: float = 0.0) -> bool:
        return True

    def close(self) -> None:
        return None


class QuietWatch:
    def refresh(self) -> None:
        return None

    def close(self) -> None:
        return None


@pytest.fixture
def two_terms(monkeypatch: pytest.MonkeyPatch) -> tuple[Agent, list[dict[str, Reader]], list[list[str]]]:
    """An agent whose first term is lost (LeaseLost) and whose second ends with a stop; per term the
    readers it opened, and at each start-up the readers of earlier terms still open."""
    agent, _pub, _buf = make_agent(FakeAdmin({"t": [[1], [2], [3]]}), [], ha={"enabled": True})
    terms: list[dict[str, Reader]] = []
    open_at_start: list[list[str]] = []

    def start(self: Agent) -> None:
        open_at_start.append([r.name for t in terms for r in t.values() if not r.closed])
        n = len(terms)
        readers = {k: Reader(f"{k}-{n}") for k in ("plans", "lease", "registrations")}
        terms.append(readers)
        self.plan_tail = readers["plans"]  # type: ignore[assignment]
        self.lease_tail = readers["lease"]  # type: ignore[assignment]
        self.intake.tail = readers["registrations"]  # type: ignore[assignment]
        self.term.replayed = True  # the plan topic was read: heartbeats (and the released one) may go out

    def serve(self: Agent) -> None:
        if len(terms) == 1:
            raise LeaseLost("the lease partition was revoked")
        self.stop.set()

    monkeypatch.setattr(loop, "Lease", lambda *a, **k: AlwaysGranted())
    monkeypatch.setattr(LeaderWatch, "for_agent", classmethod(lambda cls, w, config: QuietWatch()))
    monkeypatch.setattr(loop, "prepare_topics", lambda *a, **k: set())
    monkeypatch.setattr(Agent, "start", start)
    monkeypatch.setattr(Agent, "_serve_term", serve)
    return agent, terms, open_at_start


def test_a_lost_term_closes_its_readers_before_the_agent_stands_by(
    two_terms: tuple[Agent, list[dict[str, Reader]], list[list[str]]],
) -> None:
    agent, terms, open_at_start = two_terms
    agent._run_ha()
    assert len(terms) == 2
    assert open_at_start == [[], []]  # nothing of the lost term was still open when the next began
    assert all(r.closed for t in terms for r in t.values())
    assert agent.plan_tail is None and agent.lease_tail is None and agent.intake.tail is None


def test_a_stopped_leader_writes_the_released_heartbeat_before_it_leaves_the_group(
    two_terms: tuple[Agent, list[dict[str, Reader]], list[list[str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # docs/agent.md: "A clean stop writes a last heartbeat with `released: true`, so a successor does not
    # wait". With a lease the term's end closed the lease tail first, and the released heartbeat, sent only
    # while that tail was open, never went out (a successor waited for the stale heartbeat to age).
    agent, terms, _open = two_terms
    assert isinstance(agent.w.publisher, FakePublisher)
    publisher: FakePublisher = agent.w.publisher
    left_with: list[int] = []

    class Granted(AlwaysGranted):
        def close(self) -> None:  # leaving the group: how many lease-topic records were out by then
            left_with.append(len(publisher.on(agent.settings.ha.lease_topic)))

    monkeypatch.setattr(loop, "Lease", lambda *a, **k: Granted())
    agent._run_ha()
    agent.close()
    assert len(terms) == 2
    lease = publisher.on(agent.settings.ha.lease_topic)
    # One released heartbeat: the stopped term's, not the lost one's (another agent may lead by then).
    assert [(k, v["released"], v["agent_id"]) for k, v in lease] == [("leader", True, agent.agent_id)]
    assert left_with == [1], "the released heartbeat went out while this agent still held the lease"


def test_a_new_term_keeps_no_group_series_of_the_last_one() -> None:
    # A leader's group fired; it lost the lease, stood by, and led again (``_run_ha``: ``_new_term`` then the
    # start-up's ``begin``) while the group had recovered and another group had been unregistered.  The new
    # term held no alert and knew nothing of the other group, yet rackplan_alerts_firing stayed 1 (the shipped
    # rule RackplanLocalityAlertStuck, ``rackplan_alerts_firing == 1 and rackplan_leader == 1``, paged) and
    # the other group's locality and generation series stayed, though "a group's series disappear when it
    # is unregistered" (docs/agent.md, HTTP).
    from tests.agent.cycle.test_alerts_held import _agent, _members
    from tests.agent.cycle.test_run import cycle, register

    agent, admin = _agent([])
    register(agent, "r", "r-a", "az-a")
    register(agent, "r", "r-b", "az-b")
    g, r = {"kind": "consumer", "group": "g"}, {"kind": "consumer", "group": "r"}
    assert [(e.key, e.status) for e in cycle(agent).alerts] == [("consumer/g", "firing")]
    assert agent.metrics.get("rackplan_alerts_firing", g) == 1
    assert agent.metrics.get("rackplan_plan_generation", r) == 1
    agent._new_term()  # the lease regained: what the registrations topic says now is replayed afresh
    agent.begin([])
    admin.groups = _members([0, 1], [2, 3])  # every partition read locally
    for _ in range(3):
        assert cycle(agent).alerts == []
    assert agent.status().group_json("consumer", "g")["alert_state"] == "ok"
    assert agent.metrics.series("rackplan_alerts_firing") == {}
    for name in ("rackplan_plan_generation", "rackplan_cross_rack_ratio", "rackplan_cross_rack_partitions"):
        assert {dict(k)["group"] for k in agent.metrics.series(name)} == {"g"}, name
    agent.close()


def test_a_new_term_does_not_report_a_group_unfixable_again() -> None:
    # RackplanLocalityUnfixable is "reported once" (docs/agent.md, Alerts) and never re-sent: Alertmanager
    # lets it expire.  Every term started its alert state from scratch, so an agent that lost the lease and
    # led again reported every unfixable group again (a new notification, another alerts-topic record), each
    # time it led.  Found by a hunt.
    from rackplan.agent.testing import FakeAdmin
    from tests.agent.cycle.test_run import cycle, group, make_agent

    admin = FakeAdmin({"far": [[3], [3]]})  # every replica in az-c, the members in az-a and az-b
    agent, _, _ = make_agent(admin, [group("far", topics=["far"])])
    far = {"kind": "consumer", "group": "far"}
    assert [(e.key, e.status) for e in cycle(agent).alerts] == [("consumer/far", "unfixable")]
    agent._new_term(agent.term)  # the lease lost and regained
    agent.begin([])
    for _ in range(3):
        assert cycle(agent).alerts == []
    shown = agent.status().group_json("consumer", "far")
    assert shown is not None and shown["alert_state"] == "unfixable"
    assert agent.metrics.get("rackplan_alerts_unfixable", far) == 1
    admin.topics = {"far": [[1], [2]]}  # a replica in each member's rack: fixable, then forgotten
    cycle(agent)
    admin.topics = {"far": [[3], [3]]}
    assert [(e.key, e.status) for e in cycle(agent).alerts] == [("consumer/far", "unfixable")]
    agent.close()
