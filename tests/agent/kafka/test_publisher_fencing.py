"""The plan publisher's producer-epoch fencing (issue 9): errors classified, a fenced agent changes nothing.

The broker side (a newer producer of the same transactional.id fences the old one, read_committed readers
never see the old one's open transaction) is tested on real Kafka in integration/test_kafka_fencing.py.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from rackplan.agent.kafka.exceptions import DeliveryUncertain, ProducerFenced, PublishError
from rackplan.agent.kafka.publisher import Publisher, transactional_id
from rackplan.agent.testing import FakeAdmin, FakePublisher
from tests.agent.cycle.test_run import cycle, group, make_agent

PLANS = "_rackplan.plans"


class FakeTxnProducer:
    """Records the transaction calls the publisher makes after a failure."""

    def __init__(self, abort_error: KafkaError | None = None) -> None:
        self.calls: list[str] = []
        self.abort_error = abort_error

    def abort_transaction(self, _timeout: float) -> None:
        self.calls.append("abort")
        if self.abort_error is not None:
            raise KafkaException(self.abort_error)

    def commit_transaction(self, _timeout: float) -> None:
        self.calls.append("commit")

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def produce(self, *_args: object, **_kw: object) -> None:
        self.calls.append("produce")
        raise BufferError("queue full")

    def poll(self, _timeout: float) -> int:
        return 0


def publisher(txn: FakeTxnProducer) -> Publisher:
    p = Publisher(
        {"bootstrap.servers": "127.0.0.1:1"},
        1_000_000,
        transactional_id=transactional_id("rackplan-agents", PLANS),
        fenced_topics=[PLANS],
    )
    p._txn = txn
    return p


def fail(code: int, **flags: bool) -> KafkaException:
    return KafkaException(KafkaError(code, "test", **flags))


def test_the_transactional_id_is_one_per_lease_group_and_plan_topic() -> None:
    assert transactional_id("rackplan-agents", PLANS) == "rackplan-rackplan-agents-_rackplan.plans"
    assert transactional_id("a", PLANS) != transactional_id("b", PLANS)
    assert transactional_id("a", "p1") != transactional_id("a", "p2")


@pytest.mark.parametrize(
    "error",
    [
        fail(KafkaError._FENCED, fatal=True),
        fail(KafkaError.INVALID_PRODUCER_EPOCH),
        fail(KafkaError.PRODUCER_FENCED),
    ],
)
def test_a_fence_is_final_and_never_retried(error: KafkaException) -> None:
    txn = FakeTxnProducer()
    p = publisher(txn)
    out = p._txn_failed(error, 1.0)
    assert isinstance(out, ProducerFenced) and not isinstance(out, PublishError)
    assert "publishes now" in str(out) and p.fenced is not None
    with pytest.raises(ProducerFenced):  # no new transaction is even begun
        p.publish_many(PLANS, [("consumer/g", b"{}")], 1.0)
    assert txn.calls == []


def test_an_abortable_error_aborts_so_nothing_of_the_transaction_is_visible() -> None:
    txn = FakeTxnProducer()
    p = publisher(txn)
    out = p._txn_failed(fail(KafkaError._STATE, txn_requires_abort=True), 1.0)
    assert type(out) is PublishError and txn.calls == ["abort"] and p.fenced is None
    # an abort refused because a newer producer took over: fenced
    txn = FakeTxnProducer(KafkaError(KafkaError._FENCED, "fenced", fatal=True))
    p = publisher(txn)
    assert isinstance(p._txn_failed(fail(KafkaError._STATE, txn_requires_abort=True), 1.0), ProducerFenced)


def test_an_abort_that_did_not_complete_is_retried_before_the_next_transaction() -> None:
    txn = FakeTxnProducer(KafkaError(KafkaError._TIMED_OUT, "slow", retriable=True))
    p = publisher(txn)
    out = p._txn_failed(fail(KafkaError._STATE, txn_requires_abort=True), 1.0)
    assert type(out) is PublishError and p._pending == "abort", "never committed: not uncertain"
    txn.abort_error = None
    with pytest.raises(PublishError, match="queue full"):
        p.publish_many(PLANS, [("consumer/g", b"{}")], 0.2)
    assert txn.calls == ["abort", "abort", "begin", "produce", "abort"]


def test_a_commit_of_unknown_outcome_is_uncertain_and_completed_before_the_next_transaction() -> None:
    txn = FakeTxnProducer()
    p = publisher(txn)
    out = p._txn_failed(fail(KafkaError._TIMED_OUT, retriable=True), 1.0)
    assert isinstance(out, DeliveryUncertain), "its generation is never reused for another content"
    assert p._pending == "commit"
    with pytest.raises(PublishError, match="queue full"):
        p.publish_many(PLANS, [("consumer/g", b"{}")], 0.2)
    # the pending commit first, then the new transaction, aborted when its record could not be sent
    assert txn.calls == ["commit", "begin", "produce", "abort"] and p._pending is None


class FencedOnFlush(FakeTxnProducer):
    """A transactional producer the broker fenced while its record was in flight: librdkafka raises the
    fatal error from flush (seen on real Kafka), not in a delivery report."""

    def produce(self, *_args: object, **_kw: object) -> None:
        self.calls.append("produce")

    def flush(self, _timeout: float) -> int:
        raise fail(KafkaError._FENCED, fatal=True)


def test_a_fence_raised_by_flush_is_a_fence() -> None:
    txn = FencedOnFlush()
    p = publisher(txn)
    with pytest.raises(ProducerFenced):
        p.publish_many(PLANS, [("consumer/g", b"{}")], 1.0)
    assert txn.calls == ["begin", "produce"] and p.fenced is not None


class FencedPublisher(FakePublisher):
    """A publisher whose plan producer a newer agent fenced: plan-topic records never land."""

    def __init__(self) -> None:
        super().__init__()
        self.fenced_topic = PLANS

    def publish_many(self, topic: str, records: list[tuple[str, bytes | None]], timeout_s: float) -> None:
        if topic == self.fenced_topic:
            raise ProducerFenced("plan producer fenced: another agent publishes now (test)")
        super().publish_many(topic, records, timeout_s)


def test_a_fenced_publish_ends_the_cycle_and_records_nothing() -> None:
    """ProducerFenced is not a PublishError: no retry, no generation in the book, it reaches the term loop."""
    admin = FakeAdmin({"t": [[1], [1], [2], [2]]})
    agent, _, _ = make_agent(admin, [group("g")])
    fenced = FencedPublisher()
    agent.publisher = fenced
    with pytest.raises(ProducerFenced):
        cycle(agent)
    assert agent.term.book.latest("consumer/g") is None and fenced.on(PLANS) == []
    agent._fenced(ProducerFenced("test"))
    assert agent.metrics.get("rackplan_publisher_fenced_total") == 1
    assert agent.publisher is fenced, "a publisher given by the caller is the caller's to replace"


def test_only_the_plan_topic_is_transactional() -> None:
    p = publisher(FakeTxnProducer())
    assert p._fenced_topics == frozenset({PLANS})
    assert p._txn_conf["transactional.id"] == "rackplan-rackplan-agents-_rackplan.plans"
    plain = Publisher({"bootstrap.servers": "127.0.0.1:1"}, 1_000_000, fenced_topics=[PLANS])
    assert plain._fenced_topics == frozenset(), "without a transactional.id nothing is transactional"
