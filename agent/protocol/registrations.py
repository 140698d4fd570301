"""Registration records on the registrations topic: keys, values, signatures.

Keys are per member or client: ``consumer/<group_id>/<member_id>`` or
``streams/<application_id>/<process_id>`` (UTF-8, with ``%`` and ``/`` inside
an id written ``%25`` and ``%2F`` so two members never share a key); the value
(JSON; schema :class:`rackplan.agent.protocol.models.RegistrationValue`,
docs/registration-schema.json) repeats the ids and must match the key.  A
value may be signed with a shared secret (:func:`sign_registration`).

Writers (:class:`rackplan.agent.follower.PlanFollower`, the Java client) and the
agent's reader share this module; what the agent does with the entries (the
store, the merge with the settings file) is :mod:`rackplan.agent.groups.registry`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rackplan.assignor.bounded import TooLargeError, read_bounded

from .plans import CONSUMER, STREAMS
from .records import MAX_REGISTRATION_BYTES, REASONS, RecordError, load_record, safe_int

#: judges a decoded record as the contract's object: ``check(kind, spec, where)`` raises ValueError
ContractCheck = Callable[[str, dict[str, Any], str], None]

REGISTRATION_SCHEMA = 1
#: fields of a consumer record that describe the member, then the group
CONSUMER_MEMBER_FIELDS = ("member_id", "rack", "topics", "group_instance_id")
CONSUMER_GROUP_FIELDS = ("assignor", "fetch_mode", "objective", "balance", "balance_floor")
#: fields of a Streams record that describe the client, then the app
STREAMS_CLIENT_FIELDS = ("process_id", "rack", "threads", "tags")
#: fields of a Streams record kept with the client that no plan depends on: how the agent recognises the
#: client's live group members (:mod:`rackplan.agent.groups.streams_members`); never in a plan's fingerprint
STREAMS_JUDGING_FIELDS = ("consumer_client_ids",)
STREAMS_APP_FIELDS = (
    "subtopologies",
    "num_standby_replicas",
    "acceptable_recovery_lag",
    "max_warmup_replicas",
    "rack_aware_assignment_tags",
    "rack_aware",
    "assignor",
    "fetch_mode",
)
#: ``mode`` of a follower's record: no plan applied yet, following the plan, or ordinary group subscription
FOLLOWER_MODES = ("waiting", "plan", "subscription")
#: labels of rackplan_registration_records_skipped_total
SKIP_REASONS = REASONS


class RegistrationRecordError(RecordError):
    """A record that is not a registration; ``reason`` is one of :data:`SKIP_REASONS`."""


@dataclass(frozen=True, slots=True)
class FollowerStatus:
    """What a plan-following member says about itself; never part of the group's registration."""

    #: highest plan generation applied: everything outside its assignment there is released (0: none)
    released_generation: int = 0
    #: one of :data:`FOLLOWER_MODES`
    mode: str = "waiting"


@dataclass(frozen=True, slots=True)
class Entry:
    """One member's or client's registration, as read from the topic."""

    key: str
    kind: str
    #: group id or application id
    name: str
    #: the contract member (consumer) or client (Streams) object: its registration fields only
    member: Mapping[str, Any]
    #: group- or app-level fields this record carries
    group: Mapping[str, Any]
    timestamp_ms: int
    #: set when the member follows plans (consumer records with ``follower: true``)
    follower: FollowerStatus | None = None

    def same_content(self, other: Entry) -> bool:
        """Same registration; a follower's status may differ (it changes with every plan it applies)."""
        return self.member == other.member and self.group == other.group

    def with_timestamp(self, timestamp_ms: int) -> Entry:
        return Entry(self.key, self.kind, self.name, self.member, self.group, timestamp_ms, self.follower)


#: field of a signed registration: ``hmac-sha256:<hex>`` over :func:`canonical_payload`
SIGNATURE_FIELD = "signature"
_SIGNATURE_PREFIX = "hmac-sha256:"


