"""A standby that waits long for a lease nobody holds rejoins the agents' group.

Why: librdkafka's group leader can give a just-created lease topic's partition
to no member (its assignment-time metadata request answered
UNKNOWN_TOPIC_OR_PART) and never rebalances by itself, since the partition
count it watches does not change: every agent would stand by for good (seen
on the real cluster, CI 1 run in 4; :meth:`.lease.Lease.rejoin`).

Who holds the lease is what the standby's :class:`.leader_watch.LeaderWatch` already
reads (for ``/v1/status``), refreshed in the same wait loop: the rejoin goes by
it rather than reading the lease topic again.
"""

from __future__ import annotations

from typing import Protocol

from ..metrics import declared as metric
from ..state.term import Wiring
from .leader_watch import LeaderWatch
from .lease import lease_orphaned

__all__ = ["Rejoinable", "lease_rejoin_after_s", "rejoin_if_orphaned"]


class Rejoinable(Protocol):
    """What the rejoin needs of :class:`.lease.Lease`: leave the agents' group and join it again."""

    def rejoin(self) -> None: ...


def lease_rejoin_after_s(session_timeout_s: float) -> float:
    """How long a standby waits for the lease before it checks whether anybody holds it (and rejoins when
    nobody does): two session timeouts, at least 10 s, so that a dead holder's eviction comes first."""
    return max(2 * session_timeout_s, 10.0)


def rejoin_if_orphaned(w: Wiring, lease: Rejoinable, watch: LeaderWatch, waited_s: int) -> bool:
    """Rejoin when nobody can be holding the lease (:func:`.lease.lease_orphaned`), going by the newest
    heartbeat ``watch`` read; True when it did.  A watch whose last read failed cannot tell: no rejoin."""
    s = w.settings
    if not watch.current:
        w.log.info("standby: lease topic not read; not rejoining")
        return False
    hb = watch.leader
    if not lease_orphaned(hb, int(w.clock() * 1000), s.ha.session_timeout_s):
        return False
    w.log.warning(
        "standby: nobody holds the lease; rejoining the agents' group",
        group=s.ha.group_id,
        lease_topic=s.ha.lease_topic,
        waited_s=waited_s,
        last_heartbeat=None if hb is None else hb.agent_id,
    )
    w.metrics.inc(metric.LEASE_REJOINS_TOTAL)
    lease.rejoin()
    return True
