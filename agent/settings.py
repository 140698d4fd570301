"""The agent's settings: one YAML file, every key overridable by environment.

The keys of ../shared/CONTRACT.md ("The agent's interfaces") are fixed; the
rest have defaults documented in docs/settings.md.  The environment wins over
the file (``RACKPLAN_`` prefix, ``__`` between levels), and nested objects are
merged key by key, so ``RACKPLAN_KAFKA__BOOTSTRAP_SERVERS`` keeps the file's
``kafka.config``.  Secrets (SASL passwords, SSL keys) never reach a log: the
settings' repr and :meth:`Settings.redacted` mask them.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import json
import re
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from assignor.model import Cluster
from assignor.parse import InputError, parse_consumer_group, parse_streams_app

ENV_PREFIX = "RACKPLAN_"
MASK = "***"
_SECRET_KEY = re.compile(r"(password|secret|token|jaas|credential|\.key$|key\.pem|keystore|private)", re.I)

FetchMode = Literal["nearest-replica", "leader"]
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
#: labels of the webhook's alerts that the agent sets itself
RESERVED_ALERT_LABELS = frozenset({"alertname", "kind", "group"})


def is_secret_key(key: str) -> bool:
    """librdkafka properties whose values must never be logged."""
    return bool(_SECRET_KEY.search(key)) and not key.endswith(".location")


def mask_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a client config with secret values replaced by ``***``."""
    return {k: (MASK if is_secret_key(k) else v) for k, v in sorted(config.items())}


