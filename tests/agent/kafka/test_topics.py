"""DescribeConfigs right after a topic is created: the answering broker may not know it yet (CI saw it).

Such an answer is not a problem of the topic: it is raised as a transient read error, and start-up asks
again later (tests/agent/runtime/test_startup_retry.py); an error that waiting cannot fix is the topic's problem.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from rackplan.agent.kafka import topics as kafka_topics
from rackplan.agent.kafka.errors import transient
from rackplan.agent.kafka.exceptions import TopicReadError
from rackplan.agent.kafka.topics import topic_config_problems


class _Config:
    def __init__(self, value: str) -> None:
        self.value = value


class ConfigAdmin:
    """Answers ``error`` for the first ``failing`` DescribeConfigs, then a compacted topic's configuration."""

    def __init__(self, failing: int, error: int = KafkaError.UNKNOWN_TOPIC_OR_PART) -> None:
        self.failing = failing
        self.error = error
        self.calls = 0

    def describe_configs(self, resources: list[Any], **_: Any) -> dict[Any, Future[dict[str, _Config]]]:
        out: dict[Any, Future[dict[str, _Config]]] = {}
        for r in resources:
            f: Future[dict[str, _Config]] = Future()
            self.calls += 1
            if self.calls <= self.failing:
                f.set_exception(KafkaException(KafkaError(self.error)))
            else:
                f.set_result({"cleanup.policy": _Config("compact")})
            out[r] = f
        return out


def _spec() -> Any:
    return kafka_topics.TopicSpec("plans", 1, {"cleanup.policy": "compact"})


def test_a_topic_not_known_yet_is_a_transient_read_error_not_a_problem_of_the_topic() -> None:
    admin = ConfigAdmin(failing=1)
    with pytest.raises(TopicReadError) as e:
        topic_config_problems(admin, [_spec()], 1.0)  # type: ignore[arg-type]
    assert e.value.kafka_error == "UNKNOWN_TOPIC_OR_PART" and transient(e.value)
    assert topic_config_problems(admin, [_spec()], 1.0) == {}  # type: ignore[arg-type]


def test_an_error_waiting_cannot_fix_is_reported_as_the_topics_problem() -> None:
    admin = ConfigAdmin(failing=1, error=KafkaError.TOPIC_AUTHORIZATION_FAILED)
    problems = topic_config_problems(admin, [_spec()], 1.0)  # type: ignore[arg-type]
    assert problems is not None and "could not be read" in problems["plans"]
    assert "Authorization" in problems["plans"] or "AUTHORIZATION" in problems["plans"]


def test_topics_all_created_just_now_are_not_described_and_not_called_unchecked() -> None:
    # Start-up used to say "the brokers do not answer DescribeConfigs" on real Kafka whenever it had
    # created every topic itself: an empty DescribeConfigs is refused by the client, not the brokers.
    import threading

    import structlog

    from rackplan.agent.metrics.registry import Metrics
    from rackplan.agent.runtime.startup import check_topic_configs
    from rackplan.agent.settings.sections import Settings
    from rackplan.agent.state.term import Wiring

    class RealClientAdmin(ConfigAdmin):
        def describe_configs(self, resources: list[Any], **kw: Any) -> dict[Any, Future[dict[str, _Config]]]:
            if not resources:  # what confluent-kafka's AdminClient does
                raise ValueError("Expected non-empty list of ConfigResource objects")
            return super().describe_configs(resources, **kw)

    admin = RealClientAdmin(failing=0)
    with structlog.testing.capture_logs() as logs:
        w = Wiring(Settings(), structlog.get_logger(), Metrics(), lambda: 0.0, threading.Event(), "a")
        check_topic_configs(w, admin, [])  # type: ignore[arg-type]
    assert admin.calls == 0
    assert [e for e in logs if "not checked" in e["event"]] == []
