"""The cooperative-sticky exact candidate's size limit (``general_exact.EXACT_NONZEROS``), in counts.

Issue 29: HiGHS's root node is not bounded by its node budget, and on bench_exact_candidate's 9 x 96
family one program of 450 to 580 estimated nonzeros cost up to 0.9 s of CPU; a settling builds
several, and 19 to 22 of the family's 120 groups took more than 1 s (``bench/bench_highs_gate.py``), with
the limit at 600.  Above 350 the enumeration (``small_exact``) never answered on that family, so those
models only went to HiGHS.  The limit is now 350: no solver, neither the enumeration nor HiGHS, gets
a larger model.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.bench_exact_candidate import small_unequal
from rackplan.assignor.consumer.rack_optimal.milp import Component
from rackplan.assignor.consumer.sticky import assign, general_exact
from rackplan.assignor.consumer.sticky.common import Prepared, prepare
from rackplan.assignor.consumer.sticky.general_exact import EXACT_NONZEROS, estimated_nonzeros, size_floor
from rackplan.assignor.contract import follow_up
from rackplan.assignor.model import ConsumerGroup
from tests.assignor.test_sticky_work import one_joins, seven_racks


def test_no_solver_is_handed_a_model_above_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """On six of the family's groups: every model the enumeration and HiGHS get is within the limit, both
    got some, and the candidates refused for size were not built (their estimate is above the limit)."""
    enumerated: list[int] = []
    handed: list[int] = []
    refused: list[int] = []
    real_solve, real_small = vars(general_exact)["solve"], vars(general_exact)["solve_small"]
    real_estimate, real_floor = estimated_nonzeros, size_floor

    def solve(comp: Component, counts: Any, **options: Any) -> Any:
        handed.append(estimated_nonzeros(comp))
        return real_solve(comp, counts, **options)

    def small(comp: Component, counts: Any) -> Any:
        enumerated.append(estimated_nonzeros(comp))
        return real_small(comp, counts)

    def estimate(comp: Component) -> int:
        size = real_estimate(comp)
        if size > EXACT_NONZEROS:
            refused.append(size)
        return size

    def floor(prep: Prepared) -> int:
        size = real_floor(prep)
        if size > EXACT_NONZEROS:
            refused.append(size)
        return size

    groups = list(small_unequal(2))
    monkeypatch.setattr(general_exact, "solve", solve)
    monkeypatch.setattr(general_exact, "solve_small", small)
    monkeypatch.setattr(general_exact, "estimated_nonzeros", estimate)
    monkeypatch.setattr(general_exact, "size_floor", floor)
    for cluster, group in groups:
        assign(cluster, group)
    assert handed, "no group of these reached HiGHS: the test no longer exercises it"
    assert refused, "no candidate was refused for size: the test no longer exercises the limit"
    assert max(enumerated) <= EXACT_NONZEROS and max(handed) <= EXACT_NONZEROS


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 10**6), st.integers(2, 14), st.integers(2, 90), st.booleans())
def test_the_size_floor_is_never_above_the_models_estimate(
    seed: int, members: int, parts: int, owned: bool
) -> None:
    """``size_floor`` refuses a candidate before its model is built, so it must never exceed the estimate
    of the model it stands for (else a model within the limit would be refused): seven-rack groups, fresh
    or owning what a first round handed out."""
    cluster, drawn = seven_racks(seed, members, parts)
    group = ConsumerGroup("g", "cooperative-sticky", tuple(drawn))
    if owned:
        group = follow_up(group, assign(cluster, group).assignment, 1)
    prep = prepare(cluster, group)
    start = [prep.topic_members[t][0] for t in prep.part_topic]  # the estimate does not read the counts
    comp = general_exact._component(prep, start)[0]
    assert size_floor(prep) <= estimated_nonzeros(comp)


def test_a_group_above_the_limit_by_its_floor_builds_no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cliff (23 x 148, seven racks, the last member joins) is far above the limit by its subscriptions
    alone: its settling refuses every exact candidate without building one, and plans as when it built them."""
    built: list[int] = []
    real = vars(general_exact)["_component"]

    def component(prep: Prepared, start: list[int]) -> Any:
        built.append(1)
        return real(prep, start)

    cluster, drawn = seven_racks(0, 23, 148)
    group = one_joins(cluster, drawn)
    assert size_floor(prepare(cluster, group)) > EXACT_NONZEROS
    monkeypatch.setattr(general_exact, "_component", component)
    plan = assign(cluster, group)
    assert built == []
    monkeypatch.setattr(
        general_exact, "size_floor", lambda prep: 0
    )  # the check off: models built, refused later
    again = assign(cluster, group)
    assert built and again.assignment == plan.assignment
