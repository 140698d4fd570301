"""When a follower stops following plans (and when it comes back), as functions of values.

Falling back is the safe default when the agent cannot be trusted to plan:
its heartbeat is older than ``agent_timeout_s``, or no plan naming this member
arrived within ``plan_timeout_s``.  Coming back needs the agent alive *and* a
plan newer than the one the member fell back from, naming it: otherwise a
member would flap between the plan and the group.  A member whose registration
has gone unconfirmed for 2/3 of its TTL fences itself: the agent may expire it
at the TTL and give its partitions to someone else.
"""

from __future__ import annotations


def plan_is_fresh(
    latest_generation: int | None, applied_generation: int, fallback_generation: int, named: bool
) -> bool:
    """A plan newer than the one applied and than the one fallen back from, that names this member."""
    return (
        latest_generation is not None
        and latest_generation > max(applied_generation, fallback_generation)
        and named
    )


def fallback_due(
    *,
    agent_gone: bool,
    waiting_for_s: float | None,
    plan_timeout_s: float,
    latest_generation: int | None,
    applied_generation: int,
    fallback_generation: int,
    named: bool,
) -> bool:
    """The agent is gone, or this member has waited ``plan_timeout_s`` for a plan it can follow.

    ``waiting_for_s``: how long the member has been without a plan it reads
    (None: it reads one); ``named``: the newest plan names this member.
    """
    if agent_gone:
        return True
    if waiting_for_s is None or waiting_for_s < plan_timeout_s:
        return False
    return not plan_is_fresh(latest_generation, applied_generation, fallback_generation, named)


def should_rejoin(
    *, agent_alive: bool, latest_generation: int | None, fallback_generation: int, named: bool
) -> bool:
    """In group subscription: the agent is back and published a plan newer than the one fallen back from."""
    return latest_generation is not None and agent_alive and latest_generation > fallback_generation and named


def registration_stale(now_ms: int, answered_ms: int, registration_ttl_s: float) -> bool:
    """No answer (confirmation or refusal) to this member's registration for 2/3 of its TTL."""
    return now_ms - answered_ms > registration_ttl_s * 1000 * 2 / 3
