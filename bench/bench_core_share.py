"""How much of a cooperative-sticky call is already compiled code: the floor of compiling the rest (issue 29).

    .venv/bin/python -m bench.bench_core_share [--only TEXT] [--calls 20]

For ``bench_vs_kafka``'s cooperative-sticky cases (``--only``: those whose name contains TEXT; by
default the unequal small ones, where rackplan's core is furthest above Kafka's warm CPU), the
assignor's call on the parsed model is timed as ``bench_vs_kafka`` times it (CPU, after one untimed
call), and every call into the compiled flow core (``assignor/flow/_flowcore.c``: the flow solver,
the count-shift graphs' pieces, the read-back) is timed inside it.  Medians over ``--calls`` calls
of: the whole call, the time in the compiled core, how many compiled calls one call makes, and how
many flows it solves (each built by several of those calls).

Why: issue 29 asks for the core below Kafka's warm CPU on every case.  On these cases the search
builds and solves tens of flows per call; the compiled share is what those flows cost even if every
line of Python around them were compiled too, so a share above Kafka's warm CPU says the gap is the
number of flows (the search's design), not the language.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from bench.bench_vs_kafka import assignor_call
from bench.vs_kafka_cases import cases, shape
from rackplan.assignor.flow import compiled


class _Timed:
    """The compiled core with every function call timed (CPU) and counted."""

    def __init__(self, core: ModuleType) -> None:
        self._core = core
        self.cpu = 0.0
        self.calls = 0
        self.solves = 0  # flows solved (``solve``), each built by several other compiled calls

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._core, name)
        if not callable(value):
            return value

        def timed(*args: Any) -> Any:
            start = time.process_time()
            try:
                return value(*args)
            finally:
                self.cpu += time.process_time() - start
                self.calls += 1
                self.solves += name == "solve"

        return timed


def _swap(core: object, new: object) -> list[tuple[ModuleType, str]]:
    """Every loaded rackplan module's reference to ``core`` (``CORE``, ``_core``) pointed at ``new``."""
    swapped = []
    for module in list(sys.modules.values()):
        if not getattr(module, "__name__", "").startswith("rackplan"):
            continue
        for attr in ("CORE", "_core"):
            if vars(module).get(attr) is core:
                setattr(module, attr, new)
                swapped.append((module, attr))
    return swapped


def measure(call: Callable[[], object], calls: int) -> tuple[float, float, float, float]:
    """Medians of (whole call CPU s, CPU s in the compiled core, compiled calls, flows solved) over
    ``calls`` calls."""
    core = compiled.CORE
    assert isinstance(core, ModuleType)
    call()  # imports what the path needs
    probe = _Timed(core)
    swapped = _swap(core, probe)
    whole: list[float] = []
    inside: list[float] = []
    count: list[float] = []
    solves: list[float] = []
    try:
        for _ in range(calls):
            probe.cpu, probe.calls, probe.solves = 0.0, 0, 0
            start = time.process_time()
            call()
            whole.append(time.process_time() - start)
            inside.append(probe.cpu)
            count.append(float(probe.calls))
            solves.append(float(probe.solves))
    finally:
        for module, attr in swapped:
            setattr(module, attr, core)
    median = statistics.median
    return median(whole), median(inside), median(count), median(solves)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--only", default="cooperative-sticky, unequal", help="cases whose name contains this")
    ap.add_argument("--calls", type=int, default=20)
    args = ap.parse_args(argv)
    if compiled.CORE is None:
        print("the compiled flow core is not installed (make .venv/.installed with a C compiler)")
        return 1
    todo = [c for c in cases() if c.name.startswith("cooperative-sticky") and args.only in c.name]
    todo = [c for c in todo if c.size in ("small", "medium")]
    print(
        "| case | members x partitions | call CPU ms | in the compiled core ms | share "
        "| compiled calls per call | flows solved per call |"
    )
    print("|---|---|---|---|---|---|---|")
    for case in todo:
        doc = case.build()
        whole, inside, count, solves = measure(assignor_call(doc), args.calls)
        print(
            f"| {case.name} | {shape(doc)} | {whole * 1000:.1f} | {inside * 1000:.1f} "
            f"| {inside / whole:.0%} | {count:.0f} | {solves:.0f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
