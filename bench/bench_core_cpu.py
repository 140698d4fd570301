"""The assignors' core CPU on ``bench_vs_kafka``'s instances, without Kafka: for before/after comparisons.

    .venv/bin/python -m bench.bench_core_cpu --only "cooperative-sticky, equal"
    .venv/bin/python -m bench.bench_core_cpu --only range --samples 15
    .venv/bin/python -m bench.bench_core_cpu --only streams --large

Each case (small and medium, ``bench/vs_kafka_cases.py``; ``--large`` adds the large ones) is parsed
once and its assignor called once untimed; then ``--samples`` times, as many calls as fit in 0.1 s of
CPU, each sample giving CPU per call.  Prints the median per case in ms.  To compare two trees, ``bench_revisions`` runs this measure
on both in turn, from their wheels, and checks their plans are the same; Kafka's side is
``bench_vs_kafka``'s.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from bench.bench_vs_kafka import assignor_call
from bench.vs_kafka_cases import cases, selected, shape


def per_call(call: Callable[[], object], samples: int, budget: float = 0.1) -> float:
    """Median CPU seconds per call over ``samples`` samples of at least ``budget`` CPU seconds each."""
    call()
    out = []
    for _ in range(samples):
        start, calls = time.process_time(), 0
        while time.process_time() - start < budget:
            call()
            calls += 1
        out.append((time.process_time() - start) / calls)
    return statistics.median(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--only", default="", help="the cases whose name contains this text")
    ap.add_argument("--samples", type=int, default=15)
    ap.add_argument("--large", action="store_true", help="also the large cases (seconds each to build)")
    args = ap.parse_args(argv)
    print("| case | shape | core CPU ms (median) |\n|---|---|---|")
    for case in selected(cases(), quick=not args.large, huge=False, only=args.only):
        doc = case.build()
        call = assignor_call(doc)
        print(f"| {case.name} | {shape(doc)} | {per_call(call, args.samples) * 1e3:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
