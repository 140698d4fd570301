"""The control topics' record values as pydantic models: the one source of their JSON Schemas.

:mod:`rackplan.agent.protocol.schemas` generates docs/*-schema.json (and the
copies shipped in the package) from these models, and a test keeps the files
equal to what they generate, so the schemas cannot drift from the code.  The
encoders stay hand-written (:func:`rackplan.agent.protocol.plans.encode_value`
and its siblings: their bytes are fingerprinted and parsed by the Java
clients); tests check that every value they write validates against these
models and the generated schemas, and that what the decoders refuse for
schema reasons the schemas refuse too.

Conventions: a field that may be absent but never null is typed
``X | SkipJsonSchema[None] = None`` (absent from ``required``, no ``null`` in
the schema); ``X | None`` is a field that may be null.  Fields may be added
within a schema version (readers ignore unknown fields), so no model forbids
extra keys.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, Strict, model_validator
from pydantic.json_schema import SkipJsonSchema
from typing_extensions import TypeAliasType

from .records import MAX_SAFE_INT

#: a counter read from a topic: a non-negative integer every JSON reader keeps exact
Counter = Annotated[int, Field(ge=0, le=MAX_SAFE_INT)]
Fraction = Annotated[float, Field(ge=0, le=1)]
Sha256 = Annotated[str, Field(pattern="^[0-9a-f]{64}$")]
FetchMode = Literal["nearest-replica", "leader"]
NonEmpty = Annotated[str, Field(min_length=1)]


_ABSENT: Any = SkipJsonSchema[None]  # type: ignore[misc]  # the runtime Annotated[None, SkipJsonSchema()]


def _absent_never_null(annotation: Any) -> bool:
    """``X | SkipJsonSchema[None]``: the schema says the field may be absent, not null."""
    return any(a == _ABSENT for a in get_args(annotation))


class _Value(BaseModel):
    model_config = ConfigDict(strict=True, frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _null_is_not_absent(cls, data: Any) -> Any:
        """Validation agrees with the schema: a field that may be absent is not therefore nullable."""
        if isinstance(data, dict):
            for name, info in cls.model_fields.items():
                key = info.alias or name
                if data.get(key, 0) is None and _absent_never_null(info.annotation):
                    raise ValueError(f"{key} may be absent but not null")
        return data


# ---- plan records (plan topic) ----------------------------------------------------------------------

#: ``[topic, partition]`` (a JSON array: lax about the container, strict about its items); a partition is
#: Kafka's int32, as :data:`rackplan.agent.protocol.plans.MAX_PARTITION`
TopicPartition = TypeAliasType(
    "TopicPartition",
    Annotated[
        tuple[str, Annotated[int, Field(ge=0, le=2**31 - 1)]],
        Strict(False),
        Field(min_length=2, max_length=2),
    ],
)
#: member id -> its partitions
Partitions = dict[str, list[TopicPartition]]


class Locality(_Value):
    cross_rack: Annotated[int, Field(ge=0)]
    total: Annotated[int, Field(ge=0)]
    fraction: Fraction


class PlanLocality(_Value):
    fetch_mode: FetchMode
    before: Locality | None = Field(
        description="The previous plan under the metadata of this one; null for a first plan."
    )
    after: Locality


class ConsumerGroupPlan(_Value):
    """The contract's ``consumer_group`` output object."""

    group_id: str
    assignment: Partitions = Field(
        description="Member id -> its partitions. No partition is assigned to two members (Kafka's rule: "
        "no partition is ever owned twice); a plan that does so is refused, the partition named."
    )
    revoked: Partitions


class Tasks(_Value):
    active: list[str]
    standby: list[str]
    warmup: list[str]


class StreamsAppPlan(_Value):
    """The contract's ``streams_app`` output object."""

    application_id: str
    assignment: dict[str, Tasks]
    probing_rebalance_needed: bool | SkipJsonSchema[None] = None


class HandoverTarget(_Value):
    consumer_group: ConsumerGroupPlan
    stats: dict[str, Any]


class RevokingHandover(_Value):
    """In a revoking plan: who must confirm the release, and the target plan."""

    awaiting: list[str] = Field(
        description="Member ids whose registration must say released_generation >= this generation."
    )
    release_timeout_s: Annotated[float, Field(ge=0)] | SkipJsonSchema[None] = None
    target: HandoverTarget
    from_generation: Annotated[int, Field(ge=1)] | SkipJsonSchema[None] = Field(
        default=None, description="With unreleased: this plan's own generation."
    )
    unreleased: Partitions | SkipJsonSchema[None] = Field(
        default=None,
        description="Per holder under the previous plan that is no live follower any more (its registration "
        "expired or was tombstoned), the partitions this plan gives another member: a plan follower takes "
        "none of them before that holder's registration says released_generation >= from_generation, mode "
        "subscription, or is gone (tombstoned or older than the registration TTL).",
    )


