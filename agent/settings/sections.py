"""The agent's settings: one YAML file, every key overridable by environment.

The keys of docs/CONTRACT.md ("The agent's interfaces") are fixed; the
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
import ssl
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import SettingsConfigDict

from rackplan.assignor.bounded import TooLargeError, read_bounded

from ..core.redact import MASK, mask_config, mask_tree, redact_url
from ..kafka.metadata_refresh import with_metadata_refresh
from ..protocol.registrations import MAX_SECRET_FILE_BYTES, read_secret_file
from .contract_checks import checked_registrations
from .environment import ENV_PREFIX, EnvFirstSettings, unknown_env_variables
from .errors import SettingsError, describe_errors
from .ha import HaSettings as HaSettings  # the ``ha:`` section, also importable from here
from .headers import HeaderValueError, header_name_problem, header_problem, read_header_file
from .hosts import bootstrap_problem, is_host
from .section_base import AdminRequestS, ClusterName, check_named, own_topic, refuse_bool_as_number
from .section_base import Section as _Section
from .traffic import CheckedTraffic, PriceSettings, TrafficSettings
from .yaml_file import read_yaml_mapping

FetchMode = Literal["nearest-replica", "leader"]
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
#: labels of the webhook's alerts that the agent sets itself (one in webhook.labels was overridden, silently)
RESERVED_ALERT_LABELS = {"alertname": "", "kind": "", "group": "", "severity": " (alerts.severity)"}


class KafkaSettings(_Section):
    bootstrap_servers: str = "127.0.0.1:9092"
    #: any librdkafka property, passed through to every client the agent makes
    config: dict[str, str | int | float | bool] = Field(default_factory=dict)
    #: librdkafka property -> file whose content is its value (e.g. a mounted secret)
    secret_files: dict[str, Path] = Field(default_factory=dict)
    #: at start, how long the agent tries to reach the bootstrap servers before it exits 2
    startup_timeout_s: float = Field(default=15.0, ge=1.0)
    #: at start, how long each start-up step asks again after errors that clear by themselves (its own topics
    #: just created and not known yet, a coordinator loading, a broker restarting) before the agent exits 1
    startup_retry_s: float = Field(default=600.0, ge=1.0)

    @field_validator("bootstrap_servers")
    @classmethod
    def _host_port_list(cls, v: str) -> str:
        for entry in v.split(","):
            problem = bootstrap_problem(entry.strip())
            if problem:
                raise ValueError(f"{entry.strip()!r}: {problem} (expected host:port[,host:port...])")
        return v

    @field_validator("config", "secret_files", mode="before")
    @classmethod
    def _env_keys(cls, v: Any) -> Any:
        # Environment variable names cannot hold dots: RACKPLAN_KAFKA__CONFIG__SASL_MECHANISM (or
        # __SECRET_FILES__SASL_PASSWORD) arrives as "sasl_mechanism". librdkafka property names never hold "_".
        if isinstance(v, dict):
            return {str(k).replace("_", "."): val for k, val in v.items()}
        return v

    def client_config(self) -> dict[str, Any]:
        """The full librdkafka config: bootstrap servers, passthrough, secrets read from files."""
        out: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        out.update(with_metadata_refresh(self.config))
        for key, path in sorted(self.secret_files.items()):
            try:
                with open(path, "rb") as f:
                    out[key] = read_bounded(f, MAX_SECRET_FILE_BYTES).decode("utf-8").strip()
            except TooLargeError as e:  # /dev/zero, or a wrong path: never read to the end
                raise SettingsError(f"kafka.secret_files.{key}: {str(path)!r} is {e}") from None
            except (OSError, UnicodeDecodeError) as e:
                why = e.strerror if isinstance(e, OSError) and e.strerror else type(e).__name__
                raise SettingsError(f"kafka.secret_files.{key}: cannot read {str(path)!r}: {why}") from None
        return out

    def __repr_args__(self) -> Any:
        yield "bootstrap_servers", self.bootstrap_servers
        yield "config", mask_config(self.config)
        yield "secret_files", {k: str(p) for k, p in sorted(self.secret_files.items())}


class HttpSettings(_Section):
    host: str = "127.0.0.1"
    port: int = Field(default=9464, ge=0, le=65535)

    @field_validator("host")
    @classmethod
    def _address_or_name(cls, v: str) -> str:
        if not is_host(v):
            raise ValueError(f"{v!r} is neither an IP address nor a host name")
        return v


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
    #: hold-down: a group must stay bad this long before its alert fires (Prometheus' ``for:``)
    for_s: float = Field(default=60.0, ge=0.0)
    #: hold-down: a firing alert resolves only once the group has been fine this long (no flapping)
    keep_firing_for_s: float = Field(default=60.0, ge=0.0)
    #: ``severity`` label of the locality alert
    severity: str = Field(default="warning", min_length=1)
    #: ``severity`` label of the one-off report that a group's best plan is itself above the threshold
    unfixable_severity: str = Field(default="info", min_length=1)
    #: the runbook; every alert's ``runbook_url`` annotation is this plus ``#<alertname in lower case>``
    runbook_url: str = Field(default="docs/runbook.md", min_length=1)


class MetadataSettings(_Section):
    request_timeout_s: AdminRequestS = Field(default=15.0, gt=0)
    #: unused since snapshots come from one Metadata request; accepted so existing settings files still load
    describe_batch_size: int = Field(default=500, ge=1, le=1_000_000)
    #: attempts per poll before the poll counts as failed (the last good snapshot is kept)
    max_attempts: int = Field(default=4, ge=1, le=1000)
    backoff_initial_s: float = Field(default=0.5, gt=0)
    backoff_max_s: float = Field(default=30.0, gt=0)
    #: topics whose names start with these are not watched
    exclude_prefixes: tuple[str, ...] = ("__",)
    #: every broker's rack is asked again (DescribeCluster) at least this often: a broker restarted with a
    #: new ``broker.rack`` inside one poll never leaves the metadata, so only this notices it
    rack_refresh_s: float = Field(default=300.0, ge=1.0, le=86_400.0)


class WebhookTlsSettings(_Section):
    """TLS of an ``https://`` webhook: the CA to trust and the client certificate to present."""

    #: PEM bundle of the CAs that sign the receiver's certificate; default: the system's
    ca_file: Path | None = None
    #: PEM client certificate (mutual TLS); its key in ``key_file`` or in the same file
    cert_file: Path | None = None
    key_file: Path | None = None

    @model_validator(mode="after")
    def _loads(self) -> WebhookTlsSettings:
        if self.key_file is not None and self.cert_file is None:
            raise ValueError("key_file needs cert_file")
        self.context()  # unreadable or invalid files are a settings error, named, at start
        return self

    def context(self) -> ssl.SSLContext:
        """The client context: verifies the receiver (hostname included), presents the certificate."""
        try:
            ctx = ssl.create_default_context(cafile=None if self.ca_file is None else str(self.ca_file))
        except (OSError, ssl.SSLError) as e:
            raise ValueError(f"ca_file {self.ca_file}: {e}") from None
        if self.cert_file is not None:
            try:
                ctx.load_cert_chain(
                    str(self.cert_file), None if self.key_file is None else str(self.key_file)
                )
            except (OSError, ssl.SSLError) as e:
                raise ValueError(f"cert_file {self.cert_file} / key_file {self.key_file}: {e}") from None
        return ctx


