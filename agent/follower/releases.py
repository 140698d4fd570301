"""The taker's side of a two-phase handover: which partitions of a plan are not released yet.

The agent publishes a handover's target once every follower asked to give
something up has confirmed, left, or stayed silent for
``followers.release_timeout_s``.  In that last case the target lists, under
``handover.unreleased``, each silent member's partitions (issue 24: only
timing kept two followers from reading one partition).  A follower takes none
of them until the holder's own registration says it let go: its
``released_generation`` reached the revoking generation, it follows the group
(``mode: subscription``: Kafka then refuses the taker's fencing commit), it no
longer follows plans, or its registration is gone (tombstoned, or older than
the TTL: a follower fences itself at 2/3 of it).  A holder judged gone for
silence alone is judged again after a read of the registrations to their end:
a holder that came back may have refreshed its registration just before it
re-took what it held, and a taker whose read lags must not miss that.  Pure;
the registrations are read by :class:`rackplan.agent.follower.intake.ControlIntake`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.ports import TopicPart
from ..protocol.registrations import FollowerStatus


@dataclass(frozen=True, slots=True)
class Seen:
    """A group member's newest registration as a taker reads it."""

    #: None: the member does not follow plans (it reads through the group, which Kafka fences)
    status: FollowerStatus | None
    #: when it was written (the record's broker timestamp, or the earlier signed one)
    timestamp_ms: int


def _parts(v: Any) -> list[TopicPart]:
    out: list[TopicPart] = []
    for tp in v if isinstance(v, list) else []:
        if isinstance(tp, list) and len(tp) == 2 and isinstance(tp[0], str) and type(tp[1]) is int:
            out.append((tp[0], tp[1]))
    return out


def released(
    seen: Seen | None,
    generation: int,
    now_ms: int,
    ttl_ms: int,
    absent_is_gone: bool = True,
    silence_is_gone: bool = True,
) -> bool:
    """The member holds nothing of revoking generation ``generation`` any more, as its registration says.

    ``absent_is_gone``: the registrations were read to their end (or for a whole TTL, in which every live
    member refreshes), so a member without one has left; otherwise its record may just not be read yet.
    ``silence_is_gone`` False: a member that would count as gone only for what was *not* read of it (no
    record, or only one older than the TTL: a read lagging behind its refresh says the same) counts as
    holding; the caller then reads the registrations to their end and asks again.
    """
    if seen is None:
        return absent_is_gone and silence_is_gone
    if seen.status is None:
        return True
    if now_ms - seen.timestamp_ms > ttl_ms:
        return silence_is_gone
    return seen.status.released_generation >= generation or seen.status.mode == "subscription"


def withheld(
    handover: Mapping[str, Any] | None,
    me: str,
    members: Mapping[str, Seen] | None,
    now_ms: int,
    ttl_ms: int,
    absent_is_gone: bool = True,
    silence_is_gone: bool = True,
) -> dict[str, list[TopicPart]]:
    """member -> partitions of ``handover.unreleased`` that member may still read (so not to take yet).

    ``members`` None: the registrations are not readable here, so nothing is withheld (the agent's
    release timeout is all there is, docs/followers.md).  ``silence_is_gone``: see :func:`released`.
    """
    if members is None or not isinstance(handover, Mapping):
        return {}
    unreleased, generation = handover.get("unreleased"), handover.get("from_generation")
    if not isinstance(unreleased, Mapping) or type(generation) is not int:
        return {}
    return {
        str(m): parts
        for m, raw in sorted(unreleased.items())
        if m != me
        and (parts := _parts(raw))
        and not released(members.get(m), generation, now_ms, ttl_ms, absent_is_gone, silence_is_gone)
    }
