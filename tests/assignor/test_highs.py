"""The shared integer-program runner (``flow.highs``) and the budget of the several-key standby program."""

from __future__ import annotations

import doctest
import os
from pathlib import Path

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


def _every_kind() -> highs.Program:
    """A program with every row kind (equal, at most, at least, ranged) and every bound kind."""
    p = highs.Program()
    a = p.column(3, 0, 1, True)
    b = p.column(2.5, -p.inf, 7, False)
    c = p.column(0, -2, p.inf, True)
    d = p.column(-1, 0.5, 4.25, False)
    p.row(1, 1, [(a, 1.0), (c, 1.0)])
    p.row(-p.inf, 6, [(b, 1.0), (d, 2.0)])
    p.row(-3, p.inf, [(b, 1.0), (c, -1.0)])
    p.row(0.5, 9.75, [(a, 4.0), (d, 1.0), (c, 0.5)])
    return p


def test_the_program_highs_reads_from_the_mps_is_the_program() -> None:
    """Every cost, bound, row side, coefficient and integrality as built, in the same order."""
    p = _every_kind()
    core = highs.solver_module()
    h = core._Highs()
    h.setOptionValue("output_flag", False)
    assert p._read_into(h, core)
    lp = h.getLp()
    inf = core.kHighsInf
    assert list(lp.col_cost_) == p.cost
    assert list(lp.col_lower_) == [max(x, -inf) for x in p.lower]
    assert list(lp.col_upper_) == [min(x, inf) for x in p.upper]
    assert list(lp.row_lower_) == [max(x, -inf) for x in p.row_lo]
    assert list(lp.row_upper_) == [min(x, inf) for x in p.row_hi]
    kinds = [int(k) for k in lp.integrality_]
    assert [j for j, k in enumerate(kinds) if k == int(core.HighsVarType.kInteger)] == p.integer
    matrix = lp.a_matrix_
    entries: set[tuple[int, int, float]] = set()
    if matrix.format_ == core.MatrixFormat.kColwise:
        for j in range(lp.num_col_):
            for e in range(matrix.start_[j], matrix.start_[j + 1]):
                entries.add((int(matrix.index_[e]), j, float(matrix.value_[e])))
    else:
        for i in range(lp.num_row_):
            for e in range(matrix.start_[i], matrix.start_[i + 1]):
                entries.add((i, int(matrix.index_[e]), float(matrix.value_[e])))
    ends = [*p.starts[1:], len(p.index)]
    built = {
        (i, j, v)
        for i, (s, t) in enumerate(zip(p.starts, ends, strict=True))
        for j, v in zip(p.index[s:t], p.value[s:t], strict=True)
    }
    assert entries == built


def test_a_solve_reads_the_mps_and_never_passes_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    passed: list[int] = []
    real = highs.Program._pass_into

    def counted(self: highs.Program, h: object, core: object) -> None:
        passed.append(1)
        real(self, h, core)  # type: ignore[arg-type]

    monkeypatch.setattr(highs.Program, "_pass_into", counted)
    r = _every_kind().solve([1.0, 0.0, 0.0, 0.5], max_nodes=100)
    assert r.optimal and passed == []


def test_without_a_temporary_directory_the_arrays_give_the_same_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    by_file = _every_kind().solve([1.0, 0.0, 0.0, 0.5], max_nodes=100)

    def no_directory(*args: object, **kwargs: object) -> object:
        raise OSError("read-only file system")

    passed: list[int] = []
    real = highs.Program._pass_into

    def counted(self: highs.Program, h: object, core: object) -> None:
        passed.append(1)
        real(self, h, core)  # type: ignore[arg-type]

    monkeypatch.setattr(highs, "private_directory", no_directory)
    monkeypatch.setattr(highs.Program, "_pass_into", counted)
    assert _every_kind().solve([1.0, 0.0, 0.0, 0.5], max_nodes=100) == by_file
    assert passed == [1]


def test_the_program_file_lives_in_a_private_directory_removed_after_the_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Under ``TMPDIR``: a directory of mode 0700 while HiGHS reads the file, nothing left after."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    seen: list[tuple[str, int, list[str]]] = []
    real = highs.private_directory

    def watched() -> str:
        place = real()
        seen.append((os.path.dirname(place), os.stat(place).st_mode & 0o777, os.listdir(place)))
        return place

    monkeypatch.setattr(highs, "private_directory", watched)
    assert _every_kind().solve([1.0, 0.0, 0.0, 0.5], max_nodes=100).optimal
    assert seen == [(str(tmp_path), 0o700, [])]
    assert list(tmp_path.iterdir()) == []


def test_private_directories_are_new_each_time(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    a, b = highs.private_directory(), highs.private_directory()
    assert a != b and {os.path.dirname(a), os.path.dirname(b)} == {str(tmp_path)}
    os.rmdir(a)
    os.rmdir(b)


_AFTER_A_CALLERS_PROGRAM = """
import highspy
from rackplan.assignor.flow.highs import Program

mine = highspy.Highs()
mine.silent()
x = mine.addBinary()
mine.minimize(x)  # the caller's own program, on highspy's default threads: it sizes the scheduler
p = Program()
a, b = p.column(3, 0, 1, True), p.column(2, 0, 1, True)
p.row(1, p.inf, [(a, 1.0), (b, 1.0)])
r = p.solve([1.0, 0.0], max_nodes=10)
mine.minimize(x)
print(r.optimal, [round(v) for v in r.values], mine.getModelStatus() == highspy.HighsModelStatus.kOptimal)
"""


def test_a_program_solves_after_the_callers_own_highs_program_in_the_same_process() -> None:
    """A library user who ran HiGHS first (default threads) made every run of ours fail ("HiGHS ended
    with Not Set": one scheduler per process, ours asks one thread); found by an adversarial hunt.  In a
    child, so that the scheduler it sizes is its own; the caller's program still solves afterwards."""
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-c", _AFTER_A_CALLERS_PROGRAM], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split("\n")[-2] == "True [0, 1] True", run.stdout


def test_a_start_the_program_refuses_comes_back_rather_than_a_worse_incumbent() -> None:
    """ "At worst ``start``": HiGHS drops a start that breaks a row of the program (here the symmetry row
    ``a >= b``, which the caller's equally good start breaks) and answers with its own; when that is
    worse, the start comes back, unproven and without a bound (rack-optimal took the worse answer for
    an internal error before)."""
    p = highs.Program()
    a, b = p.column(0, 0, 5, True), p.column(0, 0, 5, True)
    c = p.column(1, 0, 5, True)  # what the program's own answers pay
    p.row(5, 5, [(a, 1.0), (b, 1.0), (c, 1.0)])
    p.row(0, p.inf, [(a, 1.0), (b, -1.0)])  # a >= b
    p.row(-p.inf, 2, [(a, 1.0)])  # so a + b <= 4: c >= 1 in every answer the program allows
    start = [1.0, 4.0, 0.0]  # breaks a >= b, costs 0
    r = p.solve(start, max_nodes=1_000)
    assert (r.values, r.optimal, r.bound) == (start, False, None)
