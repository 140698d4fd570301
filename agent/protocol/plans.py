"""Plan records on the plan topic: keys and values.

Pure encoding; the Kafka I/O is in :mod:`rackplan.agent.kafka`, the
generation bookkeeping (``PlanBook``) in :mod:`rackplan.agent.state.plan_book`.  A value is the
contract's output document (``consumer_group`` or ``streams_app`` plus
``stats``) with the fields of "The agent's interfaces" around it; the JSON
Schema (generated from :class:`rackplan.agent.protocol.models.PlanValue`) is
docs/plan-schema.json.  Values are canonical JSON (compact, keys in
a fixed order) so the same plan always gives the same bytes.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.errors import AgentError
from .records import MAX_PLAN_BYTES, RecordError, load_record, safe_int

SCHEMA_VERSION = 1
CONSUMER = "consumer"
STREAMS = "streams"
#: the plan to follow (every plan of a group without followers; the second phase of a handover)
STATE_PROPOSED = "proposed"
#: first phase of a two-phase handover: moving partitions are only revoked (see agent/planning/handover.py)
STATE_REVOKING = "revoking"
_BODY = {CONSUMER: "consumer_group", STREAMS: "streams_app"}


class PlanDecodeError(AgentError, ValueError):
    """A record on the plan topic that is not a plan this agent can read.

    ``reason`` is one of :data:`rackplan.agent.protocol.records.REASONS` (a metric label).
    """

    def __init__(self, detail: str, reason: str = "invalid") -> None:
        super().__init__(detail)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class PlanKey:
    """A plan key, ``kind/name``: ``consumer/<group_id>`` or ``streams/<application_id>``.

    The one place a key is taken apart or put together.  :meth:`parse` is for
    keys read from a topic (strict: a bad one is a skipped record);
    :meth:`split` for keys the agent made itself and only labels or matches on
    (metrics, alerts, ``/v1/groups``), where a key of an unknown kind must still
    be shown as it is rather than raise.
    """

    kind: str
    name: str

    @classmethod
    def parse(cls, key: str) -> PlanKey:
        """Strict: :class:`PlanDecodeError` (reason ``bad_key``) unless the kind is known and the name not empty."""
        k = cls.split(key)
        if "/" not in key or k.kind not in _BODY or not k.name:
            raise PlanDecodeError(
                f"bad plan key {key[:200]!r}: expected consumer/<group> or streams/<app>", "bad_key"
            )
        return k

    @classmethod
    def split(cls, key: str) -> PlanKey:
        """Lenient: the text before the first slash and the rest (a key without one: all kind, no name)."""
        kind, _, name = key.partition("/")
        return cls(kind, name)

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}"


def plan_key(kind: str, name: str) -> str:
    """``consumer/<group_id>`` or ``streams/<application_id>``."""
    if kind not in _BODY:
        raise ValueError(f"unknown plan kind {kind!r}")
    return str(PlanKey(kind, name))


def split_key(key: str) -> tuple[str, str]:
    """``(kind, name)`` of a plan key; :class:`PlanDecodeError` (reason ``bad_key``) when it is none."""
    k = PlanKey.parse(key)
    return k.kind, k.name


def utc_now_iso(now: float) -> str:
    """RFC 3339 UTC with second precision, as in the contract's example."""
    t = dt.datetime.fromtimestamp(now, tz=dt.UTC).replace(microsecond=0)
    return t.isoformat().replace("+00:00", "Z")


def epoch_ms(rfc3339: str) -> int | None:
    """``created_at`` as Unix epoch milliseconds, the one time encoding every record also carries."""
    try:
        t = dt.datetime.fromisoformat(rfc3339.replace("Z", "+00:00"))
    except ValueError:
        return None
    return None if t.tzinfo is None else round(t.timestamp() * 1000)


def fingerprint(doc: Any) -> str:
    """sha256 of canonical JSON: equal inputs, equal fingerprints, across processes."""
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Locality:
    """Cross-rack partitions (or task partitions) of an assignment under some metadata."""

    cross_rack: int
    total: int

    @property
    def fraction(self) -> float:
        return self.cross_rack / self.total if self.total else 0.0

    def as_json(self) -> dict[str, Any]:
        return {"cross_rack": self.cross_rack, "total": self.total, "fraction": round(self.fraction, 6)}


@dataclass(frozen=True, slots=True)
class PlanRecord:
    key: str
    generation: int
    cluster_fingerprint: str
    registration_fingerprint: str
    reason: str
    created_at: str
    #: the contract's output document: {"consumer_group": ..., "stats": ...} or streams
    document: Mapping[str, Any]
    moved: int
    fetch_mode: str
    locality_before: Locality | None
    locality_after: Locality
    state: str = STATE_PROPOSED
    #: a two-phase handover: {"awaiting": [...], "target": {...}} in the revoking plan,
    #: {"from_generation": g, "timed_out": [...]} in the plan that completes it
    handover: Mapping[str, Any] | None = None
    #: the publishing agent when several run: {"agent_id": ..., "epoch": ...}
    publisher: Mapping[str, Any] | None = None

    @property
    def kind(self) -> str:
        return split_key(self.key)[0]

    @property
    def body(self) -> Mapping[str, Any]:
        """The ``consumer_group`` or ``streams_app`` object."""
        body: Mapping[str, Any] = self.document[_BODY[self.kind]]
        return body

    def value(self) -> dict[str, Any]:
        body_key = _BODY[self.kind]
        return {
            "schema": SCHEMA_VERSION,
            "generation": self.generation,
            "state": self.state,
            "cluster_fingerprint": self.cluster_fingerprint,
            "registration_fingerprint": self.registration_fingerprint,
            "reason": self.reason,
            "created_at": self.created_at,
            **({} if (ms := epoch_ms(self.created_at)) is None else {"created_at_ms": ms}),
            "moved": self.moved,
            "locality": {
                "fetch_mode": self.fetch_mode,
                "before": None if self.locality_before is None else self.locality_before.as_json(),
                "after": self.locality_after.as_json(),
            },
            body_key: self.document[body_key],
            "stats": self.document["stats"],
            **({} if self.handover is None else {"handover": self.handover}),
            **({} if self.publisher is None else {"publisher": self.publisher}),
        }