def redact_url(url: str) -> str:
    """A URL with any ``user:password@`` replaced by ``***@``."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{MASK}@{host}"))


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KafkaSettings(_Section):
    bootstrap_servers: str = "127.0.0.1:9092"
    #: any librdkafka property, passed through to every client the agent makes
    config: dict[str, str | int | float | bool] = Field(default_factory=dict)
    #: librdkafka property -> file whose content is its value (e.g. a mounted secret)
    secret_files: dict[str, Path] = Field(default_factory=dict)

    @field_validator("config", mode="before")
    @classmethod
    def _env_keys(cls, v: Any) -> Any:
        # Environment variable names cannot hold dots: RACKPLAN_KAFKA__CONFIG__SASL_MECHANISM
        # arrives as "sasl_mechanism".  librdkafka property names never contain "_".
        if isinstance(v, dict):
            return {str(k).replace("_", "."): val for k, val in v.items()}
        return v

    def client_config(self) -> dict[str, Any]:
        """The full librdkafka config: bootstrap servers, passthrough, secrets read from files."""
        out: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        out.update(self.config)
        for key, path in sorted(self.secret_files.items()):
            out[key] = path.read_text(encoding="utf-8").strip()
        return out

    def __repr_args__(self) -> Any:
        yield "bootstrap_servers", self.bootstrap_servers
        yield "config", mask_config(self.config)
        yield "secret_files", {k: str(p) for k, p in sorted(self.secret_files.items())}


class HttpSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(default=9464, ge=0, le=65535)


class AlertSettings(_Section):
    #: fire when a group's cross-rack fraction exceeds this (0..1) ...
    cross_rack_threshold: float = Field(default=0.25, ge=0.0, le=1.0)
    #: ... or when a change worsens it by at least this much
    worsen_delta: float = Field(default=0.10, ge=0.0, le=1.0)
    #: no new firing alert for a group within this many seconds of its last one
    cooldown_s: float = Field(default=300.0, ge=0.0)
    #: fnmatch patterns on group ids / application ids; deny wins
    allow: tuple[str, ...] = ("*",)
    deny: tuple[str, ...] = ()


class MetadataSettings(_Section):
    request_timeout_s: float = Field(default=15.0, gt=0)
    #: unused since snapshots come from one Metadata request; accepted so existing settings files still load
    describe_batch_size: int = Field(default=500, ge=1)
    #: attempts per poll before the poll counts as failed (the last good snapshot is kept)
    max_attempts: int = Field(default=4, ge=1)
    backoff_initial_s: float = Field(default=0.5, gt=0)
    backoff_max_s: float = Field(default=30.0, gt=0)
    #: topics whose names start with these are not watched
    exclude_prefixes: tuple[str, ...] = ("__",)


class WebhookSettings(_Section):
    """Alertmanager API v2 (``POST /api/v2/alerts``); no ``url``, no webhook."""

    url: str | None = None
    #: per HTTP request; the poll loop never waits for the webhook
    timeout_s: float = Field(default=5.0, gt=0)
    max_attempts: int = Field(default=5, ge=1)
    backoff_initial_s: float = Field(default=0.5, gt=0)
    backoff_max_s: float = Field(default=30.0, gt=0)
    #: firing alerts are sent again this often while they fire (Alertmanager expects it)
    resend_interval_s: float = Field(default=60.0, gt=0)
    #: batches waiting for delivery; beyond it the oldest batch is dropped (and counted)
    queue_size: int = Field(default=100, ge=1)
    #: extra labels on every alert (e.g. ``{cluster: prod}``)
    labels: dict[str, str] = Field(default_factory=dict)
    #: extra HTTP headers (e.g. Authorization); values are secrets, never logged
    headers: dict[str, str] = Field(default_factory=dict)
    #: back-link on every alert; default: none
    generator_url: str | None = None

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is not None and urllib.parse.urlsplit(v).scheme not in ("http", "https"):
            raise ValueError(f"expected an http:// or https:// URL, got {redact_url(v)!r}")
        return v

    @field_validator("labels")
    @classmethod
    def _label_names(cls, v: dict[str, str]) -> dict[str, str]:
        for name in v:
            if not _LABEL_NAME.fullmatch(name) or name.startswith("__"):
                raise ValueError(f"{name!r} is not a valid Prometheus label name")
            if name in RESERVED_ALERT_LABELS:
                raise ValueError(f"label {name!r} is set by the agent")
        return v

    def __repr_args__(self) -> Any:
        yield "url", None if self.url is None else redact_url(self.url)
        yield "headers", {k: MASK for k in sorted(self.headers)}
        yield "labels", self.labels


class RegistrationSettings(_Section):
    """Registrations read from ``registrations_topic``."""

    #: an entry older than this (its ``timestamp_ms``, else the record's timestamp) is dropped; 0: never
    ttl_s: float = Field(default=300.0, ge=0)
    #: per cycle, how long reading new registration records may take
    read_timeout_s: float = Field(default=5.0, gt=0)
    #: partitions of a registrations topic the agent creates
    partitions: int = Field(default=1, ge=1)
    #: let records of the registrations topic add members to groups the settings file defines (docs/security.md)
    allow_override_settings_groups: bool = False
    #: a record timestamp further than this in the future counts as the record's arrival
    max_clock_skew_s: float = Field(default=10.0, ge=0)
    #: file holding a shared secret: only registrations signed with it (HMAC-SHA256) count
    secret_file: Path | None = None

    @field_validator("secret_file")
    @classmethod
    def _secret_readable(cls, v: Path | None) -> Path | None:
        if v is not None:
            read_secret_file(v, "registrations.secret_file")
        return v

    def secret(self) -> bytes | None:
        """The shared registration secret (the file's content without surrounding whitespace)."""
        return (
            None
            if self.secret_file is None
            else read_secret_file(self.secret_file, "registrations.secret_file")
        )


def read_secret_file(path: Path, setting: str) -> bytes:
    """A secret's bytes; a clear error naming ``setting`` (never the content) when unreadable or empty."""
    try:
        data = path.read_bytes().strip()
    except OSError as e:
        raise ValueError(f"{setting}: cannot read {str(path)!r}: {e.strerror}") from None
    if not data:
        raise ValueError(f"{setting}: {str(path)!r} is empty")
    return data


class RackRule(_Section):
    """Rack of a consumer that does not register: by client host (CIDR) and/or client.id (glob)."""

    rack: str = Field(min_length=1)
    #: CIDR (``10.0.1.0/24``, ``2001:db8::/32``) or one address
    host: str | None = None
    #: fnmatch pattern on the client.id, case-sensitive
    client_id: str | None = None

    @field_validator("host")
    @classmethod
    def _cidr(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                ipaddress.ip_network(v, strict=False)
            except ValueError as e:
                raise ValueError(f"not a CIDR or address: {e}") from None
        return v

    @model_validator(mode="after")
    def _one_matcher(self) -> RackRule:
        if self.host is None and self.client_id is None:
            raise ValueError("a rack_mapping rule needs host (CIDR) or client_id (pattern), or both")
        return self

    def matches(self, client_id: str | None, host: str | None) -> bool:
        """Every matcher the rule has must match (a rule with both needs both)."""
        if self.client_id is not None and (
            client_id is None or not fnmatch.fnmatchcase(client_id, self.client_id)
        ):
            return False
        if self.host is not None:
            addr = _ip(host)
            if addr is None or addr not in ipaddress.ip_network(self.host, strict=False):
                return False
        return True


def _ip(host: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """Kafka reports a client's host as ``/10.0.1.5``; anything that is not an address gives None."""
    if not host:
        return None
    text = host.lstrip("/").strip("[]")
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def rack_for(rules: tuple[RackRule, ...], client_id: str | None, host: str | None) -> str | None:
    """The rack of the first matching rule, in the order configured; None when none matches."""
    for rule in rules:
        if rule.matches(client_id, host):
            return rule.rack
    return None


class MembershipSettings(_Section):
    """The groups' real membership, from DescribeGroups (describe_consumer_groups)."""

    describe_groups: bool = True
    #: after the brokers answered "unsupported", try again only after this long
    retry_unsupported_s: float = Field(default=600.0, ge=0)


class FollowerSettings(_Section):
    """Two-phase handovers of groups whose members follow plans (agent.follower.PlanFollower)."""

    #: a handover completes without a follower's release confirmation after this long (a dead follower
    #: must not block its group forever); keep it above the followers' agent_timeout_s + fallback_grace_s
    release_timeout_s: float = Field(default=150.0, gt=0)
    #: between cycles, how often pending handovers look for new release confirmations
    check_interval_s: float = Field(default=0.05, gt=0)


class HaSettings(_Section):
    """Several agents, one publisher: the holder of the lease topic's only partition in a consumer group."""

    #: run for the lease; off: this agent always publishes (one agent per cluster)
    enabled: bool = False
    #: single-partition compacted topic: the lease, and the leader's heartbeat record that followers watch
    lease_topic: str = "_rackplan.lease"
    #: the consumer group of the agents
    group_id: str = "rackplan-agents"
    #: a dead leader's lease moves after this (plus one rebalance)
    session_timeout_s: float = Field(default=10.0, ge=1.0)
    #: a cycle longer than this loses the lease (librdkafka's max.poll.interval.ms)
    max_cycle_s: float = Field(default=300.0, ge=1.0)
    #: this agent's name in heartbeats and plan records; default: <hostname>-<pid>
    agent_id: str | None = None


class LogSettings(_Section):
    #: auto: console on a TTY, JSON otherwise
    format: Literal["auto", "json", "console"] = "auto"
    level: Literal["debug", "info", "warning", "error"] = "info"


def read_yaml_mapping(path: str | Path) -> dict[str, Any]:
    """A settings file's top-level mapping (an empty file is an empty mapping)."""
    loaded = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise ValueError(f"{path}: the settings file must hold a mapping, got {type(loaded).__name__}")
    return loaded


class EnvFirstSettings(BaseSettings):
    """Settings from a file's values (passed as init arguments) and the environment, which wins.

    Shared by the agent's and the fleet job's settings so both follow one rule.
    """

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return env_settings, init_settings  # first wins


class Settings(EnvFirstSettings):
    """All settings; build with :meth:`load`."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", frozen=True, case_sensitive=False
    )

    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    poll_interval_s: float = Field(default=30.0, gt=0)
    plan_topic: str = "_rackplan.plans"
    alerts_topic: str = "_rackplan.alerts"
    registrations_topic: str = "_rackplan.registrations"
    http: HttpSettings = Field(default_factory=HttpSettings)
    #: each entry: a ``consumer_group`` object of the contract (``fetch_mode`` may be added)
    consumer_groups: tuple[dict[str, Any], ...] = ()
    #: each entry: a ``streams_app`` object of the contract
    streams_apps: tuple[dict[str, Any], ...] = ()
    #: a metadata change must be seen in this many consecutive polls before plans change
    change_persist_polls: int = Field(default=2, ge=1)
    #: how locality is judged when a group does not say: KIP-392 follower fetching, or leader only
    fetch_mode: FetchMode = "nearest-replica"
    #: max.message.bytes of a plan topic the agent creates (plans are never split)
    plan_max_message_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    #: seconds to wait for a publish (delivery confirmed) or the plan-topic replay
    io_timeout_s: float = Field(default=30.0, gt=0)
    alerts: AlertSettings = Field(default_factory=AlertSettings)
    webhook: WebhookSettings = Field(default_factory=WebhookSettings)
    registrations: RegistrationSettings = Field(default_factory=RegistrationSettings)
    followers: FollowerSettings = Field(default_factory=FollowerSettings)
    ha: HaSettings = Field(default_factory=HaSettings)
    #: racks of consumers that do not register, first matching rule wins
    rack_mapping: tuple[RackRule, ...] = ()
    membership: MembershipSettings = Field(default_factory=MembershipSettings)
    metadata: MetadataSettings = Field(default_factory=MetadataSettings)
    log: LogSettings = Field(default_factory=LogSettings)
    #: append a fleet snapshot (JSON lines, see docs/fleet.md) here at start and at every confirmed change
    archive_dir: Path | None = None
    #: the cluster's name in archived snapshots; default: the bootstrap servers
    cluster_name: str | None = None

    @field_validator("consumer_groups", "streams_apps", "rack_mapping", mode="before")
    @classmethod
    def _json_list(cls, v: Any) -> Any:
        # From the environment a list arrives as JSON text.
        if isinstance(v, str):
            return json.loads(v)
        return v

    @model_validator(mode="after")
    def _check_registrations(self) -> Settings:
        seen: set[str] = set()
        for i, g in enumerate(self.consumer_groups):
            check_consumer_group(g, f"consumer_groups[{i}]")
            key = f"consumer/{g['group_id']}"
            if key in seen:
                raise ValueError(f"consumer_groups[{i}].group_id: duplicate group {g['group_id']!r}")
            seen.add(key)
        for i, a in enumerate(self.streams_apps):
            check_streams_app(a, f"streams_apps[{i}]")
            key = f"streams/{a['application_id']}"
            if key in seen:
                raise ValueError(f"streams_apps[{i}].application_id: duplicate app {a['application_id']!r}")
            seen.add(key)
        return self

    @classmethod
    def load(cls, path: str | Path | None = None) -> Settings:
        """Settings from a YAML file (optional), overridden by the environment."""
        return cls(**({} if path is None else read_yaml_mapping(path)))

    def redacted(self) -> dict[str, Any]:
        """Settings as a dict safe to log: secrets masked."""
        d = self.model_dump(mode="json")
        d["kafka"]["config"] = mask_config(self.kafka.config)
        d["webhook"]["headers"] = {k: MASK for k in sorted(self.webhook.headers)}
        if self.webhook.url is not None:
            d["webhook"]["url"] = redact_url(self.webhook.url)
        return d

    def group_fetch_mode(self, group: Mapping[str, Any]) -> FetchMode:
        mode = group.get("fetch_mode", self.fetch_mode)
        return "leader" if mode == "leader" else "nearest-replica"


def _topics_of(entry: Mapping[str, Any], kind: str) -> set[str]:
    out: set[str] = set()
    if kind == "consumer_group":
        for m in entry.get("members") or []:
            if isinstance(m, dict):
                out.update(t for t in m.get("topics") or [] if isinstance(t, str))
        if isinstance(entry.get("topics"), list):
            out.update(t for t in entry["topics"] if isinstance(t, str))
    else:
        for s in entry.get("subtopologies") or []:
            if isinstance(s, dict):
                out.update(t for t in s.get("source_topics") or [] if isinstance(t, str))
    return out


def _placeholder_cluster(topics: set[str]) -> Cluster:
    # Registrations are checked before any metadata is known: every named topic
    # exists with no partitions, so the contract parser checks everything else.
    return Cluster(broker_racks={}, topics={t: () for t in sorted(topics)})


def _reraise(e: InputError, where: str, kind: str) -> ValueError:
    field = e.field.removeprefix(kind)
    return ValueError(f"{where}{field}: {e.message}")


#: keys of a ``consumer_groups`` entry: the contract's, plus what the settings add
GROUP_KEYS = frozenset({"group_id", "assignor", "members", "topics", "fetch_mode"})
#: keys of a member of a ``consumer_groups`` entry (the contract's)
MEMBER_KEYS = frozenset({"member_id", "rack", "topics", "owned", "generation", "group_instance_id"})


def _no_unknown_keys(entry: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
    """A settings file is strict where the contract is lenient: a typo (``rak: az-b``) must not
    silently make a member rack-less and its group's cross-rack figure look perfect."""
    for key in entry:
        if key not in allowed:
            raise ValueError(f"{where}.{key}: unknown key; expected one of {', '.join(sorted(allowed))}")


def check_consumer_group(entry: Any, where: str) -> None:
    """Reject a registration the contract parser would reject (topic existence aside), and unknown keys."""
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected an object")
    _no_unknown_keys(entry, GROUP_KEYS, where)
    for i, member in enumerate(entry.get("members") or []):
        if isinstance(member, dict):
            _no_unknown_keys(member, MEMBER_KEYS, f"{where}.members[{i}]")
    try:
        parse_consumer_group(entry, _placeholder_cluster(_topics_of(entry, "consumer_group")))
    except InputError as e:
        raise _reraise(e, where, "consumer_group") from None
    _check_fetch_mode(entry, where)
    topics = entry.get("topics")
    if topics is not None and (
        not isinstance(topics, list) or not all(isinstance(t, str) and t for t in topics)
    ):
        raise ValueError(f"{where}.topics: expected an array of topic names")


def _check_fetch_mode(entry: Mapping[str, Any], where: str) -> None:
    mode = entry.get("fetch_mode")
    if mode is not None and mode not in ("nearest-replica", "leader"):
        raise ValueError(f"{where}.fetch_mode: expected nearest-replica or leader, got {mode!r}")


def check_streams_app(entry: Any, where: str) -> None:
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected an object")
    try:
        parse_streams_app(entry, _placeholder_cluster(_topics_of(entry, "streams_app")))
    except InputError as e:
        raise _reraise(e, where, "streams_app") from None
    _check_fetch_mode(entry, where)
