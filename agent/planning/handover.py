"""Two-phase handovers for groups whose members follow plans, like Kafka's cooperative protocol.

A partition that moves from one plan-following member to another must never
be read by both at once.  So the agent publishes the new plan in two steps:

1. a **revoking** plan (``state: "revoking"``, generation *g*): every member
   keeps what it keeps and gets what nobody holds, but a partition that moves
   away from a live follower goes to nobody and is listed under ``revoked``
   for its old owner.  The record carries the complete plan under
   ``handover.target`` so that another agent can finish the handover;
2. once every follower asked to give something up has confirmed it (its
   registration says ``released_generation >= g``: offsets committed,
   partitions unassigned), or has left (its registration expired or was
   tombstoned), or ``followers.release_timeout_s`` passed, the **target**
   plan (``state: "proposed"``, generation *g + 1*).

Followers in ``subscription`` mode (fallen back to ordinary group
subscription while the agent was away) may hold any partition, so a plan that
brings them back first assigns nothing at all: they leave the group and
confirm, then the target plan hands everything out.

A holder that is *not* a live follower any more (its registration expired) is
not waited for, but it is not trusted either: it stopped reading when its
registration went unconfirmed, yet it may start again, from the plan it knew,
just before it reads the plan that gave its partitions away (its refreshed
registration landed after the agent expired it).  So every plan that gives
such a holder's partitions to another member lists them under
``handover.unreleased``, and the taker waits for that holder's registration
to say it applied this plan (or to be gone: :mod:`rackplan.agent.follower.releases`).
Found by the chaos scenario on real Kafka: a follower that fenced itself
through a broker outage re-took its partitions 1.5 s before the agent's plan
without it reached it, and both it and the new owners read them for 18-54 ms.

Pure: the loop (agent/runtime/loop.py) reads registrations and publishes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..protocol.plans import STATE_PROPOSED, STATE_REVOKING, PlanRecord
from ..protocol.registrations import FollowerStatus

TP = tuple[str, int]


def _tps(parts: Any) -> list[TP]:
    """``[[topic, partition], ...]`` as tuples; anything malformed is left out."""
    out: list[TP] = []
    for tp in parts if isinstance(parts, list) else []:
        if (
            isinstance(tp, list | tuple)
            and len(tp) == 2
            and isinstance(tp[0], str)
            and isinstance(tp[1], int)
            and not isinstance(tp[1], bool)
        ):
            out.append((tp[0], tp[1]))
    return out


def assignment_of(body: Mapping[str, Any], field: str = "assignment") -> dict[str, list[TP]]:
    """member id -> partitions of a ``consumer_group`` object's ``assignment`` (or ``revoked``)."""
    raw = body.get(field)
    if not isinstance(raw, dict):
        return {}
    return {str(m): _tps(parts) for m, parts in raw.items()}


def holders(body: Mapping[str, Any] | None) -> dict[TP, str]:
    """Who may hold each partition under a plan: its assignee, or the member asked to revoke it."""
    if body is None:
        return {}
    out: dict[TP, str] = {}
    for field in ("revoked", "assignment"):  # an assignee wins over a revoker of the same partition
        for mid, parts in sorted(assignment_of(body, field).items()):
            for tp in parts:
                out[tp] = mid
    return out


def _may_hold(body: Mapping[str, Any] | None, also: Mapping[str, Sequence[TP]] | None) -> dict[TP, set[str]]:
    """Who may hold each partition: its holder under a plan (:func:`holders`), plus members listed in ``also``."""
    out: dict[TP, set[str]] = {tp: {mid} for tp, mid in holders(body).items()}
    for m, parts in (also or {}).items():
        for tp in parts:
            out.setdefault(tp, set()).add(m)
    return out


def unreleased_of(handover: Mapping[str, Any] | None) -> tuple[int, dict[str, list[TP]]]:
    """A plan's ``handover.unreleased`` and the generation its members must confirm (0 and {}: none)."""
    if not isinstance(handover, Mapping):
        return 0, {}
    generation = handover.get("from_generation")
    if type(generation) is not int:
        return 0, {}
    return generation, assignment_of(handover, "unreleased")


def still_unreleased(
    handover: Mapping[str, Any] | None, followers: Mapping[str, FollowerStatus]
) -> dict[str, list[TP]]:
    """What a plan listed as not yet released by live followers that have still not confirmed it.

    Such a member may read those partitions until it applies that plan, so
    the next plan treats it as one of their holders (:func:`split`).
    """
    generation, unreleased = unreleased_of(handover)
    return {
        m: parts
        for m, parts in sorted(unreleased.items())
        if parts
        and m in followers
        and followers[m].released_generation < generation
        and followers[m].mode != "subscription"
    }


