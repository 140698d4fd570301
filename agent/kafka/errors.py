"""Kafka errors, however confluent-kafka hands them over: their names, and every decision taken on them.

confluent-kafka reports an error as a ``KafkaError`` (a metadata entry, a
message, a callback) or raises a ``KafkaException`` whose first argument is
one.  Retry and fence decisions compare names (``"UNKNOWN_TOPIC_OR_PART"``),
so every module reads them the same way (:func:`error_name`) and asks one
named predicate here, in the manner of franz-go's ``kerr``: :func:`transient`
(wait and ask again) against :data:`REFUSED` (the authorizer or the request
itself says no: waiting changes nothing), :func:`unsupported`,
:func:`delivery_uncertain`, :func:`publisher_fenced`, :func:`membership_lost`,
:func:`commit_fenced`...  A module that needs a new decision adds a named set
and predicate here, with the reason, instead of a set of names of its own.
Each predicate takes what confluent-kafka hands over or an error's name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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


def _name(err: object) -> str:
    """The error's name; a string is taken as one already."""
    return err if isinstance(err, str) else error_name(err, "")


#: the broker lacks the API or the version asked for (librdkafka's mock cluster: DescribeGroups,
#: DescribeConfigs, CreateTopics); asking again changes nothing, so the feature degrades instead
UNSUPPORTED = frozenset({"_UNSUPPORTED_FEATURE", "UNSUPPORTED_VERSION", "INVALID_REQUEST"})

#: delivery errors after which the record may be on the topic all the same (sent, fate unknown)
UNCERTAIN_DELIVERY = frozenset({"_MSG_TIMED_OUT", "_TIMED_OUT", "REQUEST_TIMED_OUT", "_PURGE_INFLIGHT"})

#: a request that got no answer in time (locally or from the broker): for a coordinator-targeted Admin
#: call, the group's coordinator is not answering (rackplan.agent.kafka.isolated_admin.Cooldown)
TIMED_OUT = frozenset({"_TIMED_OUT", "REQUEST_TIMED_OUT"})

#: a record larger than the producer's ``message.max.bytes`` (local) or the topic's ``max.message.bytes``
TOO_LARGE = frozenset({"MSG_SIZE_TOO_LARGE", "MESSAGE_TOO_LARGE"})

#: transaction errors meaning a newer producer of the same transactional.id took over
PRODUCER_FENCED = frozenset({"_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"})

#: commit errors that mean a group member is no longer in the group.  A rebalance in progress or a
#: generation that just moved on is not one of them: with the cooperative protocol the holder keeps
#: its partitions through a rebalance (a real loss arrives as a revocation)
MEMBERSHIP_LOST = frozenset({"UNKNOWN_MEMBER_ID", "FENCED_INSTANCE_ID", "_ASSIGNMENT_LOST", "_FENCED"})

#: a plain (group-less) commit refused because the group has members using group subscription (or a
#: membership of ours was lost): the follower's fence (docs/followers.md)
COMMIT_FENCED = frozenset(
    {"UNKNOWN_MEMBER_ID", "ILLEGAL_GENERATION", "REBALANCE_IN_PROGRESS", "FENCED_INSTANCE_ID"}
)

#: a write refused by the authorizer (this principal may not write the topic): an answer, not silence;
#: a subset of :data:`REFUSED`
WRITE_REFUSED = frozenset({"TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED"})

#: the client believes a topic does not exist (librdkafka keeps believing it until its next metadata
#: refresh, see :mod:`rackplan.agent.kafka.metadata_refresh`)
UNKNOWN_TOPIC = frozenset({"_UNKNOWN_TOPIC", "UNKNOWN_TOPIC_OR_PART"})


def unsupported(err: object) -> bool:
    """The broker lacks the API or version: the feature degrades, asking again changes nothing."""
    return _name(err) in UNSUPPORTED


