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
import math
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


def _finite_problem(v: Any) -> str | None:
    """The path of the first number in ``v`` that is NaN or infinite (Python's parser takes ``NaN``,
    ``Infinity`` and ``1e999``; no JSON reader after us does), or None."""
    stack: list[tuple[str, Any]] = [("", v)]
    while stack:
        path, x = stack.pop()
        if isinstance(x, float) and not math.isfinite(x):
            return f"{path.lstrip('.') or '(value)'} is {x!r}"[:300]
        if isinstance(x, dict):
            stack.extend((f"{path}.{k}", x[k]) for k in reversed(list(x)))
        elif isinstance(x, list):
            stack.extend((f"{path}[{i}]", x[i]) for i in reversed(range(len(x))))
    return None


def _is_int(v: Any, minimum: int = 0) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= minimum


def _need_int(v: Any, where: str, minimum: int = 0) -> int:
    if not _is_int(v, minimum):
        raise PlanDecodeError(f"{where} must be an integer >= {minimum}, not {repr(v)[:40]}")
    return int(v)


def _need_str(v: Any, where: str) -> str:
    if not isinstance(v, str):
        raise PlanDecodeError(f"{where} must be a string, not {repr(v)[:40]}")
    return v


def _need_obj(v: Any, where: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise PlanDecodeError(f"{where} must be an object")
    return v


def _need_strings(v: Any, where: str) -> None:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise PlanDecodeError(f"{where} must be an array of strings")


def _need_number(v: Any, where: str, low: float, high: float = math.inf) -> None:
    if not isinstance(v, int | float) or isinstance(v, bool) or not low <= v <= high:
        bounds = f">= {low:g}" if high == math.inf else f"in [{low:g}, {high:g}]"
        raise PlanDecodeError(f"{where} must be a number {bounds}, not {repr(v)[:40]}")


def _locality(v: Any, where: str) -> Locality:
    """The schema's ``Locality``: ``cross_rack`` and ``total`` integers >= 0, ``fraction`` (if given) in [0, 1]."""
    obj = _need_obj(v, where)
    cr = _need_int(obj.get("cross_rack"), f"{where}.cross_rack")
    total = _need_int(obj.get("total"), f"{where}.total")
    if "fraction" in obj:
        _need_number(obj["fraction"], f"{where}.fraction", 0, 1)
    return Locality(cr, total)


#: Kafka's partition numbers are int32: a client cannot even name a partition beyond this one
MAX_PARTITION = 2**31 - 1


def _check_partitions(v: Any, where: str) -> None:
    """``{member: [[topic, partition], ...]}``: followers act on it, so a malformed one is no plan.

    A partition is an integer in Kafka's range, 0 to :data:`MAX_PARTITION` (a client's ``TopicPartition``
    refuses any other: a follower handed one would fail on every poll)."""
    if not isinstance(v, dict):
        raise PlanDecodeError(f"{where} must be an object")
    for mid, parts in v.items():
        if not isinstance(parts, list):
            raise PlanDecodeError(f"{where}[{mid[:100]!r}] must be an array")
        for tp in parts:
            if not isinstance(tp, list) or len(tp) != 2 or not isinstance(tp[0], str) or not _is_int(tp[1]):
                raise PlanDecodeError(f"{where}[{mid[:100]!r}]: {repr(tp)[:200]} is not [topic, partition]")
            if tp[1] > MAX_PARTITION:
                raise PlanDecodeError(
                    f"{where}[{mid[:100]!r}]: partition {repr(tp)[:200]} is beyond Kafka's largest "
                    f"partition number, {MAX_PARTITION}"
                )


def _owned_once(assignment: Mapping[str, list[list[Any]]], where: str) -> None:
    """No partition is ever owned twice (Kafka's rule): an ``assignment`` giving one partition to two members
    is no plan.  Only ``assignment``: a handover's ``revoked`` and ``unreleased`` name a partition's old
    holder next to its new one, as they should."""
    owner: dict[tuple[str, int], str] = {}
    for mid, parts in assignment.items():
        for t, p in parts:
            other = owner.setdefault((t, p), mid)
            if other != mid:
                raise PlanDecodeError(
                    f"{where}: partition [{t[:200]!r}, {p}] is assigned to both {other[:100]!r} and {mid[:100]!r}"
                )


def _check_consumer_group(body: Mapping[str, Any], where: str) -> None:
    """The schema's ``ConsumerGroupPlan``: ``group_id``, ``assignment`` and ``revoked`` (member -> partitions)."""
    _need_str(body.get("group_id"), f"{where}.group_id")
    _check_partitions(body.get("assignment"), f"{where}.assignment")
    _owned_once(body["assignment"], f"{where}.assignment")
    if body.get("revoked") is not None:  # the contract's output has it; older readers took it as optional
        _check_partitions(body["revoked"], f"{where}.revoked")


def _check_streams_app(body: Mapping[str, Any], where: str) -> None:
    """The schema's ``StreamsAppPlan``: ``assignment`` maps each client to its ``active``, ``standby`` and
    ``warmup`` task ids (arrays of strings); ``probing_rebalance_needed``, when present, a boolean."""
    clients = _need_obj(body.get("assignment"), f"{where}.assignment")
    for client, tasks in clients.items():
        at = f"{where}.assignment[{client[:100]!r}]"
        roles = _need_obj(tasks, at)
        for role in ("active", "standby", "warmup"):
            _need_strings(roles.get(role), f"{at}.{role}")
    if "probing_rebalance_needed" in body and not isinstance(body["probing_rebalance_needed"], bool):
        raise PlanDecodeError(f"{where}.probing_rebalance_needed must be a boolean")


def _revoking_handover(h: Mapping[str, Any], where: str) -> None:
    _need_strings(h.get("awaiting"), f"{where}.awaiting")
    target = _need_obj(h.get("target"), f"{where}.target")
    _check_consumer_group(
        _need_obj(target.get("consumer_group"), f"{where}.target.consumer_group"),
        f"{where}.target.consumer_group",
    )
    _need_obj(target.get("stats"), f"{where}.target.stats")
    if "release_timeout_s" in h:
        _need_number(h["release_timeout_s"], f"{where}.release_timeout_s", 0)
    if "from_generation" in h:
        _need_int(h["from_generation"], f"{where}.from_generation", 1)
    if "unreleased" in h:
        _check_partitions(h["unreleased"], f"{where}.unreleased")


def _completed_handover(h: Mapping[str, Any], where: str) -> None:
    _need_int(h.get("from_generation"), f"{where}.from_generation", 1)
    _need_strings(h.get("timed_out"), f"{where}.timed_out")
    if "unreleased" in h:
        _check_partitions(h["unreleased"], f"{where}.unreleased")


def _check_handover(v: Any, where: str) -> dict[str, Any]:
    """The schema's ``handover``: exactly one of a revoking handover (``awaiting``, ``target``) and a
    completed one (``from_generation``, ``timed_out``)."""
    h = _need_obj(v, where)
    problems = []
    for check in (_revoking_handover, _completed_handover):
        try:
            check(h, where)
        except PlanDecodeError as e:
            problems.append(str(e))
    if len(problems) != 1:
        why = "; ".join(problems) if problems else "it is both a revoking and a completed handover"
        raise PlanDecodeError(f"{where}: neither a revoking nor a completed handover ({why})"[:600])
    return h


def _check_envelope(v: Mapping[str, Any], k: str) -> None:
    """The fields around the body, each of the type docs/plan-schema.json gives it when present.

    Only the body and ``stats`` are required (and ``schema`` and ``generation``, checked before):
    CONTRACT.md binds a plan record to "at least" ``state``, ``cluster_fingerprint``, ``reason`` and
    ``created_at``, written by every agent, so a record of the contract's minimum is a plan and a
    missing field reads as its default, as before; a field of the wrong type is refused.
    """
    if "state" in v and v["state"] not in (STATE_PROPOSED, STATE_REVOKING):
        raise PlanDecodeError(f"{k}: state must be proposed or revoking, not {repr(v['state'])[:40]}")
    for field in ("cluster_fingerprint", "registration_fingerprint", "reason", "created_at"):
        if field in v:
            _need_str(v[field], f"{k}: {field}")
    for field in ("created_at_ms", "moved"):
        if field in v:
            _need_int(v[field], f"{k}: {field}")
    if "locality" in v:
        loc = _need_obj(v["locality"], f"{k}: locality")
        if loc.get("fetch_mode", "nearest-replica") not in ("nearest-replica", "leader"):
            raise PlanDecodeError(f"{k}: locality.fetch_mode must be nearest-replica or leader")
        for when in ("before", "after"):
            if loc.get(when) is not None:
                _locality(loc[when], f"{k}: locality.{when}")
    if "publisher" in v:
        publisher = _need_obj(v["publisher"], f"{k}: publisher")
        _need_str(publisher.get("agent_id"), f"{k}: publisher.agent_id")
        _need_int(publisher.get("epoch"), f"{k}: publisher.epoch")


def _checked_value(k: str, kind: str, name: str, value: bytes) -> dict[str, Any]:
    """The value of plan key ``k`` if it has docs/plan-schema.json's shape; :class:`PlanDecodeError` naming
    the first field that does not (a record a reader could not show or act on is no plan)."""
    try:
        v = load_record(value, MAX_PLAN_BYTES, k)
    except RecordError as e:
        raise PlanDecodeError(str(e), e.reason) from None
    if not isinstance(v, dict):
        raise PlanDecodeError(f"{k}: value must be a JSON object", "not_object")
    schema = v.get("schema")
    if isinstance(schema, bool) or schema != SCHEMA_VERSION:  # true == 1 in Python, not in the schema
        raise PlanDecodeError(f"{k}: unsupported schema {repr(schema)[:40]}", "schema")
    try:
        safe_int(v.get("generation"), f"{k}: generation", minimum=1)
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
    other = _BODY[STREAMS if kind == CONSUMER else CONSUMER]
    if other in v:
        raise PlanDecodeError(f"{k}: a {kind} plan carries {other} too")
    if kind == CONSUMER:
        _check_consumer_group(v[body_key], f"{k}: consumer_group")
    else:
        _check_streams_app(v[body_key], f"{k}: streams_app")
    _check_envelope(v, k)
    if "handover" in v:
        _check_handover(v["handover"], f"{k}: handover")
    bad = _finite_problem(v)
    if bad is not None:
        raise PlanDecodeError(f"{k}: {bad}, not a finite number (JSON has none)")
    return v


def decode_record(key: bytes | str, value: bytes | None) -> PlanRecord | None:
    """A plan record, or None for a tombstone; :class:`PlanDecodeError` when malformed.

    A record is taken only with the shape docs/plan-schema.json gives every field a reader uses
    (:func:`_checked_value`), so no reader (``rackplan plans``, the planner's replay, a follower)
    meets a shape it cannot handle: a malformed record is refused with the field named, like a
    forged one.
    """
    try:
        k = key.decode("utf-8", errors="strict") if isinstance(key, bytes) else key
    except UnicodeDecodeError:
        raise PlanDecodeError("plan key is not UTF-8", "not_utf8") from None
    kind, name = split_key(k)
    if value is None:
        return None
    v = _checked_value(k, kind, name, value)
    body_key = _BODY[kind]
    loc: Mapping[str, Any] = v.get("locality", {})
    before, after = loc.get("before"), loc.get("after")
    return PlanRecord(
        key=k,
        generation=v["generation"],
        cluster_fingerprint=v.get("cluster_fingerprint", ""),
        registration_fingerprint=v.get("registration_fingerprint", ""),
        reason=v.get("reason", ""),
        created_at=v.get("created_at", ""),
        document={body_key: v[body_key], "stats": v["stats"]},
        moved=v.get("moved", 0),
        fetch_mode=loc.get("fetch_mode", "nearest-replica"),
        locality_before=None if before is None else _locality(before, "locality.before"),
        locality_after=Locality(0, 0) if after is None else _locality(after, "locality.after"),
        state=v.get("state", STATE_PROPOSED),
        handover=v.get("handover"),
        publisher=v.get("publisher"),
    )