def canonical_payload(value: Mapping[str, Any]) -> bytes:
    """What a registration's signature covers: the value without its signature, as compact JSON with
    keys sorted and non-ASCII characters escaped (Python's ``json.dumps(v, sort_keys=True,
    separators=(",", ":"))``)."""
    body = {k: v for k, v in value.items() if k != SIGNATURE_FIELD}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def sign_registration(value: Mapping[str, Any], secret: bytes) -> str:
    """HMAC-SHA256 of the canonical payload with the shared secret, as :data:`SIGNATURE_FIELD` holds it."""
    return _SIGNATURE_PREFIX + hmac.new(secret, canonical_payload(value), hashlib.sha256).hexdigest()


def _verify(v: Mapping[str, Any], k: str, secret: bytes, broker_ts: int | None, max_skew_ms: int) -> None:
    sig = v.get(SIGNATURE_FIELD)
    if not isinstance(sig, str) or not sig:
        raise RegistrationRecordError("unsigned", f"{k}: registration is not signed and a secret is set")
    if not hmac.compare_digest(sig.encode(), sign_registration(v, secret).encode()):
        raise RegistrationRecordError("bad_signature", f"{k}: the registration's signature is not valid")
    # The signed timestamp is what the entry's age counts from (never a later broker timestamp), so a
    # signed record replayed later is as old as when it was signed: expired once the TTL has passed.
    ts = v.get("timestamp_ms")
    if not isinstance(ts, int):
        raise RegistrationRecordError("invalid", f"{k}: a signed registration needs timestamp_ms")
    if broker_ts is not None and ts - broker_ts > max_skew_ms:
        raise RegistrationRecordError(
            "invalid",
            f"{k}: signed timestamp_ms is {(ts - broker_ts) / 1000:.1f} s ahead of the record's timestamp "
            f"(more than the {max_skew_ms / 1000:g} s clock skew)",
        )


def _escape(part: str) -> str:
    return part.replace("%", "%25").replace("/", "%2F")


def registration_key(kind: str, name: str, member: str) -> str:
    """``consumer/<group_id>/<member_id>``; ``%`` and ``/`` inside an id are percent-encoded, so keys never collide."""
    return f"{kind}/{_escape(name)}/{_escape(member)}"


def _key_kind(key: str) -> str:
    kind, sep, rest = key.partition("/")
    if kind not in (CONSUMER, STREAMS) or not sep or "/" not in rest:
        raise RegistrationRecordError(
            "bad_key", f"key {key!r}: expected consumer/<group>/<member> or streams/<app>/<process>"
        )
    return kind


def _nonempty_str(v: Any, where: str) -> str:
    if not isinstance(v, str) or not v:
        raise RegistrationRecordError("invalid", f"{where}: expected a non-empty string")
    return v


def decode_key(key: bytes | str | None) -> str:
    if key is None:
        raise RegistrationRecordError("bad_key", "record without a key")
    try:
        text = key.decode("utf-8") if isinstance(key, bytes) else key
    except UnicodeDecodeError:
        raise RegistrationRecordError("not_utf8", "key is not UTF-8") from None
    _key_kind(text)
    return text


def _follower_status(v: Mapping[str, Any], k: str) -> FollowerStatus | None:
    flag = v.get("follower", False)
    if not isinstance(flag, bool):
        raise RegistrationRecordError("invalid", f"{k}: follower must be true or false")
    if not flag:
        return None
    gen = v.get("released_generation")
    if gen is None:
        gen = 0
    try:
        gen = safe_int(gen, f"{k}: released_generation")
    except RecordError as e:
        raise RegistrationRecordError(e.reason, str(e)) from None
    mode = v.get("mode", "waiting")
    if mode not in FOLLOWER_MODES:
        raise RegistrationRecordError("invalid", f"{k}: mode must be one of {', '.join(FOLLOWER_MODES)}")
    return FollowerStatus(released_generation=gen, mode=mode)


