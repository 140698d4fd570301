"""bench/bench_exact_candidate.py: the tally counts every candidate once, by its real outcome, and leaves
the assignor as it found it."""

from __future__ import annotations

from typing import Any

import pytest

from bench.bench_exact_candidate import measure, row, small_unequal
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
    before = (vars(general_exact)["solve_small"], vars(general_settle)["exact_candidate"])
    tally, total = measure(groups)
    assert (vars(general_exact)["solve_small"], vars(general_settle)["exact_candidate"]) == before
    assert sum(tally.outcomes.values()) == len(calls) > 0
    better = sum(n for kind, n in tally.outcomes.items() if kind.endswith(": better"))
    assert better == sum(calls)
    assert tally.outcomes["HiGHS: better"] + tally.outcomes["HiGHS: not better"] > 0  # the family's point
    assert total >= sum(tally.cpu.values()) > 0
    assert row("x", len(groups), tally, total).startswith(
        f"| x | {len(groups)} | {tally.outcomes['not run']} |"
    )
