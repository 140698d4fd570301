"""Start-up asks again while the brokers catch up, for as long as start-up may take (issue 24, item 6).

Its own topics, created a moment before, were UNKNOWN_TOPIC_OR_PART to a busy cluster's answering broker:
start-up gave up after 10 x 0.3 s and exited 1 (final for the supervisor).  Now every step is retried with
a capped exponential backoff while its error is transient, and stops at once, naming the error, on one
that retrying cannot fix.  The agent's own start-up runs here on fake clients (its Kafka readers replaced).
"""

from __future__ import annotations

import io
import json
import random
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from rackplan.agent.core.errors import CannotRun
from rackplan.agent.core.logging import configure, get_logger
from rackplan.agent.kafka.exceptions import TopicReadError
from rackplan.agent.runtime import loop as loop_module
from rackplan.agent.runtime.loop import Agent
from rackplan.agent.runtime.startup_retry import Backoff, StartupStopped, StartupTimedOut, retry_startup
from rackplan.agent.settings.sections import Settings
from rackplan.agent.testing import FakeAdmin, FakePublisher, done, kafka_error
from rackplan.agent.testing_clients import FakeControlTail

PLANS = "_rackplan.plans"


class Log:
    """The agent's structlog pipeline into a buffer; :meth:`named` reads the events back."""

    def __init__(self) -> None:
        self.buf = io.StringIO()
        configure("json", "debug", stream=self.buf)
        self.logger = get_logger("rackplan.test")

    def named(self, event: str) -> list[dict[str, Any]]:
        lines = [json.loads(line) for line in self.buf.getvalue().splitlines()]
        return [d for d in lines if d.get("event") == event]


def failing(n: int, error: Callable[[], BaseException], result: Any = "ok") -> Callable[[], Any]:
    calls = [0]

    def step() -> Any:
        calls[0] += 1
        if calls[0] <= n:
            raise error()
        return result

    step.calls = calls  # type: ignore[attr-defined]
    return step


def unknown_topic() -> BaseException:
    return KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))


FAST = Backoff(initial_s=0.002, max_s=0.008, budget_s=60.0)


def test_a_transient_error_n_times_then_success_is_waited_out_with_capped_backoff() -> None:
    log = Log()
    step = failing(12, unknown_topic)
    assert (
        retry_startup(step, "agent topics", FAST, log.logger, threading.Event(), rng=random.Random(1)) == "ok"
    )
    assert step.calls[0] == 13  # type: ignore[attr-defined]
    waits = log.named("start-up waiting")
    assert [w["attempt"] for w in waits] == list(range(1, 13))
    assert {w["error"] for w in waits} == {"UNKNOWN_TOPIC_OR_PART"} and {w["step"] for w in waits} == {
        "agent topics"
    }
    delays = [w["retry_in_s"] for w in waits]
    assert all(0.001 <= d <= 0.008 for d in delays), delays
    assert max(delays[:2]) <= 0.004 and min(delays[4:]) >= 0.004, (
        delays
    )  # doubling, jittered into [0.5, 1] x, capped
    assert log.named("start-up step done")[0]["attempts"] == 13


def test_the_backoff_doubles_up_to_its_cap_with_jitter_in_half_to_whole() -> None:
    b = Backoff(initial_s=0.5, max_s=30.0, budget_s=600.0)
    rng = random.Random(7)
    for attempt, base in [(1, 0.5), (2, 1.0), (3, 2.0), (6, 16.0), (7, 30.0), (40, 30.0)]:
        d = b.delay(attempt, rng)
        assert base / 2 <= d <= base, (attempt, d)


def test_a_step_still_failing_when_the_budget_runs_out_stops_naming_its_error() -> None:
    log = Log()
    now = [0.0]

    def step() -> None:
        now[0] += 10.0  # every attempt takes 10 s of a 60 s budget
        raise TopicReadError(
            "topic 'plans' unavailable: Broker: Unknown topic or partition", "UNKNOWN_TOPIC_OR_PART"
        )

    with pytest.raises(
        StartupTimedOut, match="plan topic replay: still UNKNOWN_TOPIC_OR_PART after 6 attempts"
    ):
        retry_startup(
            step, "plan topic replay", FAST, log.logger, threading.Event(), monotonic=lambda: now[0]
        )
    assert log.named("start-up gave up")[0]["error"] == "UNKNOWN_TOPIC_OR_PART"


