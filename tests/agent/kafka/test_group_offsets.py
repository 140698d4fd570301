"""ListConsumerGroupOffsets of one group: committed offsets read, uncommitted and failed partitions left out."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from rackplan.agent.kafka.group_offsets import committed_offsets
from rackplan.agent.testing import done, kafka_error


class Failed:
    """A partition of the answer with its own error (TopicPartition's ``error`` is read-only)."""

    topic, partition, offset = "t", 2, 9
    error = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)


class Answer:
    def __init__(self, parts: list[Any]) -> None:
        self.topic_partitions = parts


class Admin:
    def __init__(self, answer: Future[Any] | None) -> None:
        self.answer = answer
        self.asked: list[str] = []

    def list_consumer_group_offsets(self, requests: list[Any], **_kw: Any) -> dict[str, Future[Any]]:
        (r,) = requests  # the API takes one group per request
        self.asked.append(r.group_id)
        if self.answer is None:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        return {r.group_id: self.answer}


def test_committed_offsets_of_one_group() -> None:
    parts = [TopicPartition("t", 0, 40), TopicPartition("t", 1, -1001), Failed(), TopicPartition("u", 0, 0)]
    admin = Admin(done(Answer(parts)))
    got = committed_offsets(admin, "g", 1.0)
    assert got.error == "" and got.offsets == {("t", 0): 40, ("u", 0): 0}
    assert admin.asked == ["g"]


def test_a_failed_request_is_named_never_raised() -> None:
    assert committed_offsets(Admin(None), "g", 1.0).error == "_TRANSPORT"
    refused = committed_offsets(Admin(kafka_error(KafkaError.GROUP_AUTHORIZATION_FAILED)), "g", 1.0)
    assert refused.offsets == {} and refused.error == "GROUP_AUTHORIZATION_FAILED"
