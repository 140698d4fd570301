"""A cycle waits a bounded time for a coordinator-targeted call (``bounded_wait.BoundedWait``).

The broker-kill scenario on real Kafka (integration/test_kafka_operations.py) planned the leaders' move
15.7-20.6 s after the kill, most of it one call waiting out its timeout on the dead coordinator.  Here
the worker's call is a fake held on an event, so a test decides when it answers; waits are short and
real (the class waits on a thread), the late answers' age runs on the test's clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from rackplan.agent.core.logging import get_logger
from rackplan.agent.kafka.bounded_wait import MAX_LATE_S, BoundedWait
from rackplan.agent.kafka.errors import error_name
from rackplan.agent.kafka.isolated_admin import (
    Cooldown,
    GroupDescribeWorker,
    IsolatedGroupsAdmin,
)
from tests.agent.kafka.test_isolated_admin import closed_port

WAIT_S = 0.2


class HeldCall:
    """A worker call that answers ``g -> (True, 'v<n>:g')`` once released (n: the how-many-th call)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.calls: list[list[str]] = []
        self.ended = threading.Event()

    def __call__(self, group_ids: list[str], _timeout: float) -> dict[str, tuple[bool, Any]]:
        self.calls.append(list(group_ids))
        n = len(self.calls)
        self.release.wait(30)
        self.ended.set()
        return {g: (True, f"v{n}:{g}") for g in group_ids}


@pytest.fixture
def held() -> Iterator[HeldCall]:
    call = HeldCall()
    yield call
    call.release.set()  # no thread left waiting after the test


def names(answers: dict[str, tuple[bool, Any]]) -> dict[str, str]:
    """Each group's answer, or its error's name."""
    return {g: v if ok else error_name(v) for g, (ok, v) in answers.items()}


def wait_ended(waits: BoundedWait) -> None:
    deadline = time.monotonic() + 10
    while waits.running():
        assert time.monotonic() < deadline, "the call's thread never ended"
        time.sleep(0.005)


def test_an_answer_within_the_wait_is_the_answer(held: HeldCall) -> None:
    held.release.set()
    waits = BoundedWait(wait_s=5.0)
    assert names(waits.ask("describe", held, ["a", "b"], 10.0, keep_late=True)) == {"a": "v1:a", "b": "v1:b"}
    assert not waits.running()


def test_an_overrun_is_answered_at_once_and_the_late_description_serves_the_next_overrun(
    held: HeldCall,
) -> None:
    waits = BoundedWait(wait_s=WAIT_S)
    t0 = time.monotonic()
    first = waits.ask("describe", held, ["a", "b"], 10.0, keep_late=True)
    assert time.monotonic() - t0 < WAIT_S + 1.0  # not the call's 10 s
    assert names(first) == {"a": "_IN_PROGRESS", "b": "_IN_PROGRESS"}
    assert "no answer within" in str(first["a"][1])
    # While it runs, nothing more is sent to the worker (one request at a time) and nobody waits.
    t0 = time.monotonic()
    busy = waits.ask("describe", held, ["a"], 10.0, keep_late=True)
    assert time.monotonic() - t0 < WAIT_S and held.calls == [["a", "b"]]
    assert names(busy) == {"a": "_IN_PROGRESS"} and "still runs" in str(busy["a"][1])
    held.release.set()
    wait_ended(waits)
    assert held.calls == [["a", "b"], ["a"]]  # the busy call's group, asked in turn (queued)
    held.release.clear()  # the next call overruns too: the coordinator is slow, not dead
    second = waits.ask("describe", held, ["a", "c"], 10.0, keep_late=True)
    assert names(second) == {"a": "v2:a", "c": "_IN_PROGRESS"}  # a's latest late description
    assert held.calls[-1] == ["a", "c"]  # and it is asked again meanwhile
    third = waits.ask("describe", held, ["b"], 10.0, keep_late=True)
    assert names(third) == {"b": "v1:b"}  # the late answer is used once, the call still running
    held.release.set()
    wait_ended(waits)
    assert held.calls[-1] == ["b"]  # queued by the third ask
    assert names(waits.ask("describe", held, ["a"], 10.0, keep_late=True)) == {"a": "v5:a"}  # in time


def test_late_committed_offsets_are_never_used_but_their_errors_are(held: HeldCall) -> None:
    """A read rate divides offsets by the time they were read at: a late answer would pass for now's.
    A late error is still news (the group's coordinator timed out: the cooldown must hear it)."""

    def one_dead(group_ids: list[str], timeout: float) -> dict[str, tuple[bool, Any]]:
        answers = held(group_ids, timeout)
        return {g: (False, RuntimeError("dead")) if g == "dead" else a for g, a in answers.items()}

    waits = BoundedWait(wait_s=WAIT_S)
    assert names(waits.ask("offsets", one_dead, ["a", "dead"], 10.0, keep_late=False)) == {
        "a": "_IN_PROGRESS",
        "dead": "_IN_PROGRESS",
    }
    held.release.set()
    wait_ended(waits)
    held.release.clear()
    again = waits.ask("offsets", one_dead, ["a", "dead"], 10.0, keep_late=False)
    assert names(again) == {"a": "_IN_PROGRESS", "dead": "dead"}


def test_a_late_description_too_old_is_not_used(held: HeldCall) -> None:
    clock = [0.0]
    waits = BoundedWait(wait_s=WAIT_S, clock=lambda: clock[0])
    waits.ask("describe", held, ["a"], 10.0, keep_late=True)
    held.release.set()
    wait_ended(waits)
    held.release.clear()
    clock[0] += MAX_LATE_S + 1
    assert names(waits.ask("describe", held, ["a"], 10.0, keep_late=True)) == {"a": "_IN_PROGRESS"}


