"""A standby that waits long for a lease nobody holds rejoins the agents' group.

Why: librdkafka's group leader can give a just-created lease topic's partition
to no member (its assignment-time metadata request answered
UNKNOWN_TOPIC_OR_PART) and never rebalances by itself, since the partition
count it watches does not change: every agent would stand by for good (seen
on the real cluster, CI 1 run in 4; :meth:`.lease.Lease.rejoin`).
"""

from __future__ import annotations

from typing import Any

from ..kafka.exceptions import TopicReadError
from ..metrics import declared as metric
from ..state.term import Wiring
from .lease import Lease, last_heartbeat, lease_orphaned

__all__ = ["lease_rejoin_after_s", "rejoin_if_orphaned"]


def lease_rejoin_after_s(session_timeout_s: float) -> float:
    """How long a standby waits for the lease before it checks whether anybody holds it (and rejoins when
    nobody does): two session timeouts, at least 10 s, so that a dead holder's eviction comes first."""
    return max(2 * session_timeout_s, 10.0)


def rejoin_if_orphaned(w: Wiring, lease: Lease, client_config: dict[str, Any], waited_s: int) -> bool:
    """Rejoin when nobody can be holding the lease (:func:`.lease.lease_orphaned`); True when it did."""
    from confluent_kafka import KafkaException

    s = w.settings
    try:
        hb = last_heartbeat(client_config, s.ha.lease_topic, s.io_timeout_s, w.log, secret=w.secret)
    except (TopicReadError, KafkaException) as e:  # cannot tell: a rejoin would not read it either
        w.log.info("standby: lease topic not read; not rejoining", error=str(e))
        return False
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
