"""What the assignors' records cost a one-shot ``rackplan assign`` (issue 29: start-up).

    .venv/bin/python -m bench.bench_record_cost [--repeats 5] [FILE ...]

Each case (``bench_startup``'s small instances, and any contract document given) runs ``rackplan
assign`` in a fresh interpreter with ``rackplan.assignor.record.record`` and the ``exec`` that
compiles a record's generated methods wrapped by timers, installed before any record is made.  It
prints, as medians of the repeats: how many record classes the run made, the milliseconds spent making
them, the milliseconds spent compiling their methods (at first call since session 15), and the run's
whole CPU.  Bytecode is cached as ``bench_startup`` caches it, so the figures are what an installed
wheel pays.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

from bench import bench_startup

#: Run in the child: the timers around ``record`` and ``exec``, then the console script's ``main``.
_CHILD = """
import contextlib, io, sys, time
start = time.process_time()
from rackplan.assignor import record as r
made, spent, compiled = [0], [0.0], [0.0]
real_record, real_exec = r.record, exec
def record(*, frozen=False):
    make = real_record(frozen=frozen)
    def timed(cls):
        t = time.process_time()
        out = make(cls)
        spent[0] += time.process_time() - t
        made[0] += 1
        return out
    return timed
def timed_exec(source, env):
    t = time.process_time()
    real_exec(source, env)
    compiled[0] += time.process_time() - t
r.record, r.exec = record, timed_exec
sys.argv = ["rackplan", "assign", sys.argv[1]]
from rackplan.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    try:
        main()
    except SystemExit:
        pass
total = time.process_time() - start
sys.stderr.write(f"@@{made[0]} {spent[0]} {compiled[0]} {total}")
"""


def measure(path: Path, repeats: int) -> tuple[int, float, float, float]:
    """(records made, ms making them, ms compiling their methods, ms of the run's CPU): medians."""
    runs = []
    for _ in range(repeats + 1):  # the first fills the bytecode cache: not counted
        err = bench_startup._run([sys.executable, "-c", _CHILD, str(path)])[2]
        made, spent, compiled, total = err.rsplit("@@", 1)[1].split()
        runs.append((int(made), float(spent) * 1e3, float(compiled) * 1e3, float(total) * 1e3))
    runs = runs[1:]
    return (
        runs[0][0],
        statistics.median(r[1] for r in runs),
        statistics.median(r[2] for r in runs),
        statistics.median(r[3] for r in runs),
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("files", nargs="*", type=Path, help="contract documents to run as well")
    args = ap.parse_args(argv)
    print("| instance | records made | making them, ms | compiling their methods, ms | whole run CPU, ms |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        bench_startup.use_bytecode(tmp)
        paths: list[tuple[str, Path]] = []
        for name, doc in bench_startup.cases().items():
            path = Path(tmp) / f"{len(paths)}.json"
            path.write_text(json.dumps(doc))
            paths.append((name, path))
        paths += [(str(f), f.resolve()) for f in args.files]
        for name, path in paths:
            made, spent, compiled, total = measure(path, args.repeats)
            print(f"| {name} | {made} | {spent:.2f} | {compiled:.2f} | {total:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
