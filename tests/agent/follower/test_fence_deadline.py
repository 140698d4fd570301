"""No wait inside ``poll()`` outlasts the follower's fence, and each commit is judged by its own answer.

CI's chaos scenario on real Kafka (a broker stopped: the followers' group
coordinator and a replica of the registrations topic): a follower's periodic
commit waited ``io_timeout_s`` (5 s) for a coordinator that was gone while its
registration went unconfirmed.  It fenced itself only when the wait ended,
1.3 s after the agent had expired it and another follower had taken its
partitions: the ledger showed two owners for 55 ms.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError

from rackplan.agent.core.logging import get_logger
from rackplan.agent.follower.partitions import Partitions

from .test_follower import KEY, PLANS, TOPIC, FakeTail, Harness, owned_by_hooks, plan

TTL_S = 6.0
#: a wait checks its deadline between polls of the consumer, each up to 20 ms
SLICE_S = 0.05


def held_while_expired(h: Harness, f: Any, share: float) -> Callable[[float], None]:
    """A poll clock that passes time and records each moment plan partitions are held past ``share`` of the TTL
    (and a poll's slice)."""
    late: list[float] = []

    def passes(seconds: float) -> None:
        h.advance(seconds)
        unconfirmed_s = h.wall.now - f._registrar.answered_ms() / 1000
        if f.mode != "subscription" and f.assignment() and unconfirmed_s > share * TTL_S + SLICE_S:
            late.append(unconfirmed_s)

    passes.late = late  # type: ignore[attr-defined]
    return passes


def test_a_commit_waiting_for_a_gone_coordinator_does_not_delay_the_fence() -> None:
    h = Harness(registration_ttl_s=TTL_S, commit_interval_s=1, io_timeout_s=10)
    f = h.follower()
    h.on_plan(f)
    clock = held_while_expired(h, f, 5 / 6)
    h.broker.poll_clock = clock
    h.broker.deliver, h.broker.commits_hang = False, True  # the broker stops: no answer to either
    h.broker.append(0, 3)
    for _ in range(12):
        h.advance(0.5)
        h.heartbeat()
        f.poll(0)
    assert f.stats["self_fenced"] == 1 and f.assignment() == []
    assert owned_by_hooks(h.assigned) == set()
    assert clock.late == [], "plan partitions held while the agent may have expired the member"  # type: ignore[attr-defined]


def test_a_take_does_not_start_once_the_fence_is_due() -> None:
    """Taking waits on committed offsets and a commit: none of it may run past 2/3 of the TTL."""
    h = Harness(registration_ttl_s=TTL_S, commit_interval_s=1, io_timeout_s=10)
    f = h.follower()
    tail = FakeTail.instances[-1]
    h.heartbeat()
    clock = held_while_expired(h, f, 2 / 3)
    h.broker.poll_clock = clock
    h.broker.deliver = False
    h.advance(3.9)  # unconfirmed for 3.9 s of 4 s
    h.heartbeat()
    h.broker.commits_hang = True
    tail.push(PLANS, KEY.encode(), plan(1, {"m1": [0, 1]}))
    f.poll(0)
    assert f.assignment() == [] and owned_by_hooks(h.assigned) == set()
    assert h.clock.now - 1000.0 <= 4.0 + 0.1, "the lookup's wait was cut at the fence"


class ScriptedConsumer:
    """A consumer whose commits are answered in a scripted order, at polls (late answers included)."""

    def __init__(self, config: dict[str, Any], clock: list[float]) -> None:
        self.on_commit = config["on_commit"]
        self.clock = clock
        self.sent: list[list[Any]] = []
        self.answers: collections.deque[tuple[KafkaError | None, list[Any]]] = collections.deque()

    def commit(self, *, offsets: list[Any], asynchronous: bool = True) -> None:
        self.sent.append(offsets)

    def poll(self, timeout: float = 0) -> None:
        self.clock[0] += max(timeout, 0.02)
        if self.answers:
            self.on_commit(*self.answers.popleft())


def test_a_late_answer_to_a_commit_given_up_is_not_taken_for_the_next_ones() -> None:
    """A take's commit is the fence: a success that answered an older commit must not let it pass."""
    now = [0.0]
    consumers: list[ScriptedConsumer] = []

    def consumer(config: dict[str, Any]) -> ScriptedConsumer:
        consumers.append(ScriptedConsumer(config, now))
        return consumers[-1]

    parts = Partitions(
        {},
        consumer,  # type: ignore[arg-type]
        1.0,
        lambda: now[0],
        get_logger("test"),
        collections.Counter(),
        assigned=lambda _p: None,
        revoked=lambda _p: None,
    )
    c = consumers[0]
    assert parts.commit({(TOPIC, 0): 5}) == "_TIMED_OUT"  # no answer within the wait
    first = c.sent[0]
    c.answers.append((None, first))  # ... which comes now, late: that commit landed
    c.answers.append((KafkaError(KafkaError.UNKNOWN_MEMBER_ID), [*first]))  # a subscriber joined since
    assert parts.commit({(TOPIC, 0): 5}) == "UNKNOWN_MEMBER_ID"
    c.answers.append((None, [*first]))
    assert parts.commit({(TOPIC, 0): 5}) == ""