def absent_unreleased(
    handover: Mapping[str, Any] | None, followers: Mapping[str, FollowerStatus]
) -> dict[str, list[TP]]:
    """What a plan listed as not yet released by members that are still no live followers.

    The agent may plan again before it reads such a member's refreshed
    registration; the next plan then lists them again (:func:`departed`'s
    ``carried``), for as long as the caller deems the listing recent.
    """
    _, unreleased = unreleased_of(handover)
    return {m: parts for m, parts in sorted(unreleased.items()) if parts and m not in followers}


def departed(
    target: Mapping[str, Sequence[TP]],
    last_body: Mapping[str, Any] | None,
    followers: Mapping[str, FollowerStatus],
    carried: Mapping[str, Sequence[TP]] | None = None,
) -> dict[str, list[TP]]:
    """Per holder under the plan of record that is no live follower now, what ``target`` gives another member.

    The agent does not wait for such a holder (it left, or its registration
    expired), but a follower whose refreshed registration landed just after it
    expired may still read them: the plan lists them as ``unreleased``, and
    takers wait for the holder's registration (module docstring).  ``carried``:
    what the plan of record listed so for members still absent
    (:func:`absent_unreleased`); they count as holders too.
    """
    may_hold = _may_hold(last_body, carried)
    out: dict[str, list[TP]] = {}
    for mid in sorted(target):
        for tp in target[mid]:
            for old in may_hold.get(tp, ()):
                if old != mid and old not in followers:
                    out.setdefault(old, []).append(tp)
    return {m: sorted(v) for m, v in sorted(out.items())}


def with_unreleased(record: PlanRecord, gone: Mapping[str, Sequence[TP]]) -> PlanRecord:
    """``record`` with ``handover.unreleased`` naming ``gone``'s partitions, confirmed at its own generation.

    A revoking plan keeps its ``awaiting`` and ``target``; a single-phase plan
    gets ``{"from_generation": its generation, "timed_out": [], "unreleased": ...}``.
    """
    if not any(gone.values()):
        return record
    unreleased = {m: [[t, p] for t, p in gone[m]] for m in sorted(gone) if gone[m]}
    base = dict(record.handover) if record.handover is not None else {"timed_out": []}
    return dataclasses.replace(
        record, handover={**base, "from_generation": record.generation, "unreleased": unreleased}
    )


@dataclass(frozen=True, slots=True)
class Split:
    """The revoking phase of a handover."""

    assignment: dict[str, list[TP]]
    revoked: dict[str, list[TP]]
    #: followers whose release the target plan waits for
    awaiting: tuple[str, ...]


def split(
    target: Mapping[str, Sequence[TP]],
    last_body: Mapping[str, Any] | None,
    followers: Mapping[str, FollowerStatus],
    lingering: Mapping[str, Sequence[TP]] | None = None,
) -> Split | None:
    """The revoking phase that must precede ``target``; None when it can be published at once.

    ``followers``: the group's live plan-following members.  Only partitions
    that a live follower may hold and that go to another member wait; members
    that do not follow plans (or that left) hold nothing the agent must wait for.
    ``lingering``: partitions the plan of record listed as not yet released by
    a live follower that still has not confirmed it (:func:`still_unreleased`):
    it may hold them too, besides their assignee.
    """
    subscribed = sorted(m for m, st in followers.items() if st.mode == "subscription")
    may_hold = _may_hold(last_body, lingering)
    if subscribed:
        held: dict[str, list[TP]] = {}
        for tp, mids in may_hold.items():
            for mid in mids & followers.keys():
                held.setdefault(mid, []).append(tp)
        return Split(
            assignment={m: [] for m in sorted(target)},
            revoked={m: sorted(v) for m, v in sorted(held.items())},
            awaiting=tuple(sorted(set(subscribed).union(held))),
        )
    keep: dict[str, list[TP]] = {}
    revoked: dict[str, list[TP]] = {}
    for mid in sorted(target):
        mine = keep.setdefault(mid, [])
        for tp in target[mid]:
            olds = sorted((may_hold.get(tp, set()) - {mid}) & followers.keys())
            for old in olds:
                revoked.setdefault(old, []).append(tp)
            if not olds:
                mine.append(tp)
    if not revoked:
        return None
    return Split(
        assignment={m: sorted(v) for m, v in keep.items()},
        revoked={m: sorted(v) for m, v in sorted(revoked.items())},
        awaiting=tuple(sorted(revoked)),
    )


