"""The exact candidate's least cross-rack counts, shared by one settling (general_exact, ``least_cross``).

What a recorded count is: the fewest cross-rack partitions of any balanced assignment of the
component, whoever owns what; so a later candidate whose start reaches it with no move is optimal and
the solver is not run.  The oracle is the solver itself, with the memory off: every plan the same.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable
from typing import Any

import pytest

from bench.bench_exact_candidate import small_unequal
from bench.bench_highs_gate import FORMER_LIMIT
from rackplan.assignor.consumer.rack_optimal import milp
from rackplan.assignor.consumer.sticky import assign, general_exact, general_settle
from rackplan.assignor.model import Cluster, ConsumerGroup


@pytest.fixture(autouse=True)
def highs_on_these_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """The family's models are above the exact candidate's size limit (``EXACT_NONZEROS``): lifted to its
    value before session 21 here, since what these tests check is the memory of what a solver proved."""
    monkeypatch.setattr(general_exact, "EXACT_NONZEROS", FORMER_LIMIT)


def _groups() -> list[tuple[Cluster, ConsumerGroup]]:
    """Three of bench_vs_kafka's 9 x 96 family; the last has a follow-up round the memory answers."""
    return list(itertools.islice(small_unequal(3), 4, 7))


def test_the_memory_changes_no_plan_and_saves_solver_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    groups = _groups()
    runs: list[int] = []
    real_solve = vars(general_exact)["solve"]

    def counted(*args: Any, **options: Any) -> Any:
        runs.append(1)
        return real_solve(*args, **options)

    monkeypatch.setattr(general_exact, "solve", counted)
    remembering = [assign(c, g) for c, g in groups]
    with_memory = len(runs)

    real_exact = vars(general_settle)["exact_candidate"]

    def forgetful(prep: Any, start: list[int], spend: Any, least: Any = None) -> Any:
        return real_exact(prep, start, spend, None)

    monkeypatch.setattr(general_settle, "exact_candidate", forgetful)
    runs.clear()
    forgetting = [assign(c, g) for c, g in groups]
    assert forgetting == remembering
    assert with_memory < len(runs)  # this family has follow-up rounds the memory answers


def test_a_recorded_count_is_the_least_cross_rack_count_of_any_balanced_assignment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each count recorded equals HiGHS's proven optimum of the same component with no owners (moves
    then cost nothing, so the optimum is the least cross-rack count itself)."""
    recorded: list[tuple[milp.Component, list[dict[int, int]], int]] = []
    real_exact = vars(general_settle)["exact_candidate"]
    real_small = vars(general_exact)["solve_small"]
    asked: list[tuple[milp.Component, list[dict[int, int]]]] = []

    def seen_small(comp: milp.Component, start: list[dict[int, int]]) -> Any:
        asked.append((comp, [dict(c) for c in start]))
        return real_small(comp, start)

    def watched(prep: Any, start: list[int], spend: Any, least: dict[Hashable, int] | None = None) -> Any:
        before = dict(least or {})
        asked.clear()
        got = real_exact(prep, start, spend, least)
        for key, value in (least or {}).items():
            if key not in before:
                recorded.append((*asked[-1], value))
        return got

    monkeypatch.setattr(general_exact, "solve_small", seen_small)
    monkeypatch.setattr(general_settle, "exact_candidate", watched)
    for cluster, group in _groups():
        assign(cluster, group)
    assert recorded
    for comp, start, least in recorded:
        assert least_cross_by_highs(comp, start) == least


def least_cross_by_highs(comp: milp.Component, start: list[dict[int, int]]) -> int:
    """The fewest cross-rack partitions of any balanced assignment of ``comp``: HiGHS's proven optimum of
    the same component with no owners (moves then cost nothing), started from the balanced ``start``."""
    unowned = milp.Component(
        comp.class_size, comp.class_group, comp.group_members, comp.cross, [{} for _ in comp.cross]
    )
    best = milp.solve(unowned, start, budget=10**9)
    assert best.optimal
    return sum(comp.cross[m][k] * v for m, per in enumerate(best.counts) for k, v in per.items())