class CompletedHandover(_Value):
    """In the plan that completes a handover: the revoking generation and who did not confirm in time.

    A single-phase plan of a group with plan followers that gives away a departed holder's partitions
    carries one too: its own generation, nobody timed out, and those partitions under ``unreleased``.
    """

    from_generation: Annotated[int, Field(ge=1)]
    timed_out: list[str]
    unreleased: Partitions | SkipJsonSchema[None] = Field(
        default=None,
        description="Per member of timed_out, the partitions the revoking plan asked it to give up; and per "
        "holder under the previous plan that is no live follower any more (its registration expired or was "
        "tombstoned), the partitions given to another member. A plan follower takes none of them before "
        "that member's registration says released_generation >= from_generation, mode subscription, or is "
        "gone (tombstoned or older than the registration TTL).",
    )


class Publisher(_Value):
    agent_id: str
    epoch: Annotated[int, Field(ge=0)]


class PlanValue(_Value):
    """Value of a record on the plan topic. Key: consumer/<group_id> or streams/<application_id> (UTF-8). A null value (tombstone) means the group or app was unregistered. Fields may be added; none are renamed or removed."""

    model_config = ConfigDict(
        title="rackplan plan record value (schema 1)",
        json_schema_extra={
            "oneOf": [
                {"required": ["consumer_group"], "not": {"required": ["streams_app"]}},
                {"required": ["streams_app"], "not": {"required": ["consumer_group"]}},
            ]
        },
    )

    schema_: Literal[1] = Field(alias="schema")
    generation: Annotated[int, Field(ge=1, le=MAX_SAFE_INT)] = Field(
        description="Increases by one for every new plan of a key, across agent restarts."
    )
    state: Literal["proposed", "revoking"] = Field(
        description="proposed: the plan to follow (every plan of a group without plan followers, and the "
        "second phase of a two-phase handover). revoking: the first phase of a two-phase handover of a "
        "group whose members follow plans: partitions that move away from a live follower are assigned "
        "to nobody and listed under revoked; the target comes in the next generation once the old owners "
        "confirm the release (docs/followers.md). Plans are recommendations; the agent never changes "
        "the cluster."
    )
    cluster_fingerprint: Sha256 = Field(
        description="sha256 of what the plan depends on: the replica rack sets of its topics (and leader "
        "racks in leader fetch mode)."
    )
    registration_fingerprint: Sha256 | SkipJsonSchema[None] = Field(
        default=None, description="sha256 of the registration the plan was computed for."
    )
    reason: str = Field(description="Why this plan exists, e.g. 'replica racks changed: orders-3, orders-7'.")
    created_at: str = Field(json_schema_extra={"format": "date-time"})
    created_at_ms: Annotated[int, Field(ge=0)] | SkipJsonSchema[None] = Field(
        default=None,
        description="created_at as Unix epoch milliseconds: every record rackplan writes (plans, "
        "registrations, heartbeats, alerts) carries its times in this encoding (fields ending in _ms).",
    )
    moved: Annotated[int, Field(ge=0)] = Field(
        description="Partitions (consumer groups) or active tasks (Streams) that change owner relative to "
        "the previous plan."
    )
    locality: PlanLocality
    consumer_group: ConsumerGroupPlan | SkipJsonSchema[None] = None
    streams_app: StreamsAppPlan | SkipJsonSchema[None] = None
    stats: dict[str, Any] = Field(
        description="The contract's stats object of rackplan assign. In a revoking plan: the target's, "
        "with assigned counting what this phase assigns. rack-optimal adds `optimal` (true when the "
        "fewest cross-rack partitions over every balanced assignment is proven) and, when it is not, "
        "`cross_rack_lower_bound` (a proven bound)."
    )
    handover: RevokingHandover | CompletedHandover | SkipJsonSchema[None] = Field(
        default=None,
        description="Two-phase handovers (groups with plan followers). In a revoking plan: who must "
        "confirm the release, and the target plan. In the plan that completes it: the revoking "
        "generation and the followers that did not confirm before followers.release_timeout_s. Any plan "
        "of such a group that gives away the partitions of a holder that is no live follower any more "
        "lists them under unreleased.",
    )
    publisher: Publisher | SkipJsonSchema[None] = Field(
        default=None,
        description="The agent that published the plan, when several run (ha.enabled): its id and "
        "leadership epoch. Epochs never go backwards on the plan topic.",
    )

    @model_validator(mode="before")
    @classmethod
    def _schema_is_no_boolean(cls, data: Any) -> Any:
        """The schema's ``schema`` is the integer 1: ``true`` (equal to 1 in Python, not in JSON Schema) is not."""
        if isinstance(data, dict) and isinstance(data.get("schema"), bool):
            raise ValueError("schema must be the integer 1, not a boolean")
        return data

    @model_validator(mode="after")
    def _one_body(self) -> PlanValue:
        """The schema's ``oneOf``: a plan holds a consumer group or a Streams app, never both."""
        if (self.consumer_group is None) == (self.streams_app is None):
            raise ValueError("exactly one of consumer_group or streams_app is required")
        return self


