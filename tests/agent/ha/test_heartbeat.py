"""The leader's heartbeat goes out on its own schedule, not after each cycle (issue 24, item 4).

A cycle here blocks inside its plan publish (as one waiting on the transaction
coordinator does) until the test releases it; heartbeats must keep coming
meanwhile, stop for good once the lease is found lost, and pause while a cycle
runs past ``ha.max_cycle_s``.  Heartbeats are counted, never timed: every wait
below is a generous bound on something that happens within a few intervals.
The same on the real cluster: integration/test_heartbeat_schedule.py.
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from rackplan.agent.core.logging import configure
from rackplan.agent.ha.heartbeat import Heartbeats
from rackplan.agent.ha.lease import LeaseLost
from rackplan.agent.runtime.loop import Agent
from rackplan.agent.settings.sections import Settings
from rackplan.agent.testing import FakeAdmin, FakePublisher

PLANS, LEASE = "_rackplan.plans", "_rackplan.lease"
BOUND_S = 20.0


class BlockingPublisher(FakePublisher):
    """Confirms at once, except plan-topic publishes, which wait until :attr:`release` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def publish_many(self, topic: str, records: list[tuple[str, bytes | None]], timeout_s: float) -> None:
        if topic == PLANS:
            self.entered.set()
            assert self.release.wait(60), "the test never released the publish"
        super().publish_many(topic, records, timeout_s)

    def heartbeats(self) -> int:
        return sum(1 for k, v in self.on(LEASE) if k == "leader" and not v.get("released"))


class SlowAdmin(FakeAdmin):
    """Every metadata request takes ``delay_s``: cycles that outlast ``poll_interval_s``."""

    def __init__(self, delay_s: float) -> None:
        super().__init__({"t": [[1], [1], [2], [2]]})
        self.delay_s = delay_s

    def list_topics(self, topic: str | None = None, timeout: float = 0) -> Any:
        time.sleep(self.delay_s)
        return super().list_topics(topic, timeout)


def lease_held(agent: Agent) -> threading.Event:
    """The agent's lease guard, as an event: cleared, every guarded publish or heartbeat finds the lease lost."""
    held = threading.Event()
    held.set()

    def guard() -> None:
        if not held.is_set():
            raise LeaseLost("the lease partition is not assigned to this agent")

    agent.w.guard = guard
    return held


def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + BOUND_S
    while not condition():
        assert time.monotonic() < deadline, f"not within {BOUND_S} s: {what}"
        time.sleep(0.01)


@pytest.fixture
def serving() -> Iterator[Callable[..., tuple[Agent, BlockingPublisher, list[BaseException]]]]:
    """An agent with one group to plan, serving its term on a thread; stopped and joined afterwards."""
    started: list[tuple[Agent, BlockingPublisher, threading.Thread]] = []

    def start(
        monotonic: Callable[[], float] = time.monotonic, cycle_s: float = 0.0, **ha: Any
    ) -> tuple[Agent, BlockingPublisher, list[BaseException]]:
        configure("json", "info", stream=io.StringIO())
        doc = {
            "poll_interval_s": 0.1,
            "consumer_groups": [
                {
                    "group_id": "g",
                    "assignor": "range",
                    "members": [{"member_id": f"m-{r}", "rack": f"az-{r}", "topics": ["t"]} for r in "ab"],
                }
            ],
            "ha": ha,
            "metadata": {"max_attempts": 1},
        }
        pub = BlockingPublisher()
        agent = Agent(Settings.model_validate(doc), admin=SlowAdmin(cycle_s), publisher=pub)
        agent.heartbeats = Heartbeats(agent.w, monotonic=monotonic)
        agent.heartbeats.topic_ok = True  # start() finds the lease topic; these fakes skip start()
        agent.begin([])
        errors: list[BaseException] = []

        def serve() -> None:
            try:
                agent._serve_term()
            except BaseException as e:  # the test reads it
                errors.append(e)

        thread = threading.Thread(target=serve, daemon=True)
        started.append((agent, pub, thread))
        thread.start()
        return agent, pub, errors

    yield start
    for agent, pub, thread in started:
        agent.stop.set()
        pub.release.set()
        thread.join(BOUND_S)
        assert not thread.is_alive(), "the agent did not stop"


def test_heartbeats_keep_their_schedule_while_a_cycle_waits_on_its_publish(serving: Any) -> None:
    agent, pub, errors = serving()
    assert pub.entered.wait(BOUND_S), "the first cycle never published its plan"
    before = pub.heartbeats()
    # The cycle waits inside its publish; heartbeats must not wait for it (issue 24: 20-60 s gaps).
    until(lambda: pub.heartbeats() >= before + 5, "5 heartbeats while the cycle is blocked")
    assert pub.on(PLANS) == [] and not errors, "the cycle is still blocked"
    pub.release.set()
    until(lambda: len(pub.on(PLANS)) == 1, "the plan published once the publish is released")
    beats = pub.on(LEASE)
    assert {v["agent_id"] for _, v in beats} == {agent.agent_id} and {v["epoch"] for _, v in beats} == {0}


def test_a_lease_found_lost_stops_the_heartbeats_and_the_term(serving: Any) -> None:
    agent, pub, errors = serving()
    held = lease_held(agent)
    assert pub.entered.wait(BOUND_S)
    until(lambda: pub.heartbeats() >= 2, "heartbeats while the lease is held")
    held.clear()  # the group gave the lease to another agent while the cycle waits
    until(lambda: agent.heartbeats.lost is not None, "the schedule noticing the loss")
    after_loss = pub.heartbeats()
    pub.release.set()  # the cycle ends (its publish was guarded before the loss); the term ends
    until(lambda: bool(errors), "the term ending")
    assert isinstance(errors[0], LeaseLost)
    assert pub.heartbeats() == after_loss, "no heartbeat for a lease this agent no longer holds"


def test_a_cycle_stuck_past_max_cycle_pauses_heartbeats_until_it_ends(serving: Any) -> None:
    clock = [1000.0]
    agent, pub, _ = serving(monotonic=lambda: clock[0], max_cycle_s=5)
    assert pub.entered.wait(BOUND_S)
    until(lambda: pub.heartbeats() >= 2, "heartbeats while the cycle is young")
    clock[0] += 6  # the cycle has run 6 s: past ha.max_cycle_s, the loop counts as stuck
    until(lambda: agent.heartbeats.paused >= 1, "a beat paused")
    paused_at = pub.heartbeats()
    until(lambda: agent.heartbeats.paused >= 4, "more beats paused")
    assert pub.heartbeats() == paused_at, "no heartbeat while the loop is stuck"
    pub.release.set()  # the cycle ends
    until(lambda: pub.heartbeats() > paused_at, "heartbeats again once the cycle ended")


def test_a_lease_lost_and_regained_ends_the_term_even_when_cycles_outlast_the_interval(serving: Any) -> None:
    """Real Kafka (integration/test_coordinator_outage.py): cycles slowed by admin timeouts, the lease lost
    and regained between two of them; the agent led on with its heartbeat schedule stopped for good."""
    agent, pub, errors = serving(cycle_s=0.3)  # each cycle takes three of its 0.1 s intervals
    held = lease_held(agent)
    assert pub.entered.wait(BOUND_S)
    pub.release.set()
    until(lambda: pub.heartbeats() >= 2, "heartbeats while the lease is held")
    held.clear()
    until(lambda: agent.heartbeats.lost is not None, "the schedule noticing the loss")
    held.set()  # the group gave it back before any cycle's guard looked
    until(lambda: bool(errors), "the term ending")
    assert isinstance(errors[0], LeaseLost)