def _header_file_problem(name: str, path: Path) -> str | None:
    """What keeps ``path`` from giving header ``name`` a value now (again at every delivery: rotation)."""
    if not path.is_file():
        return f"{name}: no such file {str(path)!r}"
    try:
        read_header_file(path)
    except HeaderValueError as e:
        return f"{name}: {str(path)!r}: {e}"
    except OSError as e:
        return f"{name}: cannot read {str(path)!r}: {e.strerror or type(e).__name__}"
    return None


class WebhookSettings(_Section):
    """Alertmanager API v2 (``POST /api/v2/alerts``); no ``url``, no webhook."""

    url: str | None = None
    #: per HTTP request; the poll loop never waits for the webhook
    timeout_s: float = Field(default=5.0, gt=0)
    max_attempts: int = Field(default=5, ge=1, le=1000)
    backoff_initial_s: float = Field(default=0.5, gt=0)
    backoff_max_s: float = Field(default=30.0, gt=0)
    #: firing alerts are sent again this often while they fire (Alertmanager expects it)
    resend_interval_s: float = Field(default=60.0, gt=0)
    #: batches waiting for delivery; beyond it the oldest batch is dropped (and counted)
    queue_size: int = Field(default=100, ge=1, le=1_000_000)
    #: extra labels on every alert (e.g. ``{cluster: prod}``)
    labels: dict[str, str] = Field(default_factory=dict)
    #: extra HTTP headers (e.g. Authorization); values are secrets, never logged
    headers: dict[str, str] = Field(default_factory=dict)
    #: back-link on every alert; default: none
    generator_url: str | None = None
    #: the agent's HTTP address as the receiver's users reach it (``http://rackplan:9464``): every alert's
    #: ``generatorURL`` is then the group's ``/v1/groups/<kind>/<name>`` view there (wins over generator_url)
    agent_url: str | None = None
    #: TLS of an https:// url: CA file, client certificate and key
    tls: WebhookTlsSettings = Field(default_factory=WebhookTlsSettings)
    #: HTTP header -> file whose content is its value (a mounted secret, e.g. ``Authorization: Bearer ...``);
    #: read at every delivery, so a rotated secret is used without a restart
    header_files: dict[str, Path] = Field(default_factory=dict)

    @field_validator("header_files")
    @classmethod
    def _readable(cls, v: dict[str, Path]) -> dict[str, Path]:
        for name, path in v.items():
            problem = header_name_problem(name) or _header_file_problem(name, path)
            if problem:
                raise ValueError(problem)
        return v

    @field_validator("headers")
    @classmethod
    def _sendable(cls, v: dict[str, str]) -> dict[str, str]:
        # http.client refuses a CR or LF only when it sends, with the value (a token) in its message.
        for name, value in v.items():
            problem = header_problem(name, value)
            if problem:
                raise ValueError(problem)
        return v

    @field_validator("url", "agent_url", "generator_url")
    @classmethod
    def _http_url(cls, v: str | None, info: ValidationInfo) -> str | None:
        parts, static = urllib.parse.urlsplit(v or "http://h"), info.field_name == "generator_url"
        if parts.scheme not in ("http", "https") and not static:  # never echo the URL: it may hold a token
            raise ValueError(f"expected an http:// or https:// URL, got scheme {parts.scheme[:16]!r}")
        for i, c in enumerate(v or ""):  # http.client refuses it at every delivery, quoting the URL; and
            if c <= " " or c == "\x7f":  # Alertmanager a generatorURL with it (422: every alert dropped)
                raise ValueError(f"the URL holds a space or control character at character {i + 1}")
        if static:  # any other URI Alertmanager takes, a path too (kept so existing files load)
            return v
        try:
            port = parts.port  # a ValueError past 65535 or not a number
        except ValueError:
            port = 0
        if not parts.hostname or port == 0:  # else every delivery fails, retried as a connection error
            raise ValueError("the URL needs a host, and a port from 1 to 65535 if it names one")
        return v

    @field_validator("labels")
    @classmethod
    def _label_names(cls, v: dict[str, str]) -> dict[str, str]:
        for name in v:
            if not _LABEL_NAME.fullmatch(name) or name.startswith("__"):
                raise ValueError(f"{name!r} is not a valid Prometheus label name")
            if name in RESERVED_ALERT_LABELS:
                raise ValueError(f"label {name!r} is set by the agent{RESERVED_ALERT_LABELS[name]}")
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
    partitions: int = Field(default=1, ge=1, le=100_000)
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
            read_secret_file(v, "")  # the error's place names the key
        return v

    def secret(self) -> bytes | None:
        """The shared registration secret (the file's content without surrounding whitespace)."""
        return (
            None
            if self.secret_file is None
            else read_secret_file(self.secret_file, "registrations.secret_file")
        )


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
    """Two-phase handovers of groups whose members follow plans (rackplan.agent.follower.PlanFollower)."""

    #: a handover completes without a follower's release confirmation after this long (a dead follower
    #: must not block its group forever); keep it above the followers' agent_timeout_s + fallback_grace_s
    release_timeout_s: float = Field(default=150.0, gt=0)
    #: between cycles, how often pending handovers look for new release confirmations
    check_interval_s: float = Field(default=0.05, gt=0)