# ---- registrations (registrations topic) --------------------------------------------------------------

_RACK = "The client's client.rack; null: none. Rack ids are opaque strings compared exactly."


class _Registration(_Value):
    #: keys of the other kind of record: the schema's ``not`` (validation agrees)
    _OTHER_KIND: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="before")
    @classmethod
    def _not_the_other_kind(cls, data: Any) -> Any:
        if isinstance(data, dict) and (other := [k for k in cls._OTHER_KIND if k in data]):
            raise ValueError(f"{other[0]} belongs to the other kind of registration")
        return data

    schema_: Literal[1] = Field(alias="schema")
    timestamp_ms: Counter | SkipJsonSchema[None] = Field(
        default=None,
        description="When the client registered (Unix epoch milliseconds). It can only make the entry "
        "older than the record's broker timestamp says; required in a signed record (at most "
        "registrations.max_clock_skew_s ahead of the record's timestamp; the entry's age counts from it).",
    )
    signature: Annotated[str, Field(pattern="^hmac-sha256:[0-9a-f]{64}$")] | SkipJsonSchema[None] = Field(
        default=None,
        description="With registrations.secret_file: HMAC-SHA256, keyed with the shared secret, of the "
        "value without this field as compact JSON with keys sorted and non-ASCII escaped (Python "
        "json.dumps(v, sort_keys=True, separators=(',', ':'))), in lowercase hex after 'hmac-sha256:'. "
        "docs/security.md.",
    )


class ConsumerMemberRegistration(_Registration):
    """A consumer group member (key consumer/<group_id>/<member_id>)."""

    model_config = ConfigDict(
        json_schema_extra={"not": {"anyOf": [{"required": ["application_id"]}, {"required": ["process_id"]}]}}
    )
    _OTHER_KIND = ("application_id", "process_id")

    group_id: NonEmpty
    member_id: NonEmpty = Field(description="As in plans: the member id the plan assigns partitions to.")
    rack: str | None = Field(default=None, description=_RACK)
    topics: list[NonEmpty] = Field(description="Subscribed topics.")
    group_instance_id: str | None = Field(
        default=None,
        description="group.instance.id of a static member; also matches the member in DescribeGroups.",
    )
    assignor: Literal["range", "cooperative-sticky", "rack-optimal"] | SkipJsonSchema[None] = Field(
        default=None,
        description="Group-level: the newest record carrying it wins, unless the settings file defines "
        "the group.",
    )
    fetch_mode: FetchMode | SkipJsonSchema[None] = Field(
        default=None, description="Group-level, like assignor."
    )
    objective: Literal["partitions", "bytes"] | SkipJsonSchema[None] = Field(
        default=None,
        description="Group-level, like assignor: what rack-optimal minimises (docs/CONTRACT.md, Traffic).",
    )
    balance: Literal["count", "bytes"] | SkipJsonSchema[None] = Field(
        default=None,
        description="Group-level, like assignor: rack-optimal's balance rule (docs/CONTRACT.md, Traffic).",
    )
    balance_floor: Annotated[float, Field(ge=0, allow_inf_nan=False)] | SkipJsonSchema[None] = Field(
        default=None,
        description="Group-level, like assignor: bytes/s added to each partition's weight under "
        "balance: bytes.",
    )
    follower: bool | SkipJsonSchema[None] = Field(
        default=None,
        description="The member follows plans (agent.follower.PlanFollower): the agent hands its "
        "partitions over in two phases. Changes of the three follower fields never re-plan the group.",
    )
    released_generation: Annotated[int, Field(ge=0)] | None = Field(
        default=None,
        description="Follower: highest plan generation applied; everything outside its assignment there "
        "is released and its offsets committed.",
    )
    mode: Literal["waiting", "plan", "subscription"] | SkipJsonSchema[None] = Field(
        default=None,
        description="Follower: no plan applied yet (or none includes it), following the plan, or fallen "
        "back to ordinary group subscription.",
    )