def encode_value(record: PlanRecord) -> bytes:
    return json.dumps(record.value(), separators=(",", ":"), ensure_ascii=False).encode()


def _locality(v: Any, where: str) -> Locality | None:
    if v is None:
        return None
    if not isinstance(v, dict):
        raise PlanDecodeError(f"{where}: expected an object")
    cr, total = v.get("cross_rack"), v.get("total")
    if not isinstance(cr, int) or not isinstance(total, int):
        raise PlanDecodeError(f"{where}: cross_rack and total must be integers")
    return Locality(cr, total)


def _check_partitions(v: Any, where: str, required: bool) -> None:
    """``{member: [[topic, partition], ...]}``: followers act on it, so a malformed one is no plan."""
    if v is None and not required:
        return
    if not isinstance(v, dict):
        raise PlanDecodeError(f"{where} must be an object")
    for mid, parts in v.items():
        if not isinstance(parts, list):
            raise PlanDecodeError(f"{where}[{mid!r}] must be an array")
        for tp in parts:
            if (
                not isinstance(tp, list)
                or len(tp) != 2
                or not isinstance(tp[0], str)
                or not isinstance(tp[1], int)
                or isinstance(tp[1], bool)
                or tp[1] < 0
            ):
                raise PlanDecodeError(f"{where}[{mid!r}]: {tp!r} is not [topic, partition]")


def decode_record(key: bytes | str, value: bytes | None) -> PlanRecord | None:
    """A plan record, or None for a tombstone; :class:`PlanDecodeError` when malformed."""
    try:
        k = key.decode("utf-8", errors="strict") if isinstance(key, bytes) else key
    except UnicodeDecodeError:
        raise PlanDecodeError("plan key is not UTF-8", "not_utf8") from None
    kind, name = split_key(k)
    if value is None:
        return None
    try:
        v = load_record(value, MAX_PLAN_BYTES, k)
    except RecordError as e:
        raise PlanDecodeError(str(e), e.reason) from None
    if not isinstance(v, dict):
        raise PlanDecodeError(f"{k}: value must be a JSON object", "not_object")
    if v.get("schema") != SCHEMA_VERSION:
        raise PlanDecodeError(f"{k}: unsupported schema {repr(v.get('schema'))[:40]}", "schema")
    try:
        gen = safe_int(v.get("generation"), f"{k}: generation", minimum=1)
    except RecordError as e:
        raise PlanDecodeError(str(e), e.reason) from None
    body_key = _BODY[kind]
    if not isinstance(v.get(body_key), dict) or not isinstance(v.get("stats"), dict):
        raise PlanDecodeError(f"{k}: missing {body_key} or stats")
    name_field = "group_id" if kind == CONSUMER else "application_id"
    if v[body_key].get(name_field) != name:
        raise PlanDecodeError(
            f"{k}: {body_key}.{name_field} {repr(v[body_key].get(name_field))[:200]} does not match the key",
            "key_mismatch",
        )
    if kind == CONSUMER:
        _check_partitions(v[body_key].get("assignment"), f"{k}: consumer_group.assignment", required=True)
        _check_partitions(v[body_key].get("revoked"), f"{k}: consumer_group.revoked", required=False)
    raw_loc = v.get("locality")
    loc: dict[str, Any] = raw_loc if isinstance(raw_loc, dict) else {}
    after = _locality(loc.get("after"), f"{k}: locality.after") or Locality(0, 0)
    moved = v.get("moved")
    handover = v.get("handover")
    if handover is not None and not isinstance(handover, dict):
        raise PlanDecodeError(f"{k}: handover must be an object")
    publisher = v.get("publisher")
    if publisher is not None and not isinstance(publisher, dict):
        raise PlanDecodeError(f"{k}: publisher must be an object")
    return PlanRecord(
        key=k,
        generation=gen,
        cluster_fingerprint=str(v.get("cluster_fingerprint", "")),
        registration_fingerprint=str(v.get("registration_fingerprint", "")),
        reason=str(v.get("reason", "")),
        created_at=str(v.get("created_at", "")),
        document={body_key: v[body_key], "stats": v["stats"]},
        moved=moved if isinstance(moved, int) else 0,
        fetch_mode=str(loc.get("fetch_mode", "nearest-replica")),
        locality_before=_locality(loc.get("before"), f"{k}: locality.before"),
        locality_after=after,
        state=str(v.get("state", STATE_PROPOSED)),
        handover=handover,
        publisher=publisher,
    )
