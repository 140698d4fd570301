"""DescribeConfigs right after a topic is created: the answering broker may not know it yet (CI saw it)."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from rackplan.agent import kafka_io
from rackplan.agent.kafka_io import topic_config_problems


class _Config:
    def __init__(self, value: str) -> None:
        self.value = value


class _Admin:
    """Answers UNKNOWN_TOPIC_OR_PART ``unknown`` times, then a compacted topic's configuration."""

    def __init__(self, unknown: int) -> None:
        self.unknown = unknown
        self.calls = 0

    def describe_configs(self, resources: list[Any], **_: Any) -> dict[Any, Future[dict[str, _Config]]]:
        out: dict[Any, Future[dict[str, _Config]]] = {}
        for r in resources:
            f: Future[dict[str, _Config]] = Future()
            self.calls += 1
            if self.calls <= self.unknown:
                f.set_exception(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)))
            else:
                f.set_result({"cleanup.policy": _Config("compact")})
            out[r] = f
        return out


def _spec() -> Any:
    return kafka_io.TopicSpec("plans", 1, {"cleanup.policy": "compact"})


def test_a_topic_unknown_for_a_moment_is_asked_again(monkeypatch: Any) -> None:
    monkeypatch.setattr(kafka_io, "_UNKNOWN_BACKOFF_S", 0.0)
    admin = _Admin(unknown=3)
    assert topic_config_problems(admin, [_spec()], 1.0) == {}  # type: ignore[arg-type]
    assert admin.calls == 4


def test_a_topic_that_stays_unknown_is_reported(monkeypatch: Any) -> None:
    monkeypatch.setattr(kafka_io, "_UNKNOWN_BACKOFF_S", 0.0)
    admin = _Admin(unknown=100)
    problems = topic_config_problems(admin, [_spec()], 1.0)  # type: ignore[arg-type]
    assert problems is not None and "could not be read" in problems["plans"]
    assert admin.calls == kafka_io._UNKNOWN_RETRIES + 1