class Subtopology(_Value):
    id: str | int
    source_topics: list[str] = Field(min_length=1)
    changelog_topics: list[str] | SkipJsonSchema[None] = None
    stateful: bool | SkipJsonSchema[None] = None


class RackAware(_Value):
    strategy: Literal["none", "min_traffic", "balance_subtopology"] | SkipJsonSchema[None] = None
    traffic_cost: Annotated[int, Field(ge=0)] | SkipJsonSchema[None] = None
    non_overlap_cost: Annotated[int, Field(ge=0)] | SkipJsonSchema[None] = None
    weigh_by_traffic: bool | SkipJsonSchema[None] = None


class StreamsClientRegistration(_Registration):
    """A Kafka Streams client (key streams/<application_id>/<process_id>)."""

    model_config = ConfigDict(
        json_schema_extra={"not": {"anyOf": [{"required": ["group_id"]}, {"required": ["member_id"]}]}}
    )
    _OTHER_KIND = ("group_id", "member_id")

    application_id: NonEmpty
    process_id: NonEmpty
    rack: str | None = Field(default=None, description=_RACK)
    threads: Annotated[int, Field(ge=1)] | SkipJsonSchema[None] = None
    tags: dict[str, str] | SkipJsonSchema[None] = Field(
        default=None, description="Client tags (rack.aware.assignment.tags)."
    )
    consumer_client_ids: list[NonEmpty] | SkipJsonSchema[None] = Field(
        default=None,
        description="The client's stream thread consumers as Kafka Streams' KafkaStreamsState.consumerClientIds() "
        "names them at the group leader (sorted): a live member of the app's group whose member id or client.id "
        "is one of them is this client, whatever client.id the app set. Never part of a plan: a change does "
        "not plan the app again.",
    )
    subtopologies: list[Subtopology] | SkipJsonSchema[None] = Field(
        default=None,
        description="App-level: the topology, as in the contract's streams_app. At least one record of an "
        "app must carry it.",
    )
    num_standby_replicas: Annotated[int, Field(ge=0)] | SkipJsonSchema[None] = None
    acceptable_recovery_lag: Annotated[int, Field(ge=0)] | SkipJsonSchema[None] = None
    max_warmup_replicas: Annotated[int, Field(ge=1)] | SkipJsonSchema[None] = None
    rack_aware_assignment_tags: list[str] | SkipJsonSchema[None] = None
    rack_aware: RackAware | SkipJsonSchema[None] = None
    assignor: Literal["high-availability", "sticky"] | SkipJsonSchema[None] = None
    fetch_mode: FetchMode | SkipJsonSchema[None] = None


#: a registration value: one of the two record kinds (the key says which)
RegistrationValue = ConsumerMemberRegistration | StreamsClientRegistration


# ---- the leader's heartbeat (lease topic) --------------------------------------------------------------


class HeartbeatValue(_Value):
    """Value of the record with key 'leader' (UTF-8) on the lease topic (ha.lease_topic, one partition, compacted). The publishing agent writes one every cycle. Plan followers treat the agent as gone when the newest heartbeat is older than their agent_timeout_s; a new leader's epoch is one more than the newest heartbeat's. Records with other keys or malformed values are skipped with a logged reason."""

    model_config = ConfigDict(title="rackplan leader heartbeat (schema 1)")

    schema_: Literal[1] = Field(alias="schema")
    agent_id: NonEmpty = Field(description="ha.agent_id, default <hostname>-<pid>.")
    epoch: Counter = Field(
        description="Leadership epoch: increases with every leadership term, across agents and restarts."
    )
    timestamp_ms: Counter = Field(
        description="When it was written (Unix epoch milliseconds, the agent's clock). Agents and followers "
        "judge a heartbeat's age by the record's broker timestamp; one more than max_clock_skew_s ahead of "
        "the reader's clock counts as written when it was read."
    )
    interval_s: Annotated[float, Field(gt=0, le=3600)] = Field(
        description="The agent's poll_interval_s: the next heartbeat is due about this much later."
    )
    lease_group: str | None = Field(
        default=None,
        description="ha.group_id when the writer runs for the lease (ha.enabled), else null. Agents of one "
        "lease group take over from each other; a live heartbeat from an agent outside the reader's lease "
        "group is a foreign writer: an agent refuses to start (exit 2) while one heartbeats, and stops if "
        "one appears. Absent in records written before this field existed (read as null).",
    )
    released: bool | SkipJsonSchema[None] = Field(
        default=None,
        description="True on the last heartbeat of a clean stop (with or without ha.enabled; never from an agent "
        "that lost the lease): a successor need not wait for it to age. Absent: false.",
    )


