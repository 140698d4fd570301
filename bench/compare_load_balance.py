"""``balance: bytes`` before and after a change, in one process: CPU seconds and the same plans.

Run:  PYTHONPATH=. .venv/bin/python bench/compare_load_balance.py --old OLD_MODULE.py [--quick]

``OLD_MODULE.py`` is a previous ``assignor/consumer/rack_optimal/load_balance.py`` with its relative
imports made absolute (``git show REV:assignor/consumer/rack_optimal/load_balance.py``, then
``from ...x`` -> ``from rackplan.assignor.x``, ``from ..owned`` -> ``from rackplan.assignor.consumer.owned``).
Every case of bench/bench_traffic.py with ``objective: bytes, balance: bytes``; each plan of the
two versions compared field by field (a difference stops the run).  Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path
from types import ModuleType

if __package__ in (None, ""):  # run as a script: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_traffic import CASES, QUICK, make_instance
from rackplan.assignor.consumer.rack_optimal import load_balance as new
from rackplan.assignor.record import replace


def _values(plan: object) -> tuple[object, ...]:
    """A plan's field values in order, whichever record type made it (the old module's or this one's)."""
    return tuple(getattr(plan, name) for name in type(plan).__annotations__)


def load_module(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("old_load_balance", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--old", required=True, help="the previous load_balance.py, imports made absolute")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    old = load_module(args.old)
    print("| case | members x partitions | before (s) | after (s) | faster | repair moves | plans |")
    print("|---|---|---|---|---|---|---|")
    for case in QUICK if args.quick else CASES:
        cluster, group = make_instance(case)
        g = replace(group, objective="bytes", balance="bytes")
        after, before = [], []
        for _ in range(3 if case.members * case.parts * case.topics < 10**7 else 1):
            t = time.process_time()
            a = new.balance_by_load(cluster, g)
            after.append(time.process_time() - t)
            t = time.process_time()
            b = old.balance_by_load(cluster, g)
            before.append(time.process_time() - t)
            if _values(a) != _values(b):
                print(f"{case.name}: the plans differ", file=sys.stderr)
                return 1
        tb, ta = statistics.median(before), statistics.median(after)
        print(
            f"| {case.name} | {case.members} x {case.topics * case.parts} | {tb:.3f} | {ta:.3f} "
            f"| {tb / ta:.1f}x | {a.repairs} | identical |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
