"""What a :class:`rackplan.agent.follower.PlanFollower` is told: its settings, its identity, its clients' config.

Checked once, when the follower is made, so that a bad value is a
:class:`FollowerError` naming the setting (never a traceback from deep inside
``poll``), and everything after works on checked values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ..core.errors import AgentError
from ..kafka.metadata_refresh import with_metadata_refresh
from ..protocol.plans import CONSUMER, plan_key
from ..protocol.registrations import read_secret_file

#: librdkafka properties that only make sense for the application's consumer
_CONSUMER_ONLY = (
    "group.",
    "enable.auto.",
    "auto.",
    "partition.assignment",
    "session.timeout",
    "heartbeat.",
    "max.poll",
    "fetch.",
    "isolation.",
    "enable.partition.eof",
    "check.crcs",
    "queued.",
    "consume.",
    "offset.store",
)


#: a duration setting (a name ending in ``_s``) is at most this: a week; and, unless 0, at least this.
#: The agent's bounds (:mod:`rackplan.agent.settings.section_base`, which this unit may not import: same
#: rank); tests/agent/follower/test_follower_arguments.py checks that they stay equal.
MAX_DURATION_S = 7 * 24 * 3600.0
MIN_DURATION_S = 0.01


class FollowerError(AgentError, ValueError):
    """The follower cannot be made as configured; the message names the setting."""


class PlanFollowerSettings(BaseModel):
    """Where the agent's records are and how long to wait for them; see docs/followers.md."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    plan_topic: str = Field(default="_rackplan.plans", min_length=1)
    registrations_topic: str = Field(default="_rackplan.registrations", min_length=1)
    lease_topic: str = Field(default="_rackplan.lease", min_length=1)
    #: the agent's registrations.ttl_s: the record is refreshed every third of it
    registration_ttl_s: float = Field(default=300.0, gt=0)
    #: no plan that includes this member for this long: ordinary group subscription
    plan_timeout_s: float = Field(default=60.0, gt=0)
    #: the agent's heartbeat older than this: the agent is gone, ordinary group subscription
    agent_timeout_s: float = Field(default=120.0, gt=0)
    #: between releasing plan partitions and subscribing, so every follower notices the silence first
    fallback_grace_s: float = Field(default=5.0, ge=0)
    #: offsets of plan partitions are committed this often (and always before a partition is given up)
    commit_interval_s: float = Field(default=5.0, gt=0)
    #: how long a commit, a committed-offset lookup or a control-topic read may take
    io_timeout_s: float = Field(default=10.0, gt=0)
    #: group-level registration fields (the newest record carrying them wins, unless the agent's file says)
    assignor: Literal["range", "cooperative-sticky", "rack-optimal"] | None = None
    fetch_mode: Literal["nearest-replica", "leader"] | None = None
    #: rack-optimal's traffic objective and balance rule (docs/CONTRACT.md, "Traffic (optional)")
    objective: Literal["partitions", "bytes"] | None = None
    balance: Literal["count", "bytes"] | None = None
    balance_floor: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    #: a heartbeat dated further than this ahead of our clock counts as written when it is read
    max_clock_skew_s: float = Field(default=10.0, ge=0)
    #: the agent's registrations.secret_file: when set, this member's registration is signed with it
    registration_secret_file: Path | None = None

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_number(cls, value: Any) -> Any:
        """A boolean is no duration (pydantic would read ``true`` as 1 s), as in the agent's settings."""
        if isinstance(value, bool):
            raise ValueError("expected a number, got a boolean")
        return value

    @field_validator("*")
    @classmethod
    def _sane_duration(cls, value: Any, info: ValidationInfo) -> Any:
        """The agent's bounds for every ``*_s`` setting: a week-long timeout is a typo, a nanosecond a busy loop."""
        if (info.field_name or "").endswith("_s") and isinstance(value, int | float) and value:
            if value > MAX_DURATION_S:
                raise ValueError(f"at most {MAX_DURATION_S:g} seconds (a week)")
            if value < MIN_DURATION_S:
                raise ValueError(f"0 or at least {MIN_DURATION_S:g} seconds")
        return value

    @model_validator(mode="after")
    def _coherent(self) -> PlanFollowerSettings:
        if self.commit_interval_s >= self.registration_ttl_s:
            raise ValueError("commit_interval_s must be shorter than registration_ttl_s")
        self._registration_accepted()
        return self

    def _registration_accepted(self) -> None:
        """The group-level fields as the agent's registration decoder judges them: with the contract's
        parser (the agent's check, :mod:`rackplan.agent.settings.contract_checks`), so a record the agent
        would refuse forever (``objective: bytes`` without ``assignor: rack-optimal``) is never written.
        Loaded only for the traffic options, the fields the rest of the model does not check already: a
        follower is a library for applications, which need not load the assignor's parser."""
        traffic = {
            f: v for f in ("objective", "balance", "balance_floor") if (v := getattr(self, f)) is not None
        }
        if not traffic:
            return
        from rackplan.assignor.fields import InputError
        from rackplan.assignor.model import Cluster
        from rackplan.assignor.parse import parse_consumer_group

        group = {"group_id": "-", "members": [], **traffic}
        if self.assignor is not None:
            group["assignor"] = self.assignor
        try:
            parse_consumer_group(group, Cluster(broker_racks={}, topics={}))
        except InputError as e:
            raise ValueError(f"{e.field.removeprefix('consumer_group.')}: {e.message}") from None


