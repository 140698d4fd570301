"""Small mixed-integer programs solved exactly by HiGHS, within a work budget that is counted, never timed.

The rack assignors turn to an integer program where a rule is not a flow: the
contract's balance rule for unequal subscriptions (an either/or on counts,
:mod:`rackplan.assignor.consumer.rack_optimal.milp`) and the per-key spread of
Streams standbys with several tag keys (one covering constraint per key,
:mod:`rackplan.assignor.streams.standby_milp`).  Both need the same things from
the solver, gathered here: a model built column by column and row by row, a
feasible start handed over as the first incumbent, and a deterministic run
(single thread, fixed seed, no clock; the number of branch-and-bound nodes is
the budget), so that the same input gives the same plan on any machine.

Example: two binaries, at least one chosen, the cheaper one wins::

    >>> p = Program()
    >>> a, b = p.column(3, 0, 1, True), p.column(2, 0, 1, True)
    >>> p.row(1, p.inf, [(a, 1.0), (b, 1.0)])
    >>> r = p.solve([1.0, 0.0], max_nodes=10)
    >>> r.optimal, [round(v) for v in r.values]
    (True, [0, 1])
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import math
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from ..record import field, record


@record(frozen=True)
class Result:
    """The best solution found (the start when nothing better), whether it is proven optimal, and a
    proven lower bound on the objective (``None`` when HiGHS has none)."""

    values: list[float]
    optimal: bool
    bound: float | None


@record()
class Program:
    """A minimisation program: columns (cost, bounds, integrality) and rows ``lo <= terms <= hi``."""

    cost: list[float] = field(default_factory=list)
    lower: list[float] = field(default_factory=list)
    upper: list[float] = field(default_factory=list)
    integer: list[int] = field(default_factory=list)
    row_lo: list[float] = field(default_factory=list)
    row_hi: list[float] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    index: list[int] = field(default_factory=list)
    value: list[float] = field(default_factory=list)
    #: an unbounded side of a row
    inf: float = math.inf

    def column(self, cost: float, lo: float, hi: float, is_int: bool) -> int:
        """A new column; returns its index."""
        self.cost.append(cost)
        self.lower.append(lo)
        self.upper.append(hi)
        if is_int:
            self.integer.append(len(self.cost) - 1)
        return len(self.cost) - 1

    def row(self, lo: float, hi: float, terms: Sequence[tuple[int, float]]) -> None:
        """A new row ``lo <= sum(coefficient * column) <= hi``."""
        self.row_lo.append(lo)
        self.row_hi.append(hi)
        self.starts.append(len(self.index))
        for j, v in terms:
            self.index.append(j)
            self.value.append(v)

    @property
    def nonzeros(self) -> int:
        return len(self.index)

    def solve(self, start: Sequence[float], max_nodes: int, light_root: bool = False) -> Result:
        """Solve to a gap below one (costs are integers), from the feasible ``start``, within ``max_nodes``.

        ``light_root``: without the sub-MIP heuristics (RINS, RENS) and the restart after the root.  On
        the cooperative-sticky exact candidates (programs of at most 600 nonzeros) that takes half the
        CPU and proves more of them, and finds more better plans, within the same node budget
        (bench_exact_candidate against its ``--full-root``); on rack-optimal's larger programs RENS
        finds better plans (one cross-rack partition on bench_rack_optimal's 50 x 428 group), so they
        keep it (docs/performance.md, issue 29).

        A run that stops at the node limit returns the best solution it found
        (at worst ``start``) and HiGHS's dual bound, not proven optimal.

        HiGHS 1.16's MIP presolve, given a start, can answer "optimal" with a
        solution its own bound contradicts (``tests/assignor/test_highs.py``
        has one: "objective 0", and the start, of objective 2, returned; HiGHS
        issues 2900 and 3094 are of that kind).  Presolve stays on, since it
        proves many of these programs within their budget where a run without
        it does not, but such an answer is never taken: the program is solved
        again without presolve, and if that answer contradicts itself too it
        is kept unproven, without a bound.
        """
        result = self._run(start, max_nodes, presolve=True, light_root=light_root)
        if result.optimal and not self._consistent(result):
            result = self._run(start, max_nodes, presolve=False, light_root=light_root)
            if result.optimal and not self._consistent(result):
                result = Result(result.values, False, None)
        if self._value(result.values) > self._value(start) + 0.5:
            # HiGHS drops a start it finds infeasible (a row the caller's start breaks) and answers with
            # its own incumbent: never worse than ``start`` is this method's promise, so ``start`` it is,
            # unproven and without a bound (a proof that ``start`` beats was not about this start).
            result = Result(list(start), False, None)
        return result

    def _value(self, values: Sequence[float]) -> float:
        """The objective of a solution."""
        return sum(c * v for c, v in zip(self.cost, values, strict=True))

    def _consistent(self, result: Result) -> bool:
        """Whether a proven answer's objective lies within the gap of its bound (a gap below one)."""
        return result.bound is not None and self._value(result.values) <= result.bound + 0.5 + 1e-6

    def _run(self, start: Sequence[float], max_nodes: int, presolve: bool, light_root: bool) -> Result:
        """One HiGHS run (see :meth:`solve`)."""
        # Loaded here: only the cases the fast paths cannot settle need the solver.  The bare
        # ``_Highs`` class, because ``highspy.Highs()`` prints a banner on stdout (where the CLI
        # writes the plan) before any option can switch logging off.
        highspy = solver_module()
        inf = highspy.kHighsInf
        h = highspy._Highs()
        for option, v in (
            ("output_flag", False),  # first: any other call may print the banner
            ("threads", 1),
            ("random_seed", 0),
            ("mip_rel_gap", 0.0),
            ("mip_abs_gap", 0.5),  # the optimum is an integer: a gap below one proves it
            ("time_limit", inf),  # never a clock: the budget is counted in nodes
            ("mip_max_nodes", max_nodes),
            ("mip_heuristic_run_root_reduced_cost", False),  # costly, and found less than RENS did
            ("presolve", "on" if presolve else "off"),
            ("mip_heuristic_run_rins", not light_root),
            ("mip_heuristic_run_rens", not light_root),
            ("mip_allow_restart", not light_root),
        ):
            h.setOptionValue(option, v)
        if not self._read_into(h, highspy):
            self._pass_into(h, highspy)
        first = highspy.HighsSolution()
        first.col_value = [float(v) for v in start]
        first.value_valid = True
        h.setSolution(first)
        if h.run() == highspy.HighsStatus.kError and h.getModelStatus() == highspy.HighsModelStatus.kNotset:
            # Refused before it started: HiGHS keeps one task scheduler per process, sized by the first
            # run, and a run asking another thread count is refused.  A program of the caller's own
            # (highspy's defaults: every core) sized it; ours runs on one thread for determinism, so
            # the scheduler is made anew, once (the caller's next run sizes it again, as it did).
            type(h).resetGlobalScheduler(True)
            h.run()
        status = h.getModelStatus()
        info = h.getInfo()
        optimal = status == highspy.HighsModelStatus.kOptimal
        if optimal or info.primal_solution_status == highspy.SolutionStatus.kSolutionStatusFeasible:
            values = list(h.getSolution().col_value)
        elif status in (highspy.HighsModelStatus.kSolutionLimit, highspy.HighsModelStatus.kIterationLimit):
            values = list(start)
        else:
            raise AssertionError(f"HiGHS ended with {h.modelStatusToString(status)}")
        bound = info.mip_dual_bound
        return Result(values, optimal, bound if math.isfinite(bound) else None)

    def mps(self) -> str:
        """The program in free MPS, exactly (every number by ``repr``, every column's bounds written, each
        integer column between markers, every column named in the objective even at cost 0, so that
        HiGHS numbers the columns and rows as here)."""
        out = ["NAME rackplan", "ROWS", " N obj"]
        rhs: list[str] = []
        ranges: list[str] = []
        for i, (lo, hi) in enumerate(zip(self.row_lo, self.row_hi, strict=True)):
            if lo == hi:
                out.append(f" E r{i}")
                rhs.append(f" rhs r{i} {lo!r}")
            elif math.isinf(lo) and math.isinf(hi):
                raise ValueError(f"row {i} has no finite side")
            elif math.isinf(lo):
                out.append(f" L r{i}")
                rhs.append(f" rhs r{i} {hi!r}")
            else:
                out.append(f" G r{i}")
                rhs.append(f" rhs r{i} {lo!r}")
                if not math.isinf(hi):
                    ranges.append(f" rng r{i} {hi - lo!r}")
        by_col: list[list[tuple[int, float]]] = [[] for _ in self.cost]
        ends = [*self.starts[1:], len(self.index)]
        for i, (a, b) in enumerate(zip(self.starts, ends, strict=True)):
            for j, v in zip(self.index[a:b], self.value[a:b], strict=True):
                by_col[j].append((i, v))
        integer = set(self.integer)
        out.append("COLUMNS")
        for j, (cost, terms) in enumerate(zip(self.cost, by_col, strict=True)):
            if j in integer:
                out.append(f" m{j} 'MARKER' 'INTORG'")
            out.append(f" c{j} obj {cost!r}")
            out.extend(f" c{j} r{i} {v!r}" for i, v in terms)
            if j in integer:
                out.append(f" m{j}e 'MARKER' 'INTEND'")
        out += ["RHS", *rhs]
        if ranges:
            out += ["RANGES", *ranges]
        out.append("BOUNDS")
        for j, (lo, hi) in enumerate(zip(self.lower, self.upper, strict=True)):
            out.append(f" MI bnd c{j}" if math.isinf(lo) else f" LO bnd c{j} {lo!r}")
            out.append(f" PL bnd c{j}" if math.isinf(hi) else f" UP bnd c{j} {hi!r}")
        out.append("ENDATA")
        return "\n".join(out) + "\n"

    def _read_into(self, h: Any, highspy: ModuleType) -> bool:
        """The program handed to HiGHS as an MPS file (:meth:`mps`); False when it cannot be (no writable
        temporary directory, or HiGHS reads another shape), and then nothing was passed.

        Why a file: highspy converts every array argument (``addCols``, ``addRows``, a model's vectors)
        through numpy, and importing numpy costs more CPU than the whole solve of these programs
        (``bench/bench_startup.py``); ``readModel`` and a start given as a ``HighsSolution`` do not.
        """
        try:
            place = private_directory()
        except OSError:
            return False
        path = os.path.join(place, "program.mps")
        try:
            with open(path, "w", encoding="ascii") as f:
                f.write(self.mps())
            status = h.readModel(path)
        except OSError:
            return False  # not written: HiGHS read nothing
        finally:
            _remove(path, place)
        if status != highspy.HighsStatus.kOk or (h.getNumCol(), h.getNumRow()) != (
            len(self.cost),
            len(self.row_lo),
        ):
            h.clearModel()
            return False
        return True

    def _pass_into(self, h: Any, highspy: ModuleType) -> None:
        """The program handed to HiGHS through highspy's array calls (imports numpy): the fallback."""
        import numpy

        inf = highspy.kHighsInf
        n_col = len(self.cost)
        lo = [max(x, -inf) for x in self.row_lo]
        hi = [min(x, inf) for x in self.row_hi]
        h.addCols(n_col, self.cost, self.lower, self.upper, 0, [0] * n_col, [], [])
        h.addRows(len(lo), lo, hi, len(self.index), self.starts, self.index, self.value)
        kinds = numpy.full(len(self.integer), int(highspy.HighsVarType.kInteger), dtype=numpy.uint8)
        h.changeColsIntegrality(len(self.integer), self.integer, kinds)


def private_directory() -> str:
    """A new directory only this user can enter, under ``TMPDIR`` (else ``/tmp``), for the program file.

    What :func:`tempfile.mkdtemp` does (an unguessable name, made with ``mkdir`` at mode 0700, which
    fails rather than reuse anything already there), without importing :mod:`tempfile`: it imports
    ``shutil``, ``random`` and with them ``bz2``, ``lzma`` and ``zlib``, about 10 ms of a small
    ``rackplan assign`` that reaches HiGHS (issue 29).  Raises :class:`OSError` when none can be made.
    """
    base = os.environ.get("TMPDIR") or "/tmp"
    for _ in range(8):
        place = os.path.join(base, f"rackplan-highs-{os.urandom(8).hex()}")
        try:
            os.mkdir(place, 0o700)
        except FileExistsError:
            continue
        return place
    raise FileExistsError(f"no new directory could be made under {base}")


def _remove(path: str, place: str) -> None:
    """The program file and its directory, gone; a failure to remove them is not the solve's failure."""
    for remove, name in ((os.unlink, path), (os.rmdir, place)):
        with contextlib.suppress(OSError):
            remove(name)


def solver_module() -> ModuleType:
    """highspy's compiled module, loaded without running the ``highspy`` package (whose ``__init__``
    imports numpy: about 0.3 s of CPU, most of a small ``rackplan assign`` that needs HiGHS).

    The module is registered under its own name, so a later ``import highspy`` (anywhere in the
    process) takes this one instead of loading the extension twice.  When the package is laid out
    otherwise, the ordinary import.
    """
    loaded = sys.modules.get("highspy._core")
    if loaded is not None:
        return loaded
    spec = importlib.util.find_spec("highspy")
    places = list(spec.submodule_search_locations or []) if spec is not None else []
    for place in places:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(place, "_core" + suffix)
            core = importlib.util.spec_from_file_location("highspy._core", path)
            if core is None or core.loader is None or not os.path.exists(path):
                continue
            module = importlib.util.module_from_spec(core)
            sys.modules["highspy._core"] = module
            try:
                core.loader.exec_module(module)
            except BaseException:
                del sys.modules["highspy._core"]
                raise
            return module
    from highspy import _core

    return _core
