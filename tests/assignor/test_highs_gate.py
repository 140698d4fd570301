"""HiGHS's size gate on the cooperative-sticky exact candidate (``general_exact.HIGHS_NONZEROS``), in counts.

Issue 29: HiGHS's root node is not bounded by its node budget, and on bench_exact_candidate's 9 x 96
family one program of 450 to 580 estimated nonzeros cost up to 0.8 s of CPU; a settling builds
several, and 23 of the family's 120 groups took more than 1 s (``bench/bench_highs_gate.py``).  The
enumeration (``small_exact``, counted work) still runs on every model up to ``EXACT_NONZEROS``; only
when it runs out does the model go to HiGHS, and only at most ``HIGHS_NONZEROS``.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.bench_exact_candidate import small_unequal
from rackplan.assignor.consumer.rack_optimal.milp import Component
from rackplan.assignor.consumer.sticky import assign, general_exact
from rackplan.assignor.consumer.sticky.general_exact import (
    EXACT_NONZEROS,
    HIGHS_NONZEROS,
    estimated_nonzeros,
)


def test_the_gate_is_below_the_enumerations_limit() -> None:
    assert 0 < HIGHS_NONZEROS < EXACT_NONZEROS


def test_highs_is_handed_no_model_above_the_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    """On six of the family's groups: every model HiGHS gets is within the gate, some got one, and the
    enumeration ran out on larger models that HiGHS was then not handed."""
    handed: list[int] = []
    ran_out: list[int] = []
    real_solve, real_small = vars(general_exact)["solve"], vars(general_exact)["solve_small"]

    def solve(comp: Component, counts: Any, **options: Any) -> Any:
        handed.append(estimated_nonzeros(comp))
        return real_solve(comp, counts, **options)

    def small(comp: Component, counts: Any) -> Any:
        got = real_small(comp, counts)
        if got is None:
            ran_out.append(estimated_nonzeros(comp))
        return got

    groups = list(small_unequal(2))
    monkeypatch.setattr(general_exact, "solve", solve)
    monkeypatch.setattr(general_exact, "solve_small", small)
    for cluster, group in groups:
        assign(cluster, group)
    assert handed, "no group of these reached HiGHS: the test no longer exercises it"
    assert max(handed) <= HIGHS_NONZEROS
    above = [n for n in ran_out if n > HIGHS_NONZEROS]
    assert above, "no enumeration ran out above the gate: the test no longer exercises it"
    assert len(handed) == len(ran_out) - len(
        above
    )  # each model the enumeration left went to HiGHS or was gated