@dataclass(frozen=True)
class Identity:
    """Who this member is, in plans and in its registration record."""

    group_id: str
    #: the stable instance id: the member id in plans and the registration's group_instance_id
    member_id: str
    rack: str | None
    #: sorted, no duplicates
    topics: tuple[str, ...]
    #: the group's key on the plan topic (``consumer/<group>``)
    key: str
    #: the registrations secret (settings.registration_secret_file), None: unsigned
    secret: bytes | None


def checked_settings(settings: PlanFollowerSettings | Mapping[str, Any] | None) -> PlanFollowerSettings:
    """The settings as given (a mapping is validated); a bad one raises :class:`FollowerError` naming it."""
    if isinstance(settings, PlanFollowerSettings):
        return settings
    try:
        return PlanFollowerSettings.model_validate(dict(settings or {}))
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        msg = str(first["msg"]).removeprefix("Value error, ")
        raise FollowerError(
            f"follower settings: {where}: {msg}" if where else f"follower settings: {msg}"
        ) from None


def identity(
    consumer_config: Mapping[str, Any],
    topics: Sequence[str],
    instance_id: str,
    settings: PlanFollowerSettings,
) -> Identity:
    """This member's identity from the application's arguments; what is missing raises :class:`FollowerError`."""
    group = consumer_config.get("group.id")
    if not isinstance(group, str) or not group:
        raise FollowerError("consumer config: group.id is required (the group whose plan is followed)")
    if not consumer_config.get("bootstrap.servers"):
        raise FollowerError("consumer config: bootstrap.servers is required")
    if not isinstance(instance_id, str) or not instance_id or "/" in instance_id:
        raise FollowerError(
            f"instance_id: a non-empty stable id (a string) without '/' is required, not {instance_id!r:.60}"
        )
    if isinstance(topics, str | bytes) or not isinstance(topics, Sequence | Set):
        # a str is a sequence of one-letter topics: "orders" would register o, r, d, e, s
        raise FollowerError(f"topics: a list of topic names is required, not {topics!r:.60}")
    if not topics or not all(isinstance(t, str) and t for t in topics):
        raise FollowerError("topics: at least one topic name is required")
    try:
        path = settings.registration_secret_file
        secret = None if path is None else read_secret_file(path, "registration_secret_file")
    except ValueError as e:
        raise FollowerError(f"follower settings: {e}") from None
    rack = consumer_config.get("client.rack")
    return Identity(
        group_id=group,
        member_id=instance_id,
        rack=str(rack) if rack else None,
        topics=tuple(sorted(set(topics))),
        key=plan_key(CONSUMER, group),
        secret=secret,
    )


def client_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The connection part of the application's config, for the follower's own clients (producer, tail),
    which recover quickly from a topic wrongly reported missing (:mod:`rackplan.agent.kafka.metadata_refresh`)."""
    return with_metadata_refresh(
        {
            k: v
            for k, v in config.items()
            if not callable(v) and not any(k.startswith(p) for p in _CONSUMER_ONLY)
        }
    )