def test_the_wait_is_never_longer_than_the_call_and_a_child_to_start_gets_its_start_up_time(
    held: HeldCall,
) -> None:
    quick = BoundedWait(wait_s=30.0)
    t0 = time.monotonic()
    quick.ask("describe", held, ["a"], WAIT_S, keep_late=True)  # the call's own timeout bounds the wait
    assert time.monotonic() - t0 < 5.0
    held.release.set()
    wait_ended(quick)
    held.release.clear()
    starting = BoundedWait(lambda: True, start_s=0.6, wait_s=WAIT_S)
    threading.Timer(0.4, held.release.set).start()  # answers after the wait, within the start-up time
    assert names(starting.ask("describe", held, ["a"], 10.0, keep_late=True)) == {"a": "v2:a"}


def test_an_overrun_pauses_no_group_and_its_late_timeout_reaches_the_cooldown(held: HeldCall) -> None:
    """Through the agent's admin: one batch holds many groups, and one dead coordinator must not pause
    the others for an overrun (asked again at once); the late answer's timeout reaches the cooldown
    when the next call overruns too, as a timeout in time would."""
    from confluent_kafka import KafkaError, KafkaException

    class Worker:
        pid: int | None = 1

        def describe(self, group_ids: list[str], timeout: float) -> dict[str, tuple[bool, Any]]:
            answers = held(group_ids, timeout)
            dead = KafkaException(KafkaError(KafkaError._TIMED_OUT, "Local: Timed out"))
            return {g: (False, dead) if g == "dead" else a for g, a in answers.items()}

    clock = [100.0]
    admin = IsolatedGroupsAdmin(
        None,  # type: ignore[arg-type]
        Worker(),  # type: ignore[arg-type]
        Cooldown(lambda: clock[0]),
        BoundedWait(wait_s=WAIT_S),
    )

    def describe(*groups: str) -> dict[str, str]:
        futures = admin.describe_consumer_groups(list(groups), request_timeout=10)
        return {
            g: f.result() if f.exception() is None else error_name(f.exception()) for g, f in futures.items()
        }

    assert describe("dead", "live") == {"dead": "_IN_PROGRESS", "live": "_IN_PROGRESS"}
    held.release.set()
    wait_ended(admin.waits)
    held.release.clear()  # the next call overruns as well: the late answers serve it
    assert describe("dead", "live") == {"dead": "_TIMED_OUT", "live": "v1:live"}
    assert held.calls == [["dead", "live"], ["dead", "live"]]
    held.release.set()
    wait_ended(admin.waits)
    # The timeout paused its group (and, briefly, every group: Cooldown): nobody is asked now.
    skipped = admin.describe_consumer_groups(["dead"], request_timeout=10)["dead"].exception()
    assert skipped is not None and "asked again within" in str(skipped)
    assert len(held.calls) == 2


def test_closing_the_worker_ends_a_call_that_overran_at_once() -> None:
    """No broker: the child waits on FindCoordinator for the whole 30 s request timeout; the agent's
    shutdown must not wait for it."""
    worker = GroupDescribeWorker({"bootstrap.servers": f"127.0.0.1:{closed_port()}"}, get_logger("t"))
    admin = IsolatedGroupsAdmin(None, worker, waits=BoundedWait(lambda: worker.pid is None, 20.0, WAIT_S))  # type: ignore[arg-type]
    err = admin.describe_consumer_groups(["g"], request_timeout=30)["g"].exception()
    assert err is not None and error_name(err) == "_IN_PROGRESS" and "no answer within" in str(err)
    assert admin.waits.running()
    t0 = time.monotonic()
    admin.close()
    assert time.monotonic() - t0 < 5.0
    wait_ended(admin.waits)
    assert worker.pid is None


def test_describes_asked_while_the_child_is_busy_are_asked_in_turn_so_no_batch_starves(
    held: HeldCall,
) -> None:
    """Two batches each slower than the wait: the second never finds the child free in its cycle, but
    it is queued, asked after the first on the same thread, and answered, late, in the next cycle.
    Committed offsets asked meanwhile are not queued (a late answer would be useless)."""
    waits = BoundedWait(wait_s=WAIT_S)
    cycle = [
        waits.ask("describe", held, ["a"], 10.0, keep_late=True),
        waits.ask("describe", held, ["b", "c"], 10.0, keep_late=True),
        waits.ask("describe", held, ["c", "d"], 10.0, keep_late=True),
        waits.ask("offsets", held, ["a"], 10.0, keep_late=False),
    ]
    assert [set(names(x).values()) for x in cycle] == [{"_IN_PROGRESS"}] * 4
    held.release.set()
    wait_ended(waits)
    assert held.calls == [["a"], ["b", "c", "d"]]  # the queued groups in one call, after the first
    held.release.clear()  # the next cycle: still slow
    again = {
        g: v for x in (waits.ask("describe", held, ["a"], 10.0, keep_late=True),) for g, v in names(x).items()
    }
    again |= names(waits.ask("describe", held, ["b", "c", "d"], 10.0, keep_late=True))
    assert again == {"a": "v1:a", "b": "v2:b", "c": "v2:c", "d": "v2:d"}


def test_closed_nothing_more_is_sent_and_the_queue_is_dropped(held: HeldCall) -> None:
    waits = BoundedWait(wait_s=WAIT_S)
    waits.ask("describe", held, ["a"], 10.0, keep_late=True)
    waits.ask("describe", held, ["b"], 10.0, keep_late=True)  # queued
    waits.close()
    held.release.set()
    wait_ended(waits)
    assert held.calls == [["a"]]
    assert names(waits.ask("describe", held, ["c"], 10.0, keep_late=True)) == {"c": "_IN_PROGRESS"}
    assert held.calls == [["a"]]
