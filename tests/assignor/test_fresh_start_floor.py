"""cooperative-sticky's settling skips its fresh-start candidate once a stable candidate lands on a floor.

Issue 29: the fresh start (:meth:`general_settle._Round.fresh_start`) is one or two runs of the
general path, kept only when it lands strictly more locally than every stable candidate so far.  When
the best of those already lands on a floor no assignment goes below (the partitions none of whose
subscribers is local to them, or the least count an exact candidate of the settling proved), those runs
cannot win and are not run.  The oracles: the definition of cross-rack per member and partition
(``Prepared.cross``) for the floor, and the settling with the skip switched off for the plans.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.bench_exact_candidate import cliff, small_unequal
from bench.bench_highs_gate import FORMER_LIMIT
from rackplan.assignor.consumer.rack_optimal import milp
from rackplan.assignor.consumer.sticky import assign, general_exact, general_settle, settle_general
from rackplan.assignor.consumer.sticky.common import Prepared, cross_count, prepare
from rackplan.assignor.consumer.sticky.general_settle import unavoidable_cross
from rackplan.assignor.model import Cluster, ConsumerGroup, ConsumerPlan
from tests.assignor.test_exact_least_cross import least_cross_by_highs
from tests.assignor.test_keep_first_floor import saved_runs
from tests.assignor.test_sticky_work import joining


def _unavoidable_by_definition(cluster: Cluster, group: ConsumerGroup) -> int:
    """Partitions that every subscriber of their topic reads across racks (``Prepared.cross``, one by one)."""
    prep = prepare(cluster, group)
    return sum(
        all(prep.cross(prep.member_class[m], mask) for m in prep.topic_members[prep.part_topic[gp]])
        for gp, mask in enumerate(prep.part_mask)
    )


def _with_skip(cluster: Cluster, group: ConsumerGroup, skip: bool) -> tuple[ConsumerPlan, int]:
    """The plan, and the runs its settling spent, with the fresh-start skip on or off."""
    real = general_settle._Round.least_reached
    if not skip:
        general_settle._Round.least_reached = lambda self: False  # type: ignore[method-assign]
    try:
        return assign(cluster, group), settle_general(prepare(cluster, group)).follow_ups
    finally:
        general_settle._Round.least_reached = real  # type: ignore[method-assign]


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), n_members=st.integers(3, 24), n_parts=st.integers(10, 150))
def test_the_unavoidable_count_is_the_definitions_and_no_plan_goes_below_it(
    seed: int, n_members: int, n_parts: int
) -> None:
    cluster, group = joining(seed, n_members, n_parts)
    prep = prepare(cluster, group)
    assert unavoidable_cross(prep) == _unavoidable_by_definition(cluster, group)
    holder = settle_general(prep).holder
    assert unavoidable_cross(prep) <= cross_count(prep, holder)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), n_members=st.integers(6, 24), n_parts=st.integers(30, 150))
def test_the_skip_changes_no_plan_on_seven_rack_groups(seed: int, n_members: int, n_parts: int) -> None:
    cluster, group = joining(seed, n_members, n_parts)
    plan, runs = _with_skip(cluster, group, skip=True)
    plan_all, runs_all = _with_skip(cluster, group, skip=False)
    assert (plan.assignment, plan.revoked) == (plan_all.assignment, plan_all.revoked)
    assert runs <= runs_all


#: Seven-rack groups (seed, members, partitions) whose fresh-start candidate wins: the plan differs without
#: it, so a skip taken where that candidate could still win changes their plans.
FRESH_WINS = [(24, 23, 148), (31, 23, 148)]


def test_the_skip_saves_runs_and_changes_no_plan_where_the_fresh_start_wins_or_not() -> None:
    groups = [*cliff(6), *small_unequal(2), *(joining(*shape) for shape in FRESH_WINS)]
    assert saved_runs(
        groups, lambda c, g: _with_skip(c, g, skip=True), lambda c, g: _with_skip(c, g, skip=False)
    )


def test_the_fresh_start_wins_on_those_groups() -> None:
    """What makes the test above able to fail: on these groups the fresh start changes the plan."""
    real = general_settle._Round.fresh_start
    for shape in FRESH_WINS:
        cluster, group = joining(*shape)
        plan = assign(cluster, group)
        general_settle._Round.fresh_start = lambda self: None  # type: ignore[method-assign]
        try:
            without = assign(cluster, group)
        finally:
            general_settle._Round.fresh_start = real  # type: ignore[method-assign]
        assert (plan.assignment, plan.revoked) != (without.assignment, without.revoked)


def test_a_least_count_the_skip_reads_is_the_components_optimum(monkeypatch: pytest.MonkeyPatch) -> None:
    """What :func:`general_exact.least_known` hands the skip is the fewest cross-rack partitions of any
    balanced assignment of the group's component: HiGHS's proven optimum with no owners (moves then cost
    nothing).  On the 9 x 96 family with the exact candidate's size limit lifted to its former value, so
    that candidates build models and record counts."""
    monkeypatch.setattr(general_exact, "EXACT_NONZEROS", FORMER_LIMIT)
    read: list[tuple[milp.Component, list[dict[int, int]], int]] = []
    real = general_exact.least_known

    def watched(prep: Prepared, holder: list[int], least_cross: dict[Hashable, int]) -> int | None:
        got = real(prep, holder, least_cross)
        if got is not None:
            comp, _, counts = general_exact._component(prep, holder)
            read.append((comp, counts, got))
        return got

    monkeypatch.setattr(general_settle, "least_known", watched)
    for cluster, group in itertools.islice(small_unequal(3), 0, 9):
        assign(cluster, group)
    assert read
    for comp, counts, least in read:
        assert least == least_cross_by_highs(comp, counts)
