"""The shared integer-program runner (``flow.highs``) and the budget of the several-key standby program."""

from __future__ import annotations

import doctest

import pytest

from rackplan.assignor.flow import highs, mincost
from rackplan.assignor.streams import standby_milp
from tests.assignor.test_streams_standby import _cross, _holders, _several_keys_case


@pytest.mark.parametrize("module", [mincost, highs], ids=lambda m: m.__name__)
def test_module_examples_run(module: object) -> None:
    """The examples in the flow modules' docstrings are what the code does."""
    failed, tried = doctest.testmod(module, verbose=False)  # type: ignore[arg-type]
    assert tried > 0 and failed == 0


def test_a_program_is_solved_to_its_optimum_from_a_feasible_start() -> None:
    """From a dear feasible start the cheapest feasible choice is found, proven, with its bound."""
    p = highs.Program()
    xs = [p.column(c, 0, 1, True) for c in (5, 4, 3, 3, 2)]
    p.row(2, 2, [(x, 1.0) for x in xs])  # choose two
    p.row(-p.inf, 1, [(xs[3], 1.0), (xs[4], 1.0)])  # not both of the cheapest
    start = [1.0, 1.0, 0.0, 0.0, 0.0]
    r = p.solve(start, max_nodes=10_000)
    assert r.optimal and [round(v) for v in r.values] == [0, 0, 1, 0, 1]
    assert r.bound is not None and abs(r.bound - 5) < 1e-6


def test_several_keys_over_the_size_limit_keep_the_heuristic(monkeypatch: pytest.MonkeyPatch) -> None:
    """A program above MAX_NONZEROS is not run: the placement is the heuristic's, so brute force can beat it
    (seed 141: 2 cross-rack standbys against 0); within the limit it is the optimum."""
    model, _, _, exact = _several_keys_case(141)
    monkeypatch.setattr(standby_milp, "MAX_NONZEROS", 0)
    model, _, _, capped = _several_keys_case(141)
    assert (_cross(model, _holders(capped)), _cross(model, _holders(exact))) == (2, 0)


def test_a_start_does_not_fool_the_solver_into_a_false_optimum() -> None:
    """Found by the neighbourhood property test: HiGHS 1.16 with its MIP presolve, given this start,
    answered "optimal, objective 0" and returned the start, whose objective is 2; the optimum is 1.

    Two members: ``m0`` subscribes to group 1 only, ``m1`` to groups 0 and 1; ``m1`` owns one partition
    of class 1 and reads classes 1 and 2 cross-rack.  The start keeps ``m1`` off its owned partition and
    on a cross-rack one; the optimum hands ``m1`` its own (cross-rack) partition back and class 2 to
    ``m0``: one cross-rack partition as before, one move fewer.
    """
    from rackplan.assignor.consumer.rack_optimal.milp import Component, plan_value, solve

    comp = Component(
        class_size=[1, 2, 1],
        class_group=[0, 1, 1],
        group_members=[[1], [0, 1]],
        cross=[{1: 0, 2: 0}, {0: 0, 1: 1, 2: 1}],
        owned=[{}, {1: 1}],
    )
    start = [{1: 2}, {0: 1, 2: 1}]
    found = solve(comp, start, budget=10**6)
    assert found.optimal
    assert found.counts == [{1: 1, 2: 1}, {0: 1, 1: 1}]
    assert (plan_value(comp, start, 2), plan_value(comp, found.counts, 2)) == (3, 2)
