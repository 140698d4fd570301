"""ListOffsets end offsets, one answer per partition: a partition's error never hides the others."""

from __future__ import annotations

import time
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


def test_a_partition_still_unanswered_at_the_request_timeout_is_left_for_the_next_sample() -> None:
    """A leader that died since the last metadata poll answers nothing: the sample waits the request
    timeout for it, not the operation's grace on top (a broker kill held the agent's cycle 10 s on the
    5 s default), and the partitions that answered still count."""
    from concurrent.futures import Future

    from confluent_kafka import TopicPartition

    class DeadLeader(FakeAdmin):
        def list_offsets(self, topic_partition_offsets: dict[Any, Any], **_kw: Any) -> Any:
            out: dict[Any, Future[Any]] = {}
            for tp in topic_partition_offsets:
                out[tp] = Future()
                if tp.partition == 0:
                    out[tp].set_result(TopicPartition("", 0, 42))
            return out  # partition 1's future never resolves

    t0 = time.monotonic()
    got = end_offsets(DeadLeader({"t": [[1], [2]]}), [("t", 0), ("t", 1)], 0.3)
    assert 0.3 <= time.monotonic() - t0 < 2.0
    assert got.ends == {("t", 0): 42} and got.failed == {("t", 1): "_TIMED_OUT"}
