"""ListOffsets end offsets, one answer per partition: a partition's error never hides the others."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaError, KafkaException

from rackplan.agent.kafka.offsets import end_offsets
from rackplan.agent.testing import FakeAdmin


def test_each_partition_answers_on_its_own() -> None:
    admin = FakeAdmin({"t": [[1], [2]]}, ends={("t", 0): 42})
    got = end_offsets(admin, [("t", 1), ("t", 0), ("t", 0)], 1.0)
    assert got.ends == {("t", 0): 42} and got.failed == {("t", 1): "UNKNOWN_TOPIC_OR_PART"}
    assert end_offsets(admin, [], 1.0).ends == {}


def test_a_request_that_cannot_be_made_fails_every_partition_by_name() -> None:
    class Refusing(FakeAdmin):
        def list_offsets(self, topic_partition_offsets: dict[Any, Any], **_kw: Any) -> Any:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))

    got = end_offsets(Refusing({"t": [[1]]}), [("t", 0), ("t", 1)], 1.0)
    assert got.ends == {} and got.failed == {("t", 0): "_TRANSPORT", ("t", 1): "_TRANSPORT"}
