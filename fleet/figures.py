"""A unit's locality figures: which (consumer, partition) pairs cross racks, their bytes and what they cost.

Kept apart from :mod:`.units` (which runs the assignors): this module only judges
an assignment, in both fetch modes, on the model its plan was computed from.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rackplan.agent.cluster.archive import ClusterState
from rackplan.agent.cluster.metadata import NO_LEADER
from rackplan.agent.traffic.pricing import BYTES_PER_GB, SECONDS_PER_MONTH
from rackplan.assignor import Cluster, is_cross_rack, leader_cross_rack

DEFAULT_PRICE_PER_GB = 0.02


class Judge:
    """Cross-rack tests of one (rack, partition) pair, in both fetch modes, and its traffic.

    The judgements are the contract's (:mod:`rackplan.assignor.contract`), on
    the model the unit's plan was computed from.
    """

    def __init__(self, state: ClusterState, cluster: Cluster) -> None:
        self.rack_of = state.broker_racks()
        self.state = state
        self.cluster = cluster

    def nearest(self, rack: str | None, t: str, p: int) -> bool:
        """The contract: the member has a rack and no replica is in it (unknown racks: never)."""
        return is_cross_rack(rack, self.cluster.member_bit(rack), self.cluster.masks[t][p])

    def leader(self, rack: str | None, t: str, p: int) -> bool:
        """Leader-only fetching: cross when the leader's (known) rack is another one."""
        leader = self.state.leaders[t][p]
        return leader_cross_rack(rack, None if leader == NO_LEADER else self.rack_of.get(leader))

    def traffic(self, t: str, p: int) -> float | None:
        rates = self.state.traffic.get(t)
        return None if rates is None else rates[p]


class Figures:
    """Accumulates pairs (consumer, partition) into the unit's locality figures.

    ``group_racks``: the racks of every member (Streams: client) of the group.  A pair
    whose partition is cross-rack from *each* of them is cross-rack under any assignment
    of the group: its bytes are the floor no assignor goes below (``unfixable_*``, the
    agent's :func:`~rackplan.agent.planning.fixable.floor_bytes` rule, e.g. rf 1
    partitions in a rack with no member).
    """

    def __init__(self, judge: Judge, group_racks: Iterable[str | None] = ()) -> None:
        self.judge = judge
        self.group_racks = sorted(set(group_racks), key=lambda r: (r is None, r or ""))
        self.pairs = self.with_traffic = self.cross_nearest = self.cross_leader = 0
        self.bytes = self.bytes_nearest = self.bytes_leader = 0.0
        self.unfixable_nearest = self.unfixable_leader = 0.0

    def add(self, rack: str | None, t: str, p: int) -> None:
        near, lead = self.judge.nearest(rack, t, p), self.judge.leader(rack, t, p)
        rate = self.judge.traffic(t, p)
        self.pairs += 1
        self.cross_nearest += near
        self.cross_leader += lead
        if rate is not None:
            self.with_traffic += 1
            self.bytes += rate
            self.bytes_nearest += rate if near else 0.0
            self.bytes_leader += rate if lead else 0.0
            if near and all(self.judge.nearest(r, t, p) for r in self.group_racks):
                self.unfixable_nearest += rate
            if lead and all(self.judge.leader(r, t, p) for r in self.group_racks):
                self.unfixable_leader += rate

    def columns(self, price_per_gb: float) -> dict[str, Any]:
        def cost(bps: float) -> float:
            return bps * SECONDS_PER_MONTH / BYTES_PER_GB * price_per_gb

        return {
            "pairs": self.pairs,
            "pairs_with_traffic": self.with_traffic,
            "bytes_per_s": self.bytes,
            "cross_nearest": self.cross_nearest,
            "cross_leader": self.cross_leader,
            "cross_bytes_nearest": self.bytes_nearest,
            "cross_bytes_leader": self.bytes_leader,
            "cost_nearest_usd_month": cost(self.bytes_nearest),
            "cost_leader_usd_month": cost(self.bytes_leader),
            "unfixable_bytes_nearest": self.unfixable_nearest,
            "unfixable_bytes_leader": self.unfixable_leader,
            "unfixable_nearest_usd_month": cost(self.unfixable_nearest),
            "unfixable_leader_usd_month": cost(self.unfixable_leader),
        }
