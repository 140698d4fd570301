"""Another deployment's agents in this agent's group: named once per leadership term, never acted on.

Agents that do not share a lease topic must not share ``ha.group_id``.  Each deployment still gets
its own lease partition (the group's assignor gives each topic's partition to a subscriber of that
topic), but every join, leave or restart in either one rebalances the whole group, and while a
rebalance lasts the coordinator refuses every leader's lease confirmation (``REBALANCE_IN_PROGRESS``,
then ``ILLEGAL_GENERATION``): both deployments' publishing pauses, and a new agent may stand by for a
long time before its lease is assigned (``rackplan demo --keep-running``'s ``agent run`` shared the
demo agent's group: 9 s alone, over 30 s in 2 of 4 CI runs).  Nothing is lost, so a new leader
describes its group and warns, naming the other lease topics and the setting to change; it does not
refuse to lead.  Read from DescribeGroups (the members' assignments), through the agent's admin port,
so the call runs where the agent's other DescribeGroups run (:mod:`rackplan.agent.kafka.isolated_admin`),
at the end of the term's start-up, asked for at most :data:`CHECK_TIMEOUT_S`: on a coordinator that
does not answer, advice must not hold up the plans for long.  (Made after heartbeats started, the same
call left the embedded cluster's outage scenario with no failed cycle before the lease expired:
``integration/test_agent_loop.py``, 3 of 3 runs; not understood yet, so it stays here.)
"""

from __future__ import annotations

from ..core.ports import AdminPort
from ..groups.membership import RealGroup, real_group
from ..kafka.errors import error_name
from ..kafka.timeouts import operation_timeout_s, result_timeout_s
from ..state.term import Wiring

__all__ = ["CHECK_TIMEOUT_S", "other_lease_topics", "warn_if_shared"]

#: the DescribeGroups request's timeout (or ``metadata.request_timeout_s`` when lower)
CHECK_TIMEOUT_S = 2.0


def other_lease_topics(group: RealGroup, lease_topic: str) -> list[str]:
    """The topics other than ``lease_topic`` that members of the agents' group are assigned, sorted: the
    lease topics of other deployments sharing the group."""
    return sorted({topic for m in group.members for topic, _ in m.assignment if topic != lease_topic})


def warn_if_shared(w: Wiring, admin: AdminPort) -> list[str] | None:
    """Describe the agents' group and warn when other deployments' agents are in it; their lease topics
    (empty: none), or None when the group could not be described (unsupported, denied, timed out:
    said at info, since the check is advice) or the agent runs for no lease."""
    s = w.settings
    if not s.ha.enabled:
        return None
    group_id, timeout_s = s.ha.group_id, min(s.metadata.request_timeout_s, CHECK_TIMEOUT_S)
    try:
        futures = admin.describe_consumer_groups([group_id], request_timeout=operation_timeout_s(timeout_s))
        group = real_group(futures[group_id].result(timeout=result_timeout_s(timeout_s)))
    except Exception as e:  # KafkaException, a timeout, the describing child gone: advice only
        w.log.info(
            "agents' group not described; whether another deployment shares it is not checked",
            group=group_id,
            error=error_name(e, type(e).__name__),
        )
        return None
    others = other_lease_topics(group, s.ha.lease_topic)
    if others:
        w.log.warning(
            "another deployment's agents share this agents' group: each one's rebalances pause the "
            "other's publishing; give each deployment its own ha.group_id",
            group=group_id,
            lease_topic=s.ha.lease_topic,
            other_lease_topics=others,
        )
    return others