class LogSettings(_Section):
    #: auto: console on a TTY, JSON otherwise
    format: Literal["auto", "json", "console"] = "auto"
    level: Literal["debug", "info", "warning", "error"] = "info"


class Settings(EnvFirstSettings):
    """All settings; build with :meth:`load`."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
        case_sensitive=False,
        allow_inf_nan=False,
    )
    _named = field_validator("*")(check_named)
    _numbers = field_validator("*", mode="before")(classmethod(refuse_bool_as_number))

    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    mode: Literal["act", "observe"] = "act"  # observe: plans computed, alerted and served; none published
    #: at least 0.1 s: below that the agent would only poll
    poll_interval_s: float = Field(default=30.0, ge=0.1)
    plan_topic: str = "_rackplan.plans"
    alerts_topic: str = "_rackplan.alerts"
    registrations_topic: str = "_rackplan.registrations"
    #: the plugins' feed; null: none
    traffic_topic: str | None = "_rackplan.traffic"
    http: HttpSettings = Field(default_factory=HttpSettings)
    #: each entry: a ``consumer_group`` object of the contract (``fetch_mode`` may be added)
    consumer_groups: tuple[dict[str, Any], ...] = ()
    #: each entry: a ``streams_app`` object of the contract
    streams_apps: tuple[dict[str, Any], ...] = ()
    #: a metadata change must be seen in this many consecutive polls before plans change
    change_persist_polls: int = Field(default=2, ge=1, le=1000)
    #: how locality is judged when a group does not say: KIP-392 follower fetching, or leader only
    fetch_mode: FetchMode = "nearest-replica"
    #: max.message.bytes of a plan topic the agent creates (plans are never split)
    plan_max_message_bytes: int = Field(default=16 * 1024 * 1024, ge=1024, le=1_000_000_000)
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
    traffic: CheckedTraffic = Field(default_factory=TrafficSettings)
    prices: PriceSettings = Field(default_factory=PriceSettings)
    #: append a fleet snapshot (JSON lines, see docs/fleet.md) here at start and at every confirmed change
    archive_dir: Path | None = None
    #: the cluster's name: a label in snapshots (their id is Kafka's cluster id) and of metrics and alerts
    #: (a blank or padded name is refused: :data:`.section_base.ClusterName`; leave it out instead)
    cluster_name: ClusterName | None = None

    @field_validator("consumer_groups", "streams_apps", "rack_mapping", mode="before")
    @classmethod
    def _json_list(cls, v: Any) -> Any:
        if isinstance(v, str):  # from the environment a list arrives as JSON text
            return json.loads(v)
        return v

    @field_validator("alerts_topic", "registrations_topic", "traffic_topic", "ha")
    @classmethod
    def _topics_apart(cls, v: Any, info: ValidationInfo) -> Any:
        own_topic(str(info.field_name), v, info.data)
        return v

    @field_validator("consumer_groups", "streams_apps")
    @classmethod
    def _check_registrations(cls, v: tuple[dict[str, Any], ...], info: ValidationInfo) -> Any:
        # A field check, not a model check: it runs (and names every problem) even when another key is bad.
        return checked_registrations(v, str(info.field_name))

    @classmethod
    def load(cls, path: str | Path | None = None) -> Settings:
        """Settings from a YAML file (optional), overridden by the environment.

        :class:`SettingsError` for an unreadable file, bad YAML or an unknown ``RACKPLAN_`` variable;
        pydantic's ``ValidationError`` for bad values (:func:`describe_errors` makes lines of either); both
        at once in one :class:`SettingsError` when a variable is unknown and a value is bad.
        """
        unknown = unknown_env_variables(cls.model_fields)
        env_problem = (
            f"{', '.join(unknown)}: unknown environment variable{'s' if len(unknown) > 1 else ''}; "
            f"settings are {ENV_PREFIX}<KEY>, {ENV_PREFIX}<SECTION>__<KEY> (docs/settings.md)"
        )
        try:
            settings = cls(**({} if path is None else read_yaml_mapping(path)))
        except ValueError as e:  # a ValidationError too
            if not unknown:
                raise
            # every problem at once: the variables' and the file's
            raise SettingsError("\n".join([env_problem, *describe_errors(e, cls)])) from None
        if unknown:
            raise SettingsError(env_problem)
        return settings

    def redacted(self) -> dict[str, Any]:
        """Settings as a dict safe to log: secrets masked."""
        d: dict[str, Any] = mask_tree(self.model_dump(mode="json"))
        d["kafka"]["config"] = mask_config(d["kafka"]["config"])
        d["webhook"]["headers"] = {k: MASK for k in sorted(self.webhook.headers)}
        return d

    def group_fetch_mode(self, group: Mapping[str, Any]) -> FetchMode:
        mode = group.get("fetch_mode", self.fetch_mode)
        return "leader" if mode == "leader" else "nearest-replica"
