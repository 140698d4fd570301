"""``error_name``: the one reading of a Kafka error's name, on confluent-kafka's real error types."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException

from rackplan.agent.kafka import errors
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


# ---- the named decisions: one module owns every set of error names ----------------------------------------


_SETS = {
    "TRANSIENT": errors.TRANSIENT,
    "REFUSED": errors.REFUSED,
    "UNSUPPORTED": errors.UNSUPPORTED,
    "UNCERTAIN_DELIVERY": errors.UNCERTAIN_DELIVERY,
    "TOO_LARGE": errors.TOO_LARGE,
    "PRODUCER_FENCED": errors.PRODUCER_FENCED,
    "MEMBERSHIP_LOST": errors.MEMBERSHIP_LOST,
    "COMMIT_FENCED": errors.COMMIT_FENCED,
    "WRITE_REFUSED": errors.WRITE_REFUSED,
    "UNKNOWN_TOPIC": errors.UNKNOWN_TOPIC,
}


#: the Kafka protocol's (Java client's) names of errors librdkafka spells otherwise (NOT_LEADER_FOR_PARTITION,
#: MSG_SIZE_TOO_LARGE): in the sets beside librdkafka's, never seen from confluent-kafka, harmless
_NEWER_NAMES = {"NOT_LEADER_OR_FOLLOWER", "MESSAGE_TOO_LARGE"}


def test_every_name_in_a_set_is_one_confluent_kafka_knows() -> None:
    # A misspelt name would make its decision silently never apply.
    for label, names in _SETS.items():
        assert {n for n in names if not hasattr(KafkaError, n)} <= _NEWER_NAMES, label


def test_the_predicates_judge_an_error_its_exception_and_its_name_alike() -> None:
    predicates = {
        errors.unsupported: errors.UNSUPPORTED,
        errors.delivery_uncertain: errors.UNCERTAIN_DELIVERY,
        errors.too_large: errors.TOO_LARGE,
        errors.membership_lost: errors.MEMBERSHIP_LOST,
        errors.commit_fenced: errors.COMMIT_FENCED,
        errors.write_refused: errors.WRITE_REFUSED,
        errors.unknown_topic: errors.UNKNOWN_TOPIC,
        errors.refused: errors.REFUSED,
    }
    every = set().union(*_SETS.values()) - _NEWER_NAMES
    for predicate, names in predicates.items():
        for name in every:
            err = KafkaError(getattr(KafkaError, name))
            want = name in names
            assert predicate(err) is want and predicate(KafkaException(err)) is want, (predicate, name)
            assert predicate(name) is want, (predicate, name)
        assert not predicate(None) and not predicate(RuntimeError("boom"))


def test_transient_judges_a_name_as_its_error() -> None:
    """The traffic sampler keeps each failed partition's error name and asks ``transient`` of it."""
    assert all(errors.transient(name) for name in errors.TRANSIENT)
    assert not any(errors.transient(name) for name in errors.REFUSED)
    assert not errors.transient("") and not errors.transient("BOOM")


def test_the_sets_that_must_not_overlap_do_not() -> None:
    assert errors.WRITE_REFUSED <= errors.REFUSED
    assert not errors.TRANSIENT & errors.REFUSED
    assert not errors.UNSUPPORTED & errors.TRANSIENT
    # The two _UNSUPPORTED sets of old (topics and membership) reconciled: the broker lacking the API is one
    # set; topic checks also give up on a cluster-level refusal, named as its own decision.
    assert errors.not_answerable("CLUSTER_AUTHORIZATION_FAILED") and not errors.unsupported(
        "CLUSTER_AUTHORIZATION_FAILED"
    )
    assert all(errors.not_answerable(n) for n in errors.UNSUPPORTED)


def test_a_fatal_flag_fences_the_publisher_and_retires_a_producer() -> None:
    fatal = KafkaError(KafkaError._INVALID_ARG, "fatal", fatal=True)
    assert errors.publisher_fenced(fatal) and errors.publisher_fenced(KafkaException(fatal))
    assert errors.unusable_producer(fatal) and errors.unusable_producer(KafkaError(KafkaError._FATAL))
    assert errors.publisher_fenced(KafkaError(KafkaError.PRODUCER_FENCED))
    plain = KafkaError(KafkaError._MSG_TIMED_OUT)
    assert not errors.publisher_fenced(plain) and not errors.unusable_producer(plain)


def test_no_module_but_kafka_errors_keeps_a_set_of_kafka_error_names() -> None:
    # One owner: a set (or tuple) literal of two or more Kafka error names anywhere else in the agent is a
    # decision taken beside this module.
    import ast
    from pathlib import Path

    root = Path(errors.__file__).resolve().parents[1]
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.resolve() == Path(errors.__file__).resolve():
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Set | ast.Tuple | ast.List):
                names = [
                    e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)
                ]
                if len(names) >= 2 and all(hasattr(KafkaError, n) and n.isupper() for n in names):
                    found.append((path.relative_to(root).as_posix(), node.lineno, names))
    assert found == []
