"""Kafka errors, however confluent-kafka hands them over: their names, and which ones clear by themselves.

confluent-kafka reports an error as a ``KafkaError`` (a metadata entry, a
message, a callback) or raises a ``KafkaException`` whose first argument is
one.  Retry and fence decisions compare names (``"UNKNOWN_TOPIC_OR_PART"``),
so every module reads them the same way, and judges them by the one
classification here: :data:`TRANSIENT` (wait and ask again) against
:data:`REFUSED` (the authorizer or the request itself says no: waiting
changes nothing).
"""

from __future__ import annotations

#: errors that clear by themselves: metadata still spreading (a topic created a moment ago), a partition
#: leader or group/transaction coordinator moving or loading, a broker restarting or out of reach
TRANSIENT = frozenset(
    {
        "NOT_LEADER_FOR_PARTITION",
        "NOT_LEADER_OR_FOLLOWER",
        "LEADER_NOT_AVAILABLE",
        "UNKNOWN_TOPIC_OR_PART",
        "_UNKNOWN_TOPIC",
        "_UNKNOWN_PARTITION",
        "_TIMED_OUT",
        "REQUEST_TIMED_OUT",
        "_TRANSPORT",
        "_ALL_BROKERS_DOWN",
        "NETWORK_EXCEPTION",
        "NOT_COORDINATOR",
        "COORDINATOR_NOT_AVAILABLE",
        "COORDINATOR_LOAD_IN_PROGRESS",
        "_WAIT_COORD",
        "NOT_CONTROLLER",
        "NOT_ENOUGH_REPLICAS",
        "REBALANCE_IN_PROGRESS",
    }
)

#: the brokers' authorizer, or the request itself, saying no: retrying cannot fix it, the operator must
REFUSED = frozenset(
    {
        "TOPIC_AUTHORIZATION_FAILED",
        "GROUP_AUTHORIZATION_FAILED",
        "CLUSTER_AUTHORIZATION_FAILED",
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
        "SASL_AUTHENTICATION_FAILED",
        "_AUTHENTICATION",
        "_SSL",
        "INVALID_CONFIG",
        "INVALID_REPLICATION_FACTOR",
        "INVALID_PARTITIONS",
        "POLICY_VIOLATION",
        "_INVALID_ARG",
    }
)


def error_name(err: object, default: str | None = None) -> str:
    """The ``KafkaError`` name of ``err``: a ``KafkaError``, or an exception whose first argument is one,
    or an exception that names its Kafka error in a ``kafka_error`` attribute (the agent's own read errors).

    Anything else gives ``default``, or when that is None the text of the
    error itself; ``None`` (no error) gives ``""``.
    """
    if err is None:
        return ""
    named = getattr(err, "kafka_error", None)
    if isinstance(err, BaseException) and isinstance(named, str) and named:
        return named
    inner = err.args[0] if isinstance(err, BaseException) and err.args else err
    name = getattr(inner, "name", None)
    if callable(name):
        return str(name())
    return str(inner) if default is None else default


def transient(err: object) -> bool:
    """Whether ``err`` may clear by itself: named in :data:`TRANSIENT`, or a ``KafkaError`` that says it is
    retriable, and never one in :data:`REFUSED`."""
    name = error_name(err, "")
    if not name or name in REFUSED:
        return False
    if name in TRANSIENT:
        return True
    inner = err.args[0] if isinstance(err, BaseException) and err.args else err
    retriable = getattr(inner, "retriable", None)
    return callable(retriable) and bool(retriable())
