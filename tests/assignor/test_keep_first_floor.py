"""The keep-first run's floor (``general.keep_first_floor``): a bound, and the runs it saves.

Issue 29: a round of the unequal path runs its search, and when that moves partitions, also the
*keep-first* run, returned instead when it is no worse in (cross-rack, moves).  The floor (cross-rack
partitions the keep-first run ends with at least) skips that run when it exceeds the search's count.
It counts the partitions pinned with their owners after fill and balance that are cross-rack, and the
others none of whose topic's subscribers is local to them.  The oracles: the keep-first run itself (the
floor never exceeds its count), and the settling with the pinned part alone (the same plans).
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.bench_exact_candidate import cliff, small_unequal
from rackplan.assignor.consumer.sticky import assign, general, general_settle
from rackplan.assignor.consumer.sticky.common import Prepared, cross_count, prepare
from rackplan.assignor.consumer.sticky.general import _General
from rackplan.assignor.consumer.sticky.general_balance import balance
from rackplan.assignor.consumer.sticky.settling import holders
from rackplan.assignor.model import Cluster, ConsumerGroup, ConsumerPlan
from rackplan.assignor.record import replace
from tests.assignor.test_sticky_work import joining


def _pinned_only(prep: Prepared) -> int:
    """The floor as it was before issue 29's session 36: the pinned cross-rack partitions alone."""
    state = _General(prep)
    state.fill()
    state.reindex()
    balance(state)
    crossk, cls, masks, owner = state.crossk, state.cls, state.masks, state.owner
    return sum(crossk[cls[h]][masks[gp]] for gp, h in enumerate(state.holder) if owner[gp] == h)


def _keep_first(cluster: Cluster, group: ConsumerGroup) -> tuple[Prepared, int, int]:
    """The keep-first run's model, its floor, and the cross-rack partitions the run itself ends with."""
    keep = replace(prepare(cluster, group), keep_owned=True)
    held = holders(general.assign_general(keep), keep.num_partitions)
    return keep, general.keep_first_floor(keep), cross_count(keep, held)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n_members=st.integers(3, 24), n_parts=st.integers(10, 150))
def test_the_floor_never_exceeds_the_keep_first_runs_cross_rack_count(
    seed: int, n_members: int, n_parts: int
) -> None:
    keep, floor, reached = _keep_first(*joining(seed, n_members, n_parts))
    assert _pinned_only(keep) <= floor <= reached


def test_the_floor_is_a_bound_on_the_small_families_and_above_the_pinned_part_on_some() -> None:
    lifted = 0
    for cluster, group in [*cliff(8), *small_unequal(2)]:
        keep, floor, reached = _keep_first(cluster, group)
        assert _pinned_only(keep) <= floor <= reached
        lifted += floor > _pinned_only(keep)
    assert lifted  # the unpinned part counts on these families


def _plan(cluster: Cluster, group: ConsumerGroup, pinned_only: bool) -> tuple[ConsumerPlan, int]:
    """The plan and the general path's runs, with the floor as it is or with its pinned part alone."""
    runs = 0
    run = general.assign_general_proven

    def counted(*args: object, **kwargs: object) -> object:
        nonlocal runs
        runs += 1
        return run(*args, **kwargs)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(general_settle, "assign_general_proven", counted)
        if pinned_only:
            patch.setattr(general_settle, "keep_first_floor", _pinned_only)
        return assign(cluster, group), runs


def test_the_floor_saves_runs_and_changes_no_plan() -> None:
    """On the cliff family and the 9 x 96 family, and on random seven-rack groups."""
    rng = random.Random(36)
    groups = [*cliff(8), *small_unequal(2)]
    groups += [joining(s, rng.randint(3, 24), rng.randint(10, 150)) for s in range(12)]
    assert saved_runs(
        groups, lambda c, g: _plan(c, g, pinned_only=False), lambda c, g: _plan(c, g, pinned_only=True)
    )


#: A settling's plan and the general path's runs it spent, for one group.
Planned = Callable[[Cluster, ConsumerGroup], tuple[ConsumerPlan, int]]


def saved_runs(groups: list[tuple[Cluster, ConsumerGroup]], skipping: Planned, running: Planned) -> int:
    """The runs a skip saves over ``groups`` (``skipping`` with it, ``running`` without), each group's
    plan asserted the same both ways and never more runs with the skip."""
    saved = 0
    for cluster, group in groups:
        plan, runs = skipping(cluster, group)
        full, runs_full = running(cluster, group)
        assert (plan.assignment, plan.revoked) == (full.assignment, full.revoked)
        assert runs <= runs_full
        saved += runs_full - runs
    return saved
