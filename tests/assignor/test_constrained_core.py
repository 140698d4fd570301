"""cooperative-sticky's equal path compiled (``assignor/flow/_constrained.c``, issue 29) against its oracle.

:func:`rackplan.assignor.consumer.sticky.constrained.assign_constrained` (the Python) is the oracle: on
equal groups with drawn previous owners, over-full members (one member owning most partitions) among
them, the core answers, and its holder is the Python's partition for partition.  What the core cannot
take as the Python does it hands back (None) and the Python answers: checked on a racked class whose
bit is not one bit and on values of other types.  Settling's whole search compiled
(``constrained_settle``) lands on the Python search's holder, fixed point and rounds, capped or not,
contested partitions among the claims.  Whole plans are the same with the core and without.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rackplan.assignor.consumer.sticky import constrained, settling
from rackplan.assignor.consumer.sticky.common import Prepared, prepare
from rackplan.assignor.consumer.sticky.constrained import keeps_itself
from rackplan.assignor.consumer.sticky.plan import assign
from rackplan.assignor.consumer.sticky.settling import holders
from rackplan.assignor.model import Cluster, ConsumerGroup, Member
from rackplan.assignor.record import replace
from tests.strategies import clusters, consumer_groups

if TYPE_CHECKING:
    from rackplan.assignor.flow.compiled import Core

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def equal_preps(draw: st.DrawFn) -> Prepared:
    """An equal group's integer view with drawn owners: any member or none, or mostly one member."""
    cluster = draw(clusters(max_partitions=draw(st.sampled_from([6, 30]))))
    group = draw(consumer_groups(cluster, "cooperative-sticky", max_members=8, equal_subscriptions=True))
    assume(group.members)
    prep = prepare(cluster, group)
    n, size = len(prep.member_ids), prep.num_partitions
    heavy = draw(st.integers(0, n - 1))
    who = st.one_of(st.integers(-1, n - 1), st.just(heavy), st.just(heavy))
    owner = draw(st.lists(who, min_size=size, max_size=size))
    return replace(prep, owner=owner, claim_owner=owner if draw(st.booleans()) else prep.claim_owner)


@SETTINGS
@given(equal_preps())
def test_the_core_answers_every_equal_group_as_the_python_does(core: Core, prep: Prepared) -> None:
    got = core.constrained(prep.part_mask, prep.owner, prep.member_class, prep.classes)
    assert got is not None
    assert got == holders(constrained.assign_constrained(prep), prep.num_partitions)


@SETTINGS
@given(equal_preps(), st.data(), st.sampled_from([None, 0, 1]))
def test_the_compiled_search_settles_as_the_python_search_does(
    core: Core, prep: Prepared, data: st.DataObject, cap: int | None
) -> None:
    size = prep.num_partitions
    contested = data.draw(st.lists(st.integers(0, size - 1), unique=True, max_size=3)) if size else []
    with pytest.MonkeyPatch.context() as m:
        if cap is not None:
            m.setattr(settling, "MAX_FOLLOW_UPS", cap)
        python = settling.settle(prep, settling.unproven, contested, keeps_itself)
        compiled = settling.settle(
            prep, settling.unproven, contested, keeps_itself, constrained.compiled_search
        )
        claim = [settling.CONTESTED if gp in contested else c for gp, c in enumerate(prep.claim_owner)]
        assert (
            core.constrained_settle(
                prep.part_mask, prep.owner, claim, prep.member_class, prep.classes, settling.MAX_FOLLOW_UPS
            )
            is not None
        )
    assert compiled == python


def test_what_the_core_cannot_take_as_the_python_does_it_hands_back(core: Core) -> None:
    """A racked class with two bits (the Python's cost rows read one), a float mask, an owner out of
    range: None, and nothing raised."""
    masks, owner, cls = [1, 2, 3], [-1, 0, -1], [0, 1]
    assert core.constrained(masks, owner, cls, [(True, 1), (True, 2)]) is not None
    assert core.constrained(masks, owner, cls, [(True, 3), (True, 2)]) is None
    assert core.constrained([1, 2.0, 3], owner, cls, [(True, 1), (True, 2)]) is None  # type: ignore[list-item]
    assert core.constrained(masks, [-1, 2, -1], cls, [(True, 1), (True, 2)]) is None
    assert core.constrained(masks, owner, [], []) is None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_plans_are_the_same_with_the_core_and_without(core: Core, data: st.DataObject) -> None:
    cluster = data.draw(clusters(max_partitions=12))
    group = data.draw(consumer_groups(cluster, "cooperative-sticky", max_members=6, equal_subscriptions=True))
    with_core = assign(cluster, group)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(constrained, "CORE", None)
        assert assign(cluster, group) == with_core


def test_an_equal_group_takes_the_compiled_path(core: Core, monkeypatch: pytest.MonkeyPatch) -> None:
    """The path settling runs is the core's (not the Python's fallback) on a real group, and its plan is
    balanced and rack-local where it can be."""
    cluster = Cluster(broker_racks={1: "a", 2: "b"}, topics={"t": ((1, 2), (2,), (1,), (2, 1))})
    group = ConsumerGroup("g", "cooperative-sticky", (Member("x", "a", ("t",)), Member("y", "b", ("t",))))
    calls: list[int] = []

    def python(prep: Prepared) -> list[list[int]]:
        calls.append(1)
        raise AssertionError("the Python path ran")

    monkeypatch.setattr(constrained, "assign_constrained", python)
    plan = assign(cluster, group)
    assert not calls
    rack = {"x": 1, "y": 2}  # each member's rack holds one broker
    assert sorted(len(parts) for parts in plan.assignment.values()) == [2, 2]
    assert all(rack[m] in cluster.topics["t"][p] for m, parts in plan.assignment.items() for _, p in parts)