# ---- locality alerts (alerts topic) ---------------------------------------------------------------------


class AlertValue(_Value):
    """Value of a record on the alerts topic (alerts_topic, one partition, cleanup.policy=delete); the record key is the plan key (<kind>/<name>, UTF-8). One record per alert event: a locality alert firing or resolving, or the one-off report that a group is unfixable. Versioning: fields are only ever added within schema 1 (readers must ignore unknown fields); a change of meaning or a removal gets schema 2. Records written before schema 1 existed have no 'schema', 'alertname', 'severity', 'runbook_url', 'at_ms' or 'started_at_ms'. Times: 'at_ms'/'started_at_ms' are integer epoch milliseconds, the encoding of the registration and lease records' 'timestamp_ms'; 'at'/'started_at' (float epoch seconds) stay for existing readers."""

    model_config = ConfigDict(title="rackplan locality alert event (schema 1)")

    schema_: Literal[1] = Field(alias="schema")
    key: Annotated[str, Field(pattern=r"^(consumer|streams)/[\s\S]+$")] = Field(
        description="The plan key: consumer/<group id> or streams/<application id> (an id may hold any "
        "character, line breaks included)."
    )
    alertname: Literal["RackplanCrossRackLocality", "RackplanLocalityUnfixable"] = Field(
        description="RackplanCrossRackLocality: the group reads too much cross-rack and rebalancing would "
        "fix it (firing, resolved). RackplanLocalityUnfixable: even the group's best plan is above the "
        "threshold (reported once). docs/runbook.md has a section for each."
    )
    status: Literal["firing", "resolved", "unfixable"] = Field(
        description="firing: bad for alerts.for_s; resolved: fine for alerts.keep_firing_for_s (or the group "
        "was unregistered); unfixable: the one-off report, never resolved (it is forgotten once the group "
        "has been fixable for alerts.keep_firing_for_s)."
    )
    severity: NonEmpty = Field(description="alerts.severity or alerts.unfixable_severity.")
    cross_rack_fraction_before: Fraction = Field(
        description="The baseline: the fraction before the change that made the group bad (for a resolved "
        "event: the fraction when it fired)."
    )
    cross_rack_fraction_now: Fraction = Field(
        description="The group's current assignment (the real one where DescribeGroups shows it, else the "
        "plan of record)."
    )
    cross_rack_fraction_planned: Fraction | None = Field(
        description="What the plan of record gives under the current metadata, when known."
    )
    threshold: Fraction = Field(description="alerts.cross_rack_threshold.")
    reason: str = Field(
        description="Why: the metadata change, 'initial state: ...', 'locality recovered', 'group "
        "unregistered', ..."
    )
    runbook_url: str = Field(description="alerts.runbook_url + '#' + the alertname in lower case.")
    at: float = Field(description="When the event happened, epoch seconds (float).")
    at_ms: Annotated[int, Field(ge=0)] = Field(description="The same instant, epoch milliseconds.")
    started_at: float = Field(
        description="When the condition began (the start of the hold-down), epoch seconds (float)."
    )
    started_at_ms: Annotated[int, Field(ge=0)] = Field(description="The same instant, epoch milliseconds.")
    cross_rack_bytes_per_s: Annotated[float, Field(ge=0)] | SkipJsonSchema[None] = Field(
        default=None,
        description="Measured bytes/s the group's current assignment reads across racks (docs/agent.md, "
        "Traffic); absent while no traffic is measured for the group's topics.",
    )
    cross_rack_dollars_per_month: Annotated[float, Field(ge=0)] | SkipJsonSchema[None] = Field(
        default=None,
        description="What those bytes cost over an average month at prices.cross_az_per_gb, charged each way.",
    )


# ---- the webhook's payload (Alertmanager API v2) ----------------------------------------------------------


class PostableAlert(_Value):
    """One alert of Alertmanager's API v2 ``postableAlerts``, as :func:`rackplan.agent.alerts.webhook.alertmanager_alert` makes it."""

    labels: dict[str, str]
    annotations: dict[str, str]
    startsAt: str = Field(json_schema_extra={"format": "date-time"})
    endsAt: str = Field(json_schema_extra={"format": "date-time"})
    generatorURL: str | SkipJsonSchema[None] = None


#: the body of one webhook request: a JSON array of postable alerts
WebhookBody = list[PostableAlert]
