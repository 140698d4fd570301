"""A consumer group's committed offsets by ListConsumerGroupOffsets: what it has read, partition by partition.

One request per group (the API takes one group at a time), waited for within
:func:`~.timeouts.result_timeout_s`; a partition the group never committed
(offset below 0) is left out, and a Kafka error is a name, never an exception.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..core.ports import GroupOffsetsPort
from .errors import error_name
from .offsets import TopicPart
from .timeouts import operation_timeout_s, result_timeout_s


@dataclass(frozen=True, slots=True)
class Committed:
    """The group's committed offsets; ``error``: why none were read ("" when the request succeeded)."""

    offsets: dict[TopicPart, int] = field(default_factory=dict)
    error: str = ""


def committed_offsets(admin: GroupOffsetsPort, group: str, timeout_s: float) -> Committed:
    """Every offset ``group`` has committed (each partition's own error leaves it out)."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    try:
        futures = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)], request_timeout=operation_timeout_s(timeout_s)
        )
        answer = futures[group].result(timeout=result_timeout_s(timeout_s))
    except Exception as e:  # no broker, the coordinator moving, not authorised, unsupported
        return Committed(error=error_name(e, "_NO_ANSWER"))
    out: dict[TopicPart, int] = {}
    for tp in answer.topic_partitions or []:
        if getattr(tp, "error", None) is None and tp.offset >= 0:
            out[(tp.topic, tp.partition)] = int(tp.offset)
    return Committed(out)
