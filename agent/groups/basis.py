"""On what a group's locality is judged this cycle: what its members hold now, its plan of record, or nothing.

The alert and ``/v1/groups`` judge a group on its live assignment when the brokers
describe it and a member of known rack holds partitions (:mod:`.live`); else on the
plan of record the agent published.  The two can differ (a member that does not
follow its plan; for a Streams app, the live figure counts the actives' source
partitions, the plan's also their changelogs), so an operator must see which one a
figure is: ``rackplan_locality_basis`` and ``locality_basis`` in ``/v1/groups``.

- ``live``: the live assignment (DescribeConsumerGroups: consumer groups, KIP-848
  groups, classic Streams apps);
- ``plan_of_record``: the published plan (not described this cycle, described with
  no member holding partitions, or no live member's rack known);
- ``none``: nothing is judged: no plan published and no live assignment seen, as for
  a KIP-1071 Streams group (``group.protocol=streams``), which librdkafka cannot
  describe (no StreamsGroupDescribe) and the broker assigns (only the locality the
  agent's plan would have, ``rackplan_achievable_cross_rack_partitions``, is shown).
"""

from __future__ import annotations

from .live import LiveLocality

LIVE = "live"
PLAN_OF_RECORD = "plan_of_record"
NONE = "none"
BASES = (LIVE, PLAN_OF_RECORD, NONE)


def live_decides(live: LiveLocality) -> bool:
    """A described assignment is judged live unless every partition in it is held by members of unknown rack:
    then there is nothing live to judge (never counted local) and the plan of record stands in."""
    return bool(live.judged.total or not live.unknown_rack)


def locality_basis(live: LiveLocality | None, *, on_broker: bool, has_plan: bool) -> str:
    """The basis of a group's locality this cycle (:data:`BASES`).

    ``live``: this cycle's live judgement (None: not described, or no member holds a
    partition); ``on_broker``: the broker assigns the group (no plan is published, so a
    broker-assigned group is judged only live, and only on partitions of known rack);
    ``has_plan``: a plan of record exists.
    """
    if on_broker:
        return LIVE if live is not None and live.judged.total else NONE
    if live is not None and live_decides(live):
        return LIVE
    return PLAN_OF_RECORD if has_plan else NONE
