"""What a group's locality is judged on: live, the plan of record, or nothing (issue 24)."""

from __future__ import annotations

from rackplan.agent.groups.basis import LIVE, NONE, PLAN_OF_RECORD, live_decides, locality_basis
from rackplan.agent.groups.live import LiveLocality

KNOWN = LiveLocality(cross_rack=2, total=6)
ALL_UNKNOWN = LiveLocality(cross_rack=0, total=4, unknown_rack=4, unknown_members=("m1",))
SOME_UNKNOWN = LiveLocality(cross_rack=1, total=6, unknown_rack=2, unknown_members=("m1",))


def test_a_described_assignment_decides_unless_every_partition_is_of_unknown_rack() -> None:
    assert live_decides(KNOWN) and live_decides(SOME_UNKNOWN)
    assert not live_decides(ALL_UNKNOWN)
    assert live_decides(LiveLocality(0, 0)), "members holding nothing: nothing is read across racks"


def test_plan_followers_are_judged_live_when_described_else_on_their_plan() -> None:
    assert locality_basis(KNOWN, on_broker=False, has_plan=True) == LIVE
    assert locality_basis(SOME_UNKNOWN, on_broker=False, has_plan=False) == LIVE
    assert locality_basis(ALL_UNKNOWN, on_broker=False, has_plan=True) == PLAN_OF_RECORD
    assert locality_basis(None, on_broker=False, has_plan=True) == PLAN_OF_RECORD
    assert locality_basis(None, on_broker=False, has_plan=False) == NONE


def test_a_broker_assigned_group_has_no_plan_of_record_to_fall_back_on() -> None:
    assert locality_basis(KNOWN, on_broker=True, has_plan=True) == LIVE
    # A KIP-1071 Streams group: never described (librdkafka has no StreamsGroupDescribe), no plan published.
    assert locality_basis(None, on_broker=True, has_plan=True) == NONE
    assert locality_basis(ALL_UNKNOWN, on_broker=True, has_plan=False) == NONE
