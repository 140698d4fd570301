"""Two of issue 29's pass rewrites against the forms they replaced, alternating in one process.

    .venv/bin/python -m bench.bench_passes_ab [--samples 15]

Sub-millisecond cores vary by up to 2x from one process to the next on the project's machine (the same
tree, the same instance: 0.16 against 0.33 ms on range's 23 x 148 group), which hides a change of a few
tens of percent when two trees are timed in two processes.  Here both forms run in the same process,
sample after sample in turn, on ``bench_vs_kafka``'s instances:

* **range**: ``range_assignment`` with the co-partitioned rack pass inlined (one set of counts for its
  topics) against the same call with the pass through every topic's bookkeeping calls (the form before,
  kept as ``tests/assignor/test_range.py``'s oracle); the range cases of ``bench_vs_kafka``;
* **small_exact**: the count-vector enumeration (``small_exact.solve_small``) with the walk's
  incremental check against the full check of every fixed subscription (the form before), on the
  enumerations ``bench_vs_kafka``'s 9 x 96 cooperative-sticky group asks for with the exact candidate's
  size limit at 600, as when this was measured (since session 21 it is 350 and that group builds none).

Prints the median CPU per call of each form and their ratio.  The answers are compared too (the bench
stops if they differ).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from bench.bench_highs_gate import FORMER_LIMIT
from bench.bench_vs_kafka import assignor_call
from bench.vs_kafka_cases import cases, shape
from rackplan.assignor import parse
from rackplan.assignor.consumer import range_assignor
from rackplan.assignor.consumer.rack_optimal import small_exact
from rackplan.assignor.consumer.rack_optimal.milp import Component
from rackplan.assignor.consumer.sticky import general_exact
from rackplan.assignor.model import Cluster, ConsumerGroup
from tests.assignor.test_range import co_partitioned_pass_by_calls


def alternate(new: Callable[[], object], old: Callable[[], object], samples: int) -> tuple[float, float]:
    """Median CPU seconds per call of ``new`` and ``old``, sampled in turn (each sample at least 0.05 s)."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(samples):
        for out, call in zip(times, (new, old), strict=True):
            start, calls = time.process_time(), 0
            while time.process_time() - start < 0.05:
                call()
                calls += 1
            out.append((time.process_time() - start) / calls)
    return statistics.median(times[0]), statistics.median(times[1])


def _row(name: str, new: float, old: float) -> str:
    return f"| {name} | {old * 1e3:.3f} | {new * 1e3:.3f} | {old / new:.2f}x |"


def _range_forms(cluster: Cluster, group: ConsumerGroup) -> tuple[Callable[[], object], Callable[[], object]]:
    """``range_assignment`` with the inlined co-partitioned pass, and with the pass through the calls."""
    inlined = range_assignor._co_partitioned_pass

    def new() -> object:
        return range_assignor.range_assignment(cluster, group)

    def old() -> object:
        range_assignor._co_partitioned_pass = co_partitioned_pass_by_calls
        try:
            return range_assignor.range_assignment(cluster, group)
        finally:
            range_assignor._co_partitioned_pass = inlined

    return new, old


def range_rows(samples: int) -> list[str]:
    """Both forms of ``range_assignment`` per range case of ``bench_vs_kafka`` (small and medium)."""
    rows = []
    for case in cases():
        if not case.name.startswith("range") or case.size not in ("small", "medium"):
            continue
        doc = case.build()
        cluster = parse.parse_cluster(doc["cluster"])
        new, old = _range_forms(cluster, parse.parse_consumer_group(doc["consumer_group"], cluster))
        if new() != old():
            raise SystemExit(f"{case.name}: the two passes answer differently")
        rows.append(_row(f"range: {case.name}, {shape(doc)}", *alternate(new, old, samples)))
    return rows


def _full_check(
    subs: Sequence[Any], totals: Sequence[int], mu: Sequence[int | None], which: object = None
) -> bool:
    """The check before: every fixed subscription, whatever the walk just changed."""
    return incremental(subs, totals, mu)


incremental = small_exact._may_hold


def enumeration_rows(samples: int) -> list[str]:
    """``solve_small`` with the incremental and the full check, on the 9 x 96 group's enumerations."""
    captured: list[tuple[Component, list[dict[int, int]]]] = []
    real = small_exact.solve_small  # the exact candidate's, imported there by name

    def capture(comp: Component, counts: Sequence[dict[int, int]]) -> list[dict[int, int]] | None:
        captured.append((comp, [dict(c) for c in counts]))
        return real(comp, counts)

    case = next(
        c for c in cases() if c.name == "cooperative-sticky, unequal, one leaves" and c.size == "small"
    )
    doc = case.build()
    limit = general_exact.EXACT_NONZEROS
    general_exact.EXACT_NONZEROS = FORMER_LIMIT
    setattr(general_exact, "solve_small", capture)  # noqa: B010 (not re-exported there, so not typed)
    try:
        assignor_call(doc)()
    finally:
        setattr(general_exact, "solve_small", real)  # noqa: B010
        general_exact.EXACT_NONZEROS = limit

    def new() -> object:
        return [small_exact.solve_small(comp, start) for comp, start in captured]

    def old() -> object:
        small_exact._may_hold = _full_check
        try:
            return [small_exact.solve_small(comp, start) for comp, start in captured]
        finally:
            small_exact._may_hold = incremental

    if new() != old():
        raise SystemExit("the two checks answer differently")
    per_call = [t / max(len(captured), 1) for t in alternate(new, old, samples)]
    return [_row(f"small_exact: {case.name} {shape(doc)}, per enumeration ({len(captured)})", *per_call)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--samples", type=int, default=15)
    args = ap.parse_args(argv)
    print("| call | before, CPU ms | after, CPU ms | before / after |\n|---|---|---|---|")
    for row in [*range_rows(args.samples), *enumeration_rows(args.samples)]:
        print(row, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
