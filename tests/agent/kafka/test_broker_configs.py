"""DescribeConfigs of one broker setting: one request per broker, errors named, never raised."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from rackplan.agent.kafka.broker_configs import broker_setting
from rackplan.agent.testing import FakeAdmin, done


class Entry:
    def __init__(self, value: str | None) -> None:
        self.value = value


class Admin(FakeAdmin):
    """Broker 1 answers the setting, 2 has it empty (unset), 3's request cannot even be made."""

    def describe_configs(self, resources: list[Any], **_kw: Any) -> dict[Any, Future[Any]]:
        (r,) = resources  # librdkafka takes one BROKER resource per request
        if r.name == "3":
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        return {r: done({"x.y": Entry("a.B" if r.name == "1" else "")})}


def test_each_broker_answers_or_is_named_with_its_error() -> None:
    got = broker_setting(Admin({}), [3, 1, 2, 1], "x.y", 1.0)
    assert got.values == {1: "a.B", 2: None}
    assert got.failed == {3: "_TRANSPORT"}
    unsupported = broker_setting(FakeAdmin({}), [1], "x.y", 1.0)
    assert unsupported.values == {} and unsupported.failed == {1: "_UNSUPPORTED_FEATURE"}