@pytest.mark.parametrize(
    ("error", "raised", "named"),
    [
        (
            lambda: KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)),
            CannotRun,
            "TOPIC_AUTHORIZATION_FAILED",
        ),
        (lambda: KafkaException(KafkaError(KafkaError._AUTHENTICATION)), CannotRun, "_AUTHENTICATION"),
        (
            lambda: TopicReadError(
                "topic 'p' not readable: TOPIC_AUTHORIZATION_FAILED (no Describe right)",
                "TOPIC_AUTHORIZATION_FAILED",
            ),
            TopicReadError,
            "TOPIC_AUTHORIZATION_FAILED",
        ),
        (
            lambda: CannotRun("plan topic 'p': cleanup.policy is 'delete', not compact"),
            CannotRun,
            "cleanup.policy",
        ),
    ],
)
def test_an_error_retrying_cannot_fix_stops_start_up_at_once_with_its_name(
    error: Callable[[], BaseException], raised: type[BaseException], named: str
) -> None:
    log = Log()
    step = failing(1, error)
    with pytest.raises(raised, match=named):
        retry_startup(step, "agent topics", FAST, log.logger, threading.Event())
    assert step.calls[0] == 1 and log.named("start-up waiting") == []  # type: ignore[attr-defined]


def test_stop_while_waiting_ends_start_up_without_an_error() -> None:
    stop = threading.Event()
    stop.set()
    with pytest.raises(StartupStopped):
        retry_startup(failing(1, unknown_topic), "agent topics", FAST, Log().logger, stop)


# ---- the agent's own start-up ------------------------------------------------------------------------


class _Config:
    def __init__(self, value: str) -> None:
        self.value = value


def start_agent(
    monkeypatch: pytest.MonkeyPatch, admin: FakeAdmin, plans: Callable[[], Any]
) -> tuple[Agent, str]:
    """Agent.start() on fakes: the plan topic replay is ``plans``; returns the agent and its log."""
    buf = io.StringIO()
    configure("json", "info", stream=buf)
    monkeypatch.setattr(loop_module, "read_back", lambda *a, **k: plans())
    monkeypatch.setattr(loop_module, "TopicTail", lambda config, topic, timeout: FakeControlTail([topic]))
    settings = Settings.model_validate(
        {
            "ha": {"enabled": False},
            "metadata": {"backoff_initial_s": 0.01, "backoff_max_s": 0.02},
        }
    )
    agent = Agent(settings, admin=admin, publisher=FakePublisher())
    agent.start()
    return agent, buf.getvalue()


class ConfigsAdmin(FakeAdmin):
    """DescribeConfigs answers UNKNOWN_TOPIC_OR_PART ``unknown`` times (a topic created a moment ago)."""

    unknown: int = 0
    described: int = 0

    def describe_configs(self, resources: list[Any], **_kw: Any) -> dict[Any, Future[Any]]:
        out: dict[Any, Future[Any]] = {}
        for r in resources:
            self.described += 1
            out[r] = (
                kafka_error(KafkaError.UNKNOWN_TOPIC_OR_PART)
                if self.described <= self.unknown
                else done({"cleanup.policy": _Config("compact")})
            )
        return out


def test_start_up_waits_out_its_plan_topic_unknown_to_describe_configs_25_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Today's code asked 11 times 0.3 s apart, then stopped (exit 2: "configuration could not be read").
    admin = ConfigsAdmin({PLANS: [[1]]})
    admin.unknown = 25
    agent, log = start_agent(monkeypatch, admin, lambda: [])
    assert agent.term.replayed and admin.described == 26
    waits = [json.loads(line) for line in log.splitlines() if '"start-up waiting"' in line]
    assert len(waits) == 25 and {w["error"] for w in waits} == {"UNKNOWN_TOPIC_OR_PART"}


def test_start_up_waits_out_a_plan_topic_replay_unknown_to_its_broker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Today's code exited 1 (final for the supervisor) on the first TopicReadError of the replay.
    admin = FakeAdmin({PLANS: [[1]]})
    replay = failing(
        4,
        lambda: TopicReadError(
            f"topic {PLANS!r} unavailable: Broker: Unknown topic or partition", "UNKNOWN_TOPIC_OR_PART"
        ),
        result=[],
    )
    agent, log = start_agent(monkeypatch, admin, replay)
    assert agent.term.replayed and replay.calls[0] == 5  # type: ignore[attr-defined]
    assert log.count('"step": "plan topic replay"') >= 5
