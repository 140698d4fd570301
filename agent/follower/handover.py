"""The follower's side of a two-phase handover, as values: what a plan makes this member give up and take.

The agent moves a partition in two plans: the *revoking* plan leaves it with
nobody, the *assigning* plan gives it to its new owner once the old owner's
registration says ``released_generation`` >= the revoking generation.  A
follower therefore always gives up first (committed, then unassigned) and
takes second; these functions say what, and when to try a refused take again.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from ..core.ports import TopicPart

#: where the follower is: no plan to follow yet / reading what a plan gives it / in group subscription
WAITING, PLAN, SUBSCRIPTION = "waiting", "plan", "subscription"


@dataclass(frozen=True)
class Handover:
    """One plan applied to what this member reads now: give ``revoke`` up first, then take ``add``."""

    revoke: list[TopicPart]
    add: list[TopicPart]
    #: the mode after the plan: PLAN when the plan names this member, else WAITING
    mode: str


def handover(
    owned: Collection[TopicPart], assignment: Mapping[str, Sequence[TopicPart]], member_id: str
) -> Handover:
    """What ``assignment`` asks of ``member_id`` while it reads ``owned`` (both lists sorted)."""
    mine = set(assignment.get(member_id, []))
    return Handover(
        revoke=sorted(set(owned) - mine),
        add=sorted(mine - set(owned)),
        mode=PLAN if member_id in assignment else WAITING,
    )


def missing(
    assignment: Mapping[str, Sequence[TopicPart]], member_id: str, owned: Collection[TopicPart]
) -> bool:
    """The plan gives ``member_id`` partitions it does not read yet (a take the group refused so far)."""
    return bool(set(assignment.get(member_id, [])) - set(owned))


def retry_take_after(now: float, commit_interval_s: float) -> float:
    """When to try again a take the group refused (it has members in group subscription): soon, not busily."""
    return now + min(1.0, commit_interval_s)
