"""The ``ha:`` section: several agents, one publisher (the lease, agent/ha/lease.py).

Each duration here becomes a librdkafka property of the lease's consumer, bounded by what librdkafka
accepts; the group id is one librdkafka can join (docs/settings.md lists every key).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator

from .section_base import Section, at_most

#: librdkafka's upper bounds of ``session.timeout.ms`` (an hour) and ``max.poll.interval.ms`` (a day)
MAX_SESSION_TIMEOUT_S = 3600.0
MAX_CYCLE_S = 86_400.0


def group_id_problem(group_id: str) -> str | None:
    """Why librdkafka cannot join consumer group ``group_id``, or None.

    librdkafka strips a ``group.id`` of surrounding whitespace and ends it at a NUL: an empty one (``""``,
    ``" "``) aborted the agent (an assertion in confluent-kafka's ``Consumer_init``) and the supervisor
    restarted it forever; ``"a "`` or ``"a\\x00b"`` would silently be group ``a``.
    """
    if not group_id.strip():
        return "empty: the agents' consumer group needs a name"
    if group_id != group_id.strip():
        return "leading or trailing whitespace: librdkafka drops it, so the group would be another one"
    if any(ord(c) < 32 or ord(c) == 127 for c in group_id):
        return "a control character: librdkafka ends a group id at a NUL; give the group a plain name"
    return None


class HaSettings(Section):
    """Several agents, one publisher: the holder of the lease topic's only partition in a consumer group."""

    #: run for the lease; off: this agent always publishes (one agent per cluster)
    enabled: bool = True
    #: single-partition compacted topic: the lease, and the leader's heartbeat record that followers watch
    lease_topic: str = "_rackplan.lease"
    #: the consumer group of the agents
    group_id: str = "rackplan-agents"
    #: a dead leader's lease moves after this (plus one rebalance)
    session_timeout_s: Annotated[
        float, at_most(MAX_SESSION_TIMEOUT_S, "librdkafka's session.timeout.ms is at most an hour")
    ] = Field(default=10.0, ge=1.0)
    #: a cycle longer than this loses the lease (librdkafka's max.poll.interval.ms)
    max_cycle_s: Annotated[
        float, at_most(MAX_CYCLE_S, "librdkafka's max.poll.interval.ms is at most a day")
    ] = Field(default=300.0, ge=1.0)
    #: this agent's name in heartbeats and plan records; default: <hostname>-<pid>
    agent_id: str | None = None

    @field_validator("group_id")
    @classmethod
    def _joinable(cls, v: str) -> str:
        problem = group_id_problem(v)
        if problem is not None:
            raise ValueError(problem)
        return v
