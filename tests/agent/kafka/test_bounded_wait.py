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
    COOL_BASE_S,
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
    assert names(first) == {"a": "_TIMED_OUT", "b": "_TIMED_OUT"}
    assert "no answer within" in str(first["a"][1])
    # While it runs, nothing more is sent to the worker (one request at a time) and nobody waits.
    t0 = time.monotonic()
    busy = waits.ask("describe", held, ["a"], 10.0, keep_late=True)
    assert time.monotonic() - t0 < WAIT_S and held.calls == [["a", "b"]]
    assert names(busy) == {"a": "_TIMED_OUT"} and "still runs" in str(busy["a"][1])
    held.release.set()
    wait_ended(waits)
    held.release.clear()  # the next call overruns too: the coordinator is slow, not dead
    second = waits.ask("describe", held, ["a", "c"], 10.0, keep_late=True)
    assert names(second) == {"a": "v1:a", "c": "_TIMED_OUT"}  # a's late description, one call late
    assert held.calls[-1] == ["a", "c"]  # and it is asked again meanwhile
    third = waits.ask("describe", held, ["b"], 10.0, keep_late=True)
    assert names(third) == {"b": "v1:b"}  # the late answer is used once, the call still running
    held.release.set()
    wait_ended(waits)
    assert names(waits.ask("describe", held, ["a"], 10.0, keep_late=True)) == {"a": "v3:a"}


def test_late_committed_offsets_are_never_used(held: HeldCall) -> None:
    """A read rate divides offsets by the time they were read at: a late answer would pass for now's."""
    waits = BoundedWait(wait_s=WAIT_S)
    assert names(waits.ask("offsets", held, ["a"], 10.0, keep_late=False)) == {"a": "_TIMED_OUT"}
    held.release.set()
    wait_ended(waits)
    held.release.clear()
    assert names(waits.ask("offsets", held, ["a"], 10.0, keep_late=False)) == {"a": "_TIMED_OUT"}


def test_a_late_description_too_old_is_not_used(held: HeldCall) -> None:
    clock = [0.0]
    waits = BoundedWait(wait_s=WAIT_S, clock=lambda: clock[0])
    waits.ask("describe", held, ["a"], 10.0, keep_late=True)
    held.release.set()
    wait_ended(waits)
    held.release.clear()
    clock[0] += MAX_LATE_S + 1
    assert names(waits.ask("describe", held, ["a"], 10.0, keep_late=True)) == {"a": "_TIMED_OUT"}


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


def test_an_overrun_cools_the_group_like_a_timeout(held: HeldCall) -> None:
    """Through the agent's admin: the overrun is a coordinator timeout to the cooldown as well."""

    class Worker:
        pid: int | None = 1

        def describe(self, group_ids: list[str], timeout: float) -> dict[str, tuple[bool, Any]]:
            return held(group_ids, timeout)

    clock = [100.0]
    admin = IsolatedGroupsAdmin(
        None,  # type: ignore[arg-type]
        Worker(),  # type: ignore[arg-type]
        Cooldown(lambda: clock[0]),
        BoundedWait(wait_s=WAIT_S),
    )
    err = admin.describe_consumer_groups(["a"], request_timeout=10)["a"].exception()
    assert err is not None and "no answer within" in str(err)
    held.release.set()
    wait_ended(admin.waits)
    err = admin.describe_consumer_groups(["a"], request_timeout=10)["a"].exception()
    assert err is not None and f"asked again within {COOL_BASE_S:.0f} s" in str(err)
    assert held.calls == [["a"]]
    clock[0] += COOL_BASE_S + 0.1  # its cooling over, asked again: an answer in time beats the late one
    assert admin.describe_consumer_groups(["a"], request_timeout=10)["a"].result(timeout=5) == "v2:a"


def test_closing_the_worker_ends_a_call_that_overran_at_once() -> None:
    """No broker: the child waits on FindCoordinator for the whole 30 s request timeout; the agent's
    shutdown must not wait for it."""
    worker = GroupDescribeWorker({"bootstrap.servers": f"127.0.0.1:{closed_port()}"}, get_logger("t"))
    admin = IsolatedGroupsAdmin(None, worker, waits=BoundedWait(lambda: worker.pid is None, 20.0, WAIT_S))  # type: ignore[arg-type]
    err = admin.describe_consumer_groups(["g"], request_timeout=30)["g"].exception()
    assert err is not None and "no answer within" in str(err)
    assert admin.waits.running()
    t0 = time.monotonic()
    admin.close()
    assert time.monotonic() - t0 < 5.0
    wait_ended(admin.waits)
    assert worker.pid is None