def not_answerable(err: object) -> bool:
    """Nothing can be learnt by asking these brokers this (CreateTopics, DescribeConfigs): the API is
    :func:`unsupported`, or the principal lacks the cluster-level right it takes
    (``CLUSTER_AUTHORIZATION_FAILED``).  Topic checks then know nothing instead of failing."""
    return unsupported(err) or _name(err) == "CLUSTER_AUTHORIZATION_FAILED"


def timed_out(err: object) -> bool:
    """No answer in time (:data:`TIMED_OUT`)."""
    return _name(err) in TIMED_OUT


def delivery_uncertain(err: object) -> bool:
    """A failed delivery whose record may be on the topic all the same."""
    return _name(err) in UNCERTAIN_DELIVERY


def too_large(err: object) -> bool:
    """A record too large for the producer or the topic: no retry can deliver it."""
    return _name(err) in TOO_LARGE


def _fatal_flag(err: object) -> bool:
    inner = err.args[0] if isinstance(err, BaseException) and err.args else err
    fatal = getattr(inner, "fatal", None)
    return callable(fatal) and bool(fatal())


def publisher_fenced(err: object) -> bool:
    """The transactional publisher can never publish again: fenced by a newer producer of its
    transactional.id, or a fatal producer error (the ``KafkaError`` or a ``KafkaException`` around it)."""
    return _name(err) in PRODUCER_FENCED or _fatal_flag(err)


def unusable_producer(err: object) -> bool:
    """A producer that must be replaced: librdkafka's ``_FATAL``, or an error flagged fatal."""
    return _name(err) == "_FATAL" or _fatal_flag(err)


def fatal_cause_unnamed(err: object) -> bool:
    """librdkafka's local ``_FATAL``: the producer turned fatal, and its cause waits in its queue.

    ``produce()`` on a fatal producer names only ``_FATAL``; the cause (the
    brokers' refusal of an idempotent producer id, say) is an error event the
    next ``poll()`` raises.
    """
    return _name(err) == "_FATAL" and not _fatal_flag(err)


def membership_lost(err: object) -> bool:
    """A group member's commit refused because it is no longer in the group (:data:`MEMBERSHIP_LOST`)."""
    return _name(err) in MEMBERSHIP_LOST


def session_timeout_refused(err: object) -> bool:
    """The group coordinator refused a JoinGroup's session timeout: outside the brokers'
    ``group.min.session.timeout.ms`` .. ``group.max.session.timeout.ms``; every join is refused alike."""
    return _name(err) == "INVALID_SESSION_TIMEOUT"


def commit_fenced(err: object) -> bool:
    """A plain commit refused because the group has subscribed members (:data:`COMMIT_FENCED`)."""
    return _name(err) in COMMIT_FENCED


def write_refused(err: object) -> bool:
    """The authorizer refused a write: an answer, remembered as one."""
    return _name(err) in WRITE_REFUSED


def unknown_topic(err: object) -> bool:
    """The client believes the topic does not exist (perhaps only until its next metadata refresh)."""
    return _name(err) in UNKNOWN_TOPIC


def refused(err: object) -> bool:
    """The authorizer or the request itself says no (:data:`REFUSED`): waiting changes nothing."""
    return _name(err) in REFUSED


def transient(err: object) -> bool:
    """Whether ``err`` may clear by itself: named in :data:`TRANSIENT`, or a ``KafkaError`` that says it is
    retriable, and never one in :data:`REFUSED`."""
    name = _name(err)
    if not name or name in REFUSED:
        return False
    if name in TRANSIENT:
        return True
    inner = err.args[0] if isinstance(err, BaseException) and err.args else err
    retriable = getattr(inner, "retriable", None)
    return callable(retriable) and bool(retriable())


def librdkafka_config_error(e: Exception, config: Mapping[str, Any]) -> str:
    """librdkafka's refusal of a client config, naming ``kafka.config``, with secret values masked."""
    from ..core.redact import MASK, is_secret_key

    text = " ".join(str(e.args[0].str() if e.args and hasattr(e.args[0], "str") else e).split())
    for key, value in config.items():
        if is_secret_key(key) and str(value):
            text = text.replace(str(value), MASK)
    return f"kafka.config: librdkafka refuses it: {text}"
