"""What a PlanFollower is given is checked before any client is made: a bad setting or argument is a
FollowerError naming it, never a record the agent refuses forever nor a traceback from inside poll()."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from rackplan.agent.follower import FollowerClients, FollowerError, PlanFollower
from rackplan.agent.follower import settings as follower_settings
from rackplan.agent.follower.settings import checked_settings
from rackplan.agent.groups.registry import decode_registration
from rackplan.agent.protocol.registrations import FollowerStatus, consumer_registration
from rackplan.agent.settings import section_base
from tests.agent.follower.test_follower import KEY, PLANS, FakeTail, Harness, plan


def _agent_reads(s: Any) -> None:
    """The follower's registration record, through the agent's own decoder (raises when it is refused)."""
    now = int(time.time() * 1000)
    key, value = consumer_registration(
        "g", "m1", rack="az-a", topics=["orders"], timestamp_ms=now, group_instance_id="m1",
        assignor=s.assignor, fetch_mode=s.fetch_mode, objective=s.objective, balance=s.balance,
        balance_floor=s.balance_floor, follower=FollowerStatus(0, "waiting"),
    )  # fmt: skip
    decode_registration(key.encode(), value, now)


@pytest.mark.parametrize(
    "fields",
    [
        {"objective": "bytes"},
        {"balance": "bytes"},
        {"assignor": "range", "objective": "bytes"},
        {"assignor": "cooperative-sticky", "balance": "bytes", "balance_floor": 5.0},
    ],
)
def test_traffic_options_without_rack_optimal_are_refused_naming_the_setting(fields: dict[str, Any]) -> None:
    # The agent's decoder refuses such a record: the member would never be seen (issue: silently, forever).
    with pytest.raises(ValueError, match="needs assignor 'rack-optimal'"):
        _agent_reads(follower_settings.PlanFollowerSettings.model_construct(**fields))
    name = "objective" if "objective" in fields else "balance"
    with pytest.raises(
        FollowerError, match=rf"^follower settings: {name}: 'bytes' needs assignor 'rack-optimal'"
    ):
        checked_settings(fields)


@pytest.mark.parametrize(
    "name",
    [
        "max_clock_skew_s",
        "registration_ttl_s",
        "agent_timeout_s",
        "plan_timeout_s",
        "fallback_grace_s",
        "io_timeout_s",
        "commit_interval_s",
    ],
)
def test_durations_must_be_finite_and_sane(name: str) -> None:
    # Infinity was accepted, and then raised OverflowError inside poll() (int(inf * 1000)).
    for value in (float("inf"), float("nan"), 1e300, 1e-9, True):
        with pytest.raises(FollowerError, match=rf"^follower settings: {name}: "):
            checked_settings({name: value})


def test_the_duration_bounds_are_the_agents() -> None:
    assert follower_settings.MAX_DURATION_S == section_base.MAX_DURATION_S
    assert follower_settings.MIN_DURATION_S == section_base.MIN_DURATION_S
    s = checked_settings({"fallback_grace_s": 0, "max_clock_skew_s": 0, "io_timeout_s": 604800})
    assert (s.fallback_grace_s, s.max_clock_skew_s) == (0, 0)


def test_an_infinite_clock_skew_no_longer_reaches_poll() -> None:
    # It used to be accepted, then every heartbeat raised OverflowError inside poll().
    h = Harness(max_clock_skew_s=float("inf"))
    with pytest.raises(FollowerError, match="max_clock_skew_s"):
        h.follower()
    assert h.broker.records == [] and FakeTail.instances == []  # before any client was made


def _make(topics: Any, instance_id: Any) -> PlanFollower:
    h = Harness()
    return PlanFollower(
        {"bootstrap.servers": "fake:9092", "group.id": "g"},
        topics,
        instance_id,
        h.settings,
        clock=h.clock,
        wall_clock=h.wall,
        clients=FollowerClients(h.broker.consumer, h.broker.producer, h.tail),
    )


@pytest.mark.parametrize("topics", ["orders", 5])
def test_topics_must_be_a_list_of_names(topics: Any) -> None:
    # A str is a sequence: "orders" registered the topics d, e, o, r and s.
    with pytest.raises(FollowerError, match=r"^topics: "):
        _make(topics, "m1")
    assert _make(("orders", "audit", "orders"), "m1").topics == ("audit", "orders")  # any collection of names
    assert _make({"orders"}, "m1").topics == ("orders",)


@pytest.mark.parametrize("instance_id", [5, b"m1", ["m1"]])
def test_instance_id_must_be_a_string(instance_id: Any) -> None:
    with pytest.raises(FollowerError, match=r"^instance_id: "):
        _make(["orders"], instance_id)


def test_a_refused_plan_is_skipped_and_the_generations_go_on() -> None:
    """A plan naming a partition beyond Kafka's int32 (it crashed every poll()), or one partition twice,
    is skipped with its reason; the plan in force stays, and the next good plan is applied."""
    h = Harness()
    f = h.follower()
    tail = FakeTail.instances[-1]
    h.heartbeat()
    tail.push(PLANS, KEY.encode(), plan(1, {"m1": [0], "m2": [1]}))
    f.poll(0)
    assert (f.generation, f.assignment()) == (1, [("orders", 0)])
    tail.push(PLANS, KEY.encode(), plan(2, {"m1": [0, 2**31], "m2": [1]}))
    tail.push(PLANS, KEY.encode(), plan(3, {"m1": [0, 1], "m2": [1]}))
    f.poll(0)
    assert (f.generation, f.assignment(), f.stats["plans_skipped"]) == (1, [("orders", 0)], 2)
    assert f.stats["records_skipped_invalid"] == 2
    tail.push(PLANS, KEY.encode(), plan(4, {"m1": [0, 2], "m2": [1]}))
    f.poll(0)
    assert (f.generation, f.assignment()) == (4, [("orders", 0), ("orders", 2)])
    registered = [json.loads(v) for t, _, v in h.broker.records if t == "_rackplan.registrations" and v]
    assert registered[-1]["released_generation"] == 4