def _streams_client(v: Mapping[str, Any], k: str) -> dict[str, Any]:
    """A Streams record's client: its contract fields and its thread consumers' ids (a list of non-empty
    strings, as the Java registrar writes them; anything else is refused like any bad field, since a
    wrong id would give live members another client's rack)."""
    ids = v.get("consumer_client_ids")
    if ids is not None and (not isinstance(ids, list) or not all(isinstance(x, str) and x for x in ids)):
        raise RegistrationRecordError("invalid", f"{k}: consumer_client_ids: expected an array of client ids")
    return {f: v[f] for f in (*STREAMS_CLIENT_FIELDS, *STREAMS_JUDGING_FIELDS) if f in v}


def planned_spec(kind: str, spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """``spec`` as far as a plan depends on it: a Streams app's clients without :data:`STREAMS_JUDGING_FIELDS`
    (a thread consumer that rejoins changes its id, never the plan, so it must not plan the app again)."""
    clients = spec.get("clients")
    if kind != STREAMS or not isinstance(clients, list):
        return spec
    drop = set(STREAMS_JUDGING_FIELDS)
    bare = [{f: x for f, x in c.items() if f not in drop} if isinstance(c, Mapping) else c for c in clients]
    return {**spec, "clients": bare}


def consumer_registration(
    group_id: str,
    member_id: str,
    *,
    rack: str | None,
    topics: Iterable[str],
    timestamp_ms: int,
    group_instance_id: str | None = None,
    assignor: str | None = None,
    fetch_mode: str | None = None,
    objective: str | None = None,
    balance: str | None = None,
    balance_floor: float | None = None,
    follower: FollowerStatus | None = None,
    secret: bytes | None = None,
) -> tuple[str, bytes]:
    """Key and value of a consumer member's record, as :func:`decode_registration` reads them.

    With a ``secret`` the value is signed (:func:`sign_registration`).
    """
    value: dict[str, Any] = {
        "schema": REGISTRATION_SCHEMA,
        "group_id": group_id,
        "member_id": member_id,
        "rack": rack,
        "topics": sorted(set(topics)),
        "group_instance_id": group_instance_id,
        "timestamp_ms": timestamp_ms,
    }
    group = zip(CONSUMER_GROUP_FIELDS, (assignor, fetch_mode, objective, balance, balance_floor), strict=True)
    value.update({k: v for k, v in group if v is not None})
    if follower is not None:
        value["follower"] = True
        value["released_generation"] = follower.released_generation
        value["mode"] = follower.mode
    if secret is not None:
        value[SIGNATURE_FIELD] = sign_registration(value, secret)
    key = registration_key(CONSUMER, group_id, member_id)
    return key, json.dumps(value, separators=(",", ":"), sort_keys=True).encode()


#: topic names one registration record may carry (a member's topics, or an app's sub-topology topics):
#: every cycle that plans the group works on each, so a record cannot make cycles arbitrarily slow
MAX_REGISTRATION_TOPICS = 10_000


def _topic_names(v: Any) -> int:
    return len(v) if isinstance(v, list) else 0


def _dicts(v: Any) -> list[Mapping[str, Any]]:
    return [x for x in v if isinstance(x, Mapping)] if isinstance(v, list) else []


def decode_registration(
    key: bytes | str | None,
    value: bytes | None,
    record_ts_ms: int | None,
    *,
    check: ContractCheck,
    secret: bytes | None = None,
    max_skew_ms: int = 10_000,
) -> Entry | None:
    """An entry, or None for a tombstone; :class:`RegistrationRecordError` when malformed.

    ``check(kind, spec, key)`` judges the record as the contract's
    ``consumer_group`` / ``streams_app`` object (``spec``, with this record's
    member or client as the only one) and raises ``ValueError`` naming the
    field; :func:`rackplan.agent.groups.registry.decode_registration` passes the
    settings' checks.  A parameter: a follower reading its peers' status need not run them (it checks
    its own fields with the same parser).  ``record_ts_ms`` is the record's broker timestamp.  With a ``secret``, a
    value must carry a valid :data:`SIGNATURE_FIELD` and a ``timestamp_ms`` not
    more than ``max_skew_ms`` ahead of the record's timestamp; the entry's age
    counts from it, so a signed record replayed later is already old.
    """
    k = decode_key(key)
    kind = _key_kind(k)
    if value is None:
        return None
    try:
        v = load_record(value, MAX_REGISTRATION_BYTES, k)
    except RecordError as e:
        raise RegistrationRecordError(e.reason, str(e)) from None
    if not isinstance(v, dict):
        raise RegistrationRecordError("not_object", f"{k}: value must be a JSON object")
    if v.get("schema") != REGISTRATION_SCHEMA:
        raise RegistrationRecordError("schema", f"{k}: unsupported schema {repr(v.get('schema'))[:40]}")
    ts = v.get("timestamp_ms")
    if ts is not None:
        try:
            ts = safe_int(ts, f"{k}: timestamp_ms")
        except RecordError as e:
            raise RegistrationRecordError(e.reason, str(e)) from None
    broker_ts = record_ts_ms if record_ts_ms is not None and record_ts_ms >= 0 else None
    if secret is not None:
        _verify(v, k, secret, broker_ts, max_skew_ms)
    # Freshness is the broker's record timestamp; the payload's may only make an entry older (a client
    # that says it registered earlier shortens its own life).  A writer's clock never extends it.
    # RegistrationStore.apply bounds a record timestamp in the future to the reader's clock plus the skew.
    stamps = [t for t in (ts, broker_ts) if t is not None]
    timestamp = min(stamps) if stamps else -1
    if kind == CONSUMER:
        name = _nonempty_str(v.get("group_id"), f"{k}: group_id")
        mid = _nonempty_str(v.get("member_id"), f"{k}: member_id")
        member = {f: v[f] for f in CONSUMER_MEMBER_FIELDS if f in v}
        group = {f: v[f] for f in CONSUMER_GROUP_FIELDS if f in v}
        expected = registration_key(kind, name, mid)
        spec: dict[str, Any] = {"group_id": name, **group, "members": [member]}
        follower = _follower_status(v, k)
    else:
        name = _nonempty_str(v.get("application_id"), f"{k}: application_id")
        mid = _nonempty_str(v.get("process_id"), f"{k}: process_id")
        member = _streams_client(v, k)
        group = {f: v[f] for f in STREAMS_APP_FIELDS if f in v}
        expected = registration_key(kind, name, mid)
        spec = {"application_id": name, "subtopologies": [], **group, "clients": [member]}
        follower = None
    if k != expected:
        raise RegistrationRecordError("key_mismatch", f"key {k!r} does not match its value ({expected!r})")
    named = _topic_names(member.get("topics")) + sum(
        _topic_names(s.get(f))
        for s in _dicts(group.get("subtopologies"))
        for f in ("source_topics", "changelog_topics")
    )
    if named > MAX_REGISTRATION_TOPICS:
        raise RegistrationRecordError(
            "too_large",
            f"{k}: names {named} topics; a registration names at most {MAX_REGISTRATION_TOPICS}",
        )
    try:
        check(kind, spec, k)
    except ValueError as e:
        raise RegistrationRecordError("invalid", str(e)) from None
    return Entry(
        key=k, kind=kind, name=name, member=member, group=group, timestamp_ms=timestamp, follower=follower
    )


#: a secret file (``kafka.secret_files``, ``registrations.secret_file``) is at most this: a CA bundle in
#: ``ssl.ca.pem`` is a few hundred KiB, a larger file a wrong path (``/dev/zero`` was read until memory ran out)
MAX_SECRET_FILE_BYTES = 4 << 20


def read_secret_file(path: Path, setting: str) -> bytes:
    """A secret's bytes; a clear error naming ``setting`` (never the content) when unreadable, empty or over
    :data:`MAX_SECRET_FILE_BYTES` (read no further).  ``setting`` empty: the error's place names it."""
    where = f"{setting}: " if setting else ""
    try:
        with open(path, "rb") as f:
            data = read_bounded(f, MAX_SECRET_FILE_BYTES).strip()
    except TooLargeError as e:
        raise ValueError(f"{where}{str(path)!r} is {e}") from None
    except OSError as e:
        raise ValueError(f"{where}cannot read {str(path)!r}: {e.strerror}") from None
    if not data:
        raise ValueError(f"{where}{str(path)!r} is empty")
    return data
