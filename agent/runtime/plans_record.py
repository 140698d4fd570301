"""``rackplan plans``: the plan of record of every key, read from the plan topic as a follower reads it.

Pure: raw records in (:class:`~..kafka.tail.RawRecord`, oldest first per partition), a
:class:`PlanTopic` out.  Each record goes through the check every reader of the whole topic
makes (:func:`~..kafka.read_back.verified`: the agent's MAC when a secret is set, the key, the
bounded decoder and the schema), then through the followers' rule (:class:`~..state.plan_book.PlanBook`):
a plan counts only above every generation seen for its key, a tombstone ends the key's plan.  What
a follower would not take is kept beside the plan, with its reason, so the command reports a forged
or malformed record instead of trusting it, and shows a stale one for what it is.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..kafka.read_back import verified
from ..kafka.tail import RawRecord
from ..protocol.plans import PlanDecodeError, PlanKey, PlanRecord
from ..state.plan_book import PlanBook


def iso_ms(ms: int | None) -> str | None:
    """A record timestamp (epoch ms) as RFC 3339 UTC, milliseconds kept; None stays None."""
    if ms is None:
        return None
    t = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class Seen:
    """Where a record sits on the plan topic, and why a follower leaves it aside (``reason``, ``detail``)."""

    partition: int
    offset: int
    timestamp_ms: int | None
    reason: str = ""
    detail: str = ""

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "partition": self.partition,
            "offset": self.offset,
            "written_at": iso_ms(self.timestamp_ms),
        }
        if self.reason:
            out["reason"] = self.reason
            out["detail"] = self.detail
        return out


@dataclass
class KeyHistory:
    """One key of the plan topic: the plan followers act on, and every record they would not take."""

    key: str
    #: the plan of record (None: the key's last record followers took is a tombstone)
    plan: PlanRecord | None = None
    #: where :attr:`plan` (or the tombstone that ended it) sits
    at: Seen | None = None
    #: plans not above a generation seen before: followers ignore them
    stale: list[Seen] = field(default_factory=list)
    #: records refused: no valid MAC (forged), malformed, wrong schema
    refused: list[Seen] = field(default_factory=list)

    @property
    def tombstoned(self) -> bool:
        return self.plan is None and self.at is not None


@dataclass
class PlanTopic:
    """The plan topic as followers see it: per key, its plan of record; records no key can be given to apart."""

    topic: str
    keys: dict[str, KeyHistory] = field(default_factory=dict)
    #: refused records whose key is no plan key (missing, not UTF-8, of an unknown kind)
    unkeyed: list[Seen] = field(default_factory=list)
    #: records read
    records: int = 0

    def refused_count(self) -> int:
        return len(self.unkeyed) + sum(len(k.refused) for k in self.keys.values())


def plan_topic(raw: Iterable[RawRecord], topic: str, secret: bytes | None) -> PlanTopic:
    """Every record of ``topic`` folded into what followers holding ``secret`` act on (module docstring)."""
    out = PlanTopic(topic)
    book = PlanBook()
    for r in raw:
        out.records += 1
        try:
            key, rec = verified(r, topic, secret)
        except PlanDecodeError as e:
            seen = Seen(r.partition, r.offset, r.timestamp_ms, e.reason, str(e)[:300])
            owner = _plan_key(r.key)
            if owner is None:
                out.unkeyed.append(seen)
            else:
                out.keys.setdefault(owner, KeyHistory(owner)).refused.append(seen)
            continue
        history = out.keys.setdefault(key, KeyHistory(key))
        at = Seen(r.partition, r.offset, r.timestamp_ms)
        if book.apply(key, rec):
            history.plan, history.at = rec, at
        elif rec is not None:
            newest = book.latest(key) or book.last_live(key)
            held = "?" if newest is None else newest.generation
            history.stale.append(
                Seen(
                    r.partition,
                    r.offset,
                    r.timestamp_ms,
                    "stale",
                    f"generation {rec.generation} is not above generation {held} seen before",
                )
            )
    return out


def _plan_key(key: bytes | None) -> str | None:
    """The plan key a refused record was written under, when it is one (a forged plan names its victim)."""
    if key is None:
        return None
    try:
        return str(PlanKey.parse(key.decode("utf-8")))
    except (UnicodeDecodeError, PlanDecodeError):
        return None


def resolve_key(name: str, keys: Iterable[str]) -> str:
    """The plan key a user means: ``consumer/<g>`` or ``streams/<a>`` as given; a bare name is the
    consumer group of that name, else the Streams app of that name when only it has records.
    :class:`PlanDecodeError` when ``name`` can be no plan key (``plans`` checks it before reading)."""
    if not name:
        raise PlanDecodeError(
            "empty: expected consumer/<group>, streams/<app> or a bare consumer group id", "bad_key"
        )
    if "/" in name:
        return str(PlanKey.parse(name))
    known = set(keys)
    consumer, streams = str(PlanKey.parse(f"consumer/{name}")), f"streams/{name}"
    return streams if streams in known and consumer not in known else consumer


# ---- the documents of `plans show` and `plans list` ------------------------------------------------


def plan_json(rec: PlanRecord) -> dict[str, Any]:
    """A plan of record as ``plans show`` prints it: who wrote it, when, why, its locality and stats."""
    body = rec.body
    assignment = body.get("assignment") or {}
    publisher = rec.publisher or {}
    if rec.kind == "consumer":
        partitions = sum(len(parts) for parts in assignment.values())
    else:
        partitions = sum(len(t.get("active") or []) for t in assignment.values() if isinstance(t, dict))
    return {
        "generation": rec.generation,
        "state": rec.state,
        "agent_id": publisher.get("agent_id"),
        "epoch": publisher.get("epoch"),
        "created_at": rec.created_at,
        "reason": rec.reason,
        "moved": rec.moved,
        "fetch_mode": rec.fetch_mode,
        "locality": {
            "before": None if rec.locality_before is None else rec.locality_before.as_json(),
            "after": rec.locality_after.as_json(),
        },
        "stats": dict(rec.document["stats"]),
        "members": len(assignment),
        "partitions" if rec.kind == "consumer" else "active_tasks": partitions,
        "assignment": assignment,
        **({} if rec.handover is None else {"handover": dict(rec.handover)}),
    }


def key_json(h: KeyHistory) -> dict[str, Any]:
    """One key: its plan of record (or why none), the record it sits in, and what followers left aside.

    ``ok`` is false when there is no plan to act on or when a record was refused (forged or malformed):
    both are the operator's to look at."""
    k = PlanKey.split(h.key)
    status = "planned" if h.plan is not None else ("tombstoned" if h.tombstoned else "no_valid_plan")
    return {
        "key": h.key,
        "kind": k.kind,
        "name": k.name,
        "status": status,
        "ok": h.plan is not None and not h.refused,
        "record": None if h.at is None else h.at.as_json(),
        "plan": None if h.plan is None else plan_json(h.plan),
        "stale": [s.as_json() for s in h.stale],
        "refused": [s.as_json() for s in h.refused],
    }


def topic_json(t: PlanTopic, secret: bool) -> dict[str, Any]:
    """``plans list``: every key of the topic; ``ok`` false when any record was refused."""
    return {
        "topic": t.topic,
        "records": t.records,
        "authenticated": secret,
        "ok": t.refused_count() == 0,
        "keys": [key_json(t.keys[k]) for k in sorted(t.keys)],
        "refused_without_key": [s.as_json() for s in t.unkeyed],
    }
