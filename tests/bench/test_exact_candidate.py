"""bench/bench_exact_candidate.py: the tally counts every candidate once, by its real outcome, and leaves
the assignor as it found it."""

from __future__ import annotations

from typing import Any

import pytest

from bench.bench_exact_candidate import full_root, measure, row, small_unequal
from rackplan.assignor.consumer.sticky import general_exact, general_settle


def test_every_candidate_is_counted_once_by_its_outcome_and_the_functions_are_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[bool] = []
    real = vars(general_settle)["exact_candidate"]

    def counted(*args: Any) -> Any:
        got = real(*args)
        calls.append(got is not None)
        return got

    groups = list(small_unequal(1))  # converging them runs candidates too: not counted
    monkeypatch.setattr(general_settle, "exact_candidate", counted)
    before = (
        vars(general_exact)["solve_small"],
        vars(general_exact)["solve"],
        vars(general_settle)["exact_candidate"],
    )
    tally, total = measure(groups)
    assert (
        vars(general_exact)["solve_small"],
        vars(general_exact)["solve"],
        vars(general_settle)["exact_candidate"],
    ) == before
    assert sum(tally.outcomes.values()) == len(calls) > 0
    better = sum(n for kind, n in tally.outcomes.items() if kind.endswith(": better"))
    assert better == sum(calls)
    highs = tally.outcomes["HiGHS: better"] + tally.outcomes["HiGHS: not better"]
    assert highs > 0  # the family's point
    assert 0 <= tally.proven <= highs
    assert total >= sum(tally.cpu.values()) > 0
    assert row("x", len(groups), tally, total).startswith(
        f"| x | {len(groups)} | {tally.outcomes['not run']} |"
    )


@pytest.mark.parametrize("full", [False, True])
def test_full_root_runs_highs_as_before_its_light_root(monkeypatch: pytest.MonkeyPatch, full: bool) -> None:
    """The exact candidate asks HiGHS for the light root; after ``full_root()`` (``--full-root``) every call,
    the groups' convergence included, gets the full one, until undone."""
    asked: list[bool] = []
    real = vars(general_exact)["solve"]

    def recorded(*args: Any, light_root: bool = False) -> Any:
        asked.append(light_root)
        return real(*args, light_root=light_root)

    monkeypatch.setattr(general_exact, "solve", recorded)
    undo = full_root() if full else (lambda: None)
    measure(list(small_unequal(1)))
    undo()
    assert asked and set(asked) == {not full}
    assert vars(general_exact)["solve"] is recorded
