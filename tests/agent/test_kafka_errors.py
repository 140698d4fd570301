"""``error_name``: the one reading of a Kafka error's name, on confluent-kafka's real error types."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from rackplan.agent.kafka.errors import error_name


def test_names_of_errors_and_of_exceptions_that_carry_them() -> None:
    err = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
    assert error_name(err) == "UNKNOWN_TOPIC_OR_PART"
    assert error_name(KafkaException(err)) == "UNKNOWN_TOPIC_OR_PART"
    assert error_name(KafkaException(KafkaError(KafkaError._TIMED_OUT)), "") == "_TIMED_OUT"


def test_anything_else_gives_the_callers_default_or_its_text() -> None:
    assert error_name(None) == ""
    assert error_name(RuntimeError("boom"), "") == ""
    assert error_name(RuntimeError("boom"), "RuntimeError") == "RuntimeError"
    assert error_name(RuntimeError("boom")) == "boom"
    assert error_name("plain text") == "plain text"
    assert error_name(ValueError(), "") == ""  # no arguments: nothing to unwrap


def test_one_classification_of_what_clears_by_itself() -> None:
    from rackplan.agent.kafka.errors import transient
    from rackplan.agent.kafka.exceptions import TopicReadError

    for code in (
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.NOT_COORDINATOR,
        KafkaError._TRANSPORT,
        KafkaError._TIMED_OUT,
    ):
        assert transient(KafkaException(KafkaError(code))), code
    for code in (
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError._AUTHENTICATION,
        KafkaError.INVALID_CONFIG,
    ):
        assert not transient(KafkaException(KafkaError(code))), code
    # the agent's own read errors name the Kafka error behind them
    assert transient(TopicReadError("replay timed out", "_TIMED_OUT"))
    assert error_name(TopicReadError("x", "TOPIC_AUTHORIZATION_FAILED")) == "TOPIC_AUTHORIZATION_FAILED"
    assert not transient(TopicReadError("x", "TOPIC_AUTHORIZATION_FAILED"))
    assert not transient(RuntimeError("boom")) and not transient(None)
