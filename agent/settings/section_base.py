"""What every settings section shares: unknown keys refused, frozen, finite numbers, sane durations, topic names."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationInfo, field_validator

#: every duration setting (a name ending in ``_s``) is at most this: a week
MAX_DURATION_S = 7 * 24 * 3600.0
#: ... and, unless 0 (which some settings read as "never"), at least this: 1e-9 is a busy loop
MIN_DURATION_S = 0.01


#: the characters Kafka allows in a topic name, and its longest one
TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")

#: librdkafka's longest admin ``request_timeout`` (an hour), less the 5 s the agent gives every operation
#: beyond its requests (rackplan.agent.kafka.timeouts.OPERATION_GRACE_S)
MAX_ADMIN_REQUEST_S = 3600.0 - 5.0

#: the agent's topics, each of its own kind of record (in the order of their declaration)
TOPIC_KEYS = ("plan_topic", "alerts_topic", "registrations_topic", "traffic_topic", "ha.lease_topic")


def at_most(limit_s: float, why: str) -> AfterValidator:
    """A duration setting's bound below :data:`MAX_DURATION_S`: what librdkafka accepts of what it becomes
    (a larger one passed the settings, then stopped the agent with "internal error: KafkaException")."""

    def check(value: float) -> float:
        if value > limit_s:
            raise ValueError(f"at most {limit_s:g} seconds ({why})")
        return value

    return AfterValidator(check)


def _cluster_name(name: str) -> str:
    """``cluster_name`` as given, or ``ValueError``: it labels every metric sample, snapshot and alert, so a
    blank one labelled them with nothing to tell the cluster by, and ``"eu-1 "`` another cluster than the
    ``eu-1`` of an agent set without the space (the rules and dashboard group by it)."""
    if not name.strip():
        raise ValueError("empty: leave cluster_name out for no cluster label")
    if name != name.strip():
        raise ValueError(
            f"leading or trailing whitespace: another agent's {name.strip()!r} would be another cluster"
        )
    return name


#: the cluster's name (``cluster_name``): neither blank nor padded
ClusterName = Annotated[str, AfterValidator(_cluster_name)]


#: a duration the agent gives Admin API operations as their request timeout (plus 5 s)
AdminRequestS = Annotated[
    float,
    at_most(
        MAX_ADMIN_REQUEST_S, "librdkafka's admin request timeout is at most an hour, and the agent adds 5 s"
    ),
]


def own_topic(key: str, value: Any, earlier: Mapping[str, Any]) -> None:
    """``ValueError`` naming both settings when the topic of setting ``key`` (one of :data:`TOPIC_KEYS`, or
    ``ha``: its ``lease_topic``) is that of one declared before it: every reader takes each record of its
    topic for one of its own (a lease topic that was the plan topic had an agent tombstone another lease
    group's plan and skip its own heartbeats)."""
    topic = getattr(value, "lease_topic", None) if key == "ha" else value
    key = "ha.lease_topic" if key == "ha" else key
    for other in TOPIC_KEYS[: TOPIC_KEYS.index(key)]:
        if topic is not None and earlier.get(other) == topic:
            where = "ha.lease_topic: " if key == "ha.lease_topic" else ""  # named, as loc ``ha`` is not
            raise ValueError(
                f"{where}must be a topic of its own, not {other}'s ({topic!r}): plans, alerts, "
                "registrations, traffic and the lease each need their own topic"
            )


def check_named(value: Any, info: ValidationInfo) -> Any:
    """Checks every setting its name's suffix asks for, whichever model it is in: ``*_s`` durations
    (:func:`check_duration`) and ``*_topic`` Kafka topic names (an empty or illegal name passed
    ``rackplan check`` and then stopped ``agent run`` with "plan topic '' does not exist")."""
    name = info.field_name or ""
    legal = not isinstance(value, str) or (TOPIC_NAME.fullmatch(value) and value not in (".", ".."))
    if name.endswith("_topic") and not legal:
        raise ValueError(
            "not a Kafka topic name: 1 to 249 of the letters, digits, '.', '_' and '-', not '.' or '..'"
        )
    return check_duration(value, info)


def check_duration(value: Any, info: ValidationInfo) -> Any:
    """Sane bounds for every ``*_s`` setting, whichever model it is in (NaN and infinity are refused
    by ``allow_inf_nan=False``): a week-long timeout is a typo, a nanosecond poll a busy loop."""
    name = info.field_name or ""
    if name.endswith("_s") and isinstance(value, int | float) and not isinstance(value, bool) and value:
        if value > MAX_DURATION_S:
            raise ValueError(f"at most {MAX_DURATION_S:g} seconds (a week)")
        if 0 < value < MIN_DURATION_S:
            raise ValueError(f"0 or at least {MIN_DURATION_S:g} seconds")
    return value


def refuse_bool_as_number(cls: type[BaseModel], value: Any, info: ValidationInfo) -> Any:
    """A boolean where a number is due is refused, not read as 0 or 1: YAML reads ``yes``, ``on`` and
    ``true`` as booleans, and pydantic would take ``http.port: yes`` for port 1 (the environment's
    ``true`` was refused already: a string is no number).  Found by an adversarial hunt."""
    if isinstance(value, bool) and info.field_name is not None:
        field = cls.model_fields.get(info.field_name)
        if field is not None and _only_numbers(field.annotation):
            raise ValueError(
                "expected a number, got a boolean (YAML reads yes/no, on/off, true/false as one)"
            )
    return value


def _only_numbers(annotation: Any) -> bool:
    """Whether a field's type is int or float, maybe optional: nothing a boolean could stand for."""
    members = set(getattr(annotation, "__args__", ())) or {annotation}
    return members <= {int, float, type(None)} and bool(members & {int, float})


class Section(BaseModel):
    """A settings section: unknown keys are refused (a typo is an error, never a silent default)."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    _named = field_validator("*")(check_named)
    _numbers = field_validator("*", mode="before")(classmethod(refuse_bool_as_number))
