"""The exceptions of rackplan's own Kafka clients: a record not confirmed, a topic not read.

Their own module so that a reader (:mod:`.tail`) and the publisher (:mod:`.publisher`) share them
without importing each other; callers catch :class:`PublishError` for both (a topic that cannot be
read is, to the cycle, a record it cannot confirm).
"""

from __future__ import annotations

from ..core.errors import AgentError


class PublishError(AgentError, RuntimeError):
    """A record was not confirmed by the brokers."""


class DeliveryUncertain(PublishError):
    """A record was sent but its fate is unknown (no delivery report in time, or a timeout that may
    have persisted it): it may still appear on the topic.  A plan's generation is then never reused
    with another content (see :meth:`rackplan.agent.state.plan_book.PlanBook.reserve`)."""


class ProducerFenced(AgentError):
    """Another producer with this publisher's ``transactional.id`` initialised after it: a newer agent
    publishes now.  This producer can never publish again (its open transaction was aborted, so none of
    its records reach read_committed readers); the agent stops publishing and steps down.  Not a
    :class:`PublishError`: no retry can succeed, so it must not be caught as one."""


class PlanTooLargeError(PublishError):
    """A plan exceeds the producer's or topic's maximum message size even compressed."""


class TopicReadError(PublishError):
    """A topic could not be read (missing, unavailable, or not to its end in time).

    ``kafka_error`` names the Kafka error behind it (``_TIMED_OUT`` for a read cut short), so that
    start-up can tell one that clears by itself (:func:`rackplan.agent.kafka.errors.transient`).
    """

    def __init__(self, message: str, kafka_error: str = "") -> None:
        super().__init__(message)
        self.kafka_error = kafka_error