def _jsonable(parts: Mapping[str, Sequence[TP]]) -> dict[str, list[list[Any]]]:
    return {m: [[t, p] for t, p in parts[m]] for m in sorted(parts)}


def revoking_record(target: PlanRecord, s: Split, release_timeout_s: float) -> PlanRecord:
    """The first phase of ``target``: same generation, fingerprints and locality; the target inside."""
    body = dict(target.body)
    stats = dict(target.document.get("stats") or {})
    stats["assigned"] = sum(len(v) for v in s.assignment.values())
    document = {
        "consumer_group": {
            "group_id": body.get("group_id"),
            "assignment": _jsonable(s.assignment),
            "revoked": _jsonable(s.revoked),
        },
        "stats": stats,
    }
    return dataclasses.replace(
        target,
        document=document,
        state=STATE_REVOKING,
        handover={
            "awaiting": list(s.awaiting),
            "release_timeout_s": release_timeout_s,
            "target": {"consumer_group": target.body, "stats": target.document.get("stats") or {}},
        },
    )


@dataclass(frozen=True, slots=True)
class Pending:
    """A revoking plan published (or replayed) whose target is still to come."""

    revoking: PlanRecord
    awaiting: tuple[str, ...]
    #: agent clock when the wait began (a takeover restarts it)
    started: float

    @property
    def generation(self) -> int:
        return self.revoking.generation

    def outstanding(self, followers: Mapping[str, FollowerStatus]) -> list[str]:
        """Awaited followers that are still registered and have not confirmed the release."""
        g = self.generation
        return [
            m
            for m in self.awaiting
            if m in followers
            and (followers[m].released_generation < g or followers[m].mode == "subscription")
        ]

    def left(self, followers: Mapping[str, FollowerStatus]) -> list[str]:
        """Awaited members that are no live followers now (expired, unregistered, or not read yet)."""
        return [m for m in self.awaiting if m not in followers]

    def target(
        self, generation: int, created_at: str, timed_out: Sequence[str], left: Sequence[str] = ()
    ) -> PlanRecord:
        """The plan that completes the handover.

        When followers did not confirm in time, ``handover.unreleased`` names, per such member, the
        partitions the revoking plan asked it to give up: a plan follower takes none of them before that
        member's registration says it released them, or that it left or follows the group
        (:mod:`rackplan.agent.follower.releases`), so a partition never has two readers, however late.
        So does it for the awaited members that ``left`` (no live follower now): the agent does not wait
        for them, but one whose registration expired through an outage may come back and read on from the
        plan it knew (the rule of :func:`departed`; found by a hunt: such a member's partitions went to
        another follower unlisted).  What the revoking plan listed for holders that had left is listed again.
        """
        assert self.revoking.handover is not None
        revoked = assignment_of(self.revoking.body, "revoked")
        late = {m: revoked[m] for m in (*timed_out, *left) if revoked.get(m)}
        _, gone = unreleased_of(self.revoking.handover)
        merged = {m: sorted({*late.get(m, ()), *gone.get(m, ())}) for m in sorted({*late, *gone})}
        unreleased = {m: [[t, p] for t, p in parts] for m, parts in merged.items() if parts}
        return dataclasses.replace(
            self.revoking,
            generation=generation,
            created_at=created_at,
            document=dict(self.revoking.handover["target"]),
            state=STATE_PROPOSED,
            handover={
                "from_generation": self.generation,
                "timed_out": sorted(timed_out),
                **({"unreleased": unreleased} if unreleased else {}),
            },
            publisher=None,
        )


def pending_from(record: PlanRecord | None, now: float) -> Pending | None:
    """A replayed plan of record still in its revoking phase, ready to be completed (another agent started it).

    A revoking record whose target cannot be read is not resumed: it stays the
    plan of record, and the next plan starts from what it says.
    """
    if record is None or record.state != STATE_REVOKING or record.handover is None:
        return None
    target = record.handover.get("target")
    awaiting = record.handover.get("awaiting")
    if (
        not isinstance(target, dict)
        or not isinstance(target.get("consumer_group"), dict)
        or not isinstance(target["consumer_group"].get("assignment"), dict)
        or not isinstance(target.get("stats"), dict)
        or not isinstance(awaiting, list)
        or not all(isinstance(m, str) for m in awaiting)
    ):
        return None
    return Pending(revoking=record, awaiting=tuple(sorted(awaiting)), started=now)
