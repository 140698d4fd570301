"""Two revisions of rackplan side by side, their runs interleaved: the same plans?  How much faster?

    .venv/bin/python -m bench.bench_revisions --base HEAD~2 --only streams --large
    .venv/bin/python -m bench.bench_revisions --base 5bcee6a --only "cooperative-sticky, unequal" --rounds 12

Why: this machine's CPU speed drifts by tens of percent within minutes, so ``bench_core_cpu`` run on
one tree and then the other compares two moments as much as two trees (docs/performance.md, session
37: in three runs on one tree, Streams 500 x 50 read 16.7, 14.3 and 14.5 ms of core).  Here the
base revision (a ``git worktree`` of ``--base``) and this tree are each built into a wheel and
installed as a user has them (:mod:`bench.installed`), and for each case of ``bench_vs_kafka``
(``bench/vs_kafka_cases.py``; ``--only``, ``--large`` as ``bench_core_cpu`` takes them):

* **the plans**: ``rackplan assign`` of both on the same instance file, byte for byte (a change meant
  to be faster must give the same plans; the table says when it does not);
* **core**: ``--rounds`` rounds, each a fresh interpreter per side in turn, timing the assignor's call
  on the parsed instance (CPU, median per call over ``--samples`` samples after one untimed call, as
  ``bench_core_cpu`` does); the table gives both medians and the median of the per-round ratios;
* **end to end**: ``rackplan assign FILE`` of both, ``--repeats`` runs each, interleaved
  (``bench_startup.timed_pair``): median CPU of each and their ratio.

A ratio below 1 means this tree is faster.  Nothing here reads Kafka.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import bench_startup
from bench.installed import ROOT, install
from bench.vs_kafka_cases import cases, selected, shape

#: The child that times the core: parse once, one untimed call, then ``samples`` samples of as many
#: calls as fit in 0.1 s of CPU; prints the median CPU seconds per call (``bench_core_cpu.per_call`` on
#: ``bench_vs_kafka.assignor_call``, written out).  Only rackplan's own API: importing the bench package
#: would time this tree, not the side's wheel (``bench_range`` and ``bench_streams`` put this tree first
#: on ``sys.path`` when imported).
_CORE = """
import json, statistics, sys, time
from functools import partial
from rackplan.assignor.model import ConsumerGroup
from rackplan.assignor.parse import parse_instance
with open(sys.argv[1], "rb") as f:
    cluster, spec = parse_instance(json.loads(f.read()))
if isinstance(spec, ConsumerGroup):
    from rackplan.assignor.consumer import get_assignor
    call = partial(get_assignor(spec.assignor), cluster, spec)
else:
    from rackplan.assignor.streams import plan_document
    call = partial(plan_document, cluster, spec)
call()
out = []
for _ in range(int(sys.argv[2])):
    start, calls = time.process_time(), 0
    while time.process_time() - start < 0.1:
        call()
        calls += 1
    out.append((time.process_time() - start) / calls)
print(statistics.median(out))
"""


@dataclass(frozen=True)
class Side:
    """One revision's interpreter (with rackplan importable) and the directory its children run in."""

    python: str
    cwd: str


@dataclass(frozen=True)
class Row:
    """One case: whether both plans are the same bytes, core medians (s) and their ratio, end to end."""

    name: str
    shape: str
    same_plan: bool
    core_base: float
    core_new: float
    core_ratio: float
    e2e_base: float
    e2e_new: float


def _child(side: Side, code: str, *args: str) -> str:
    """The stdout of ``python -c code args`` in a fresh interpreter of ``side`` (raises if it fails)."""
    return subprocess.run(
        [side.python, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=side.cwd,
        env=bench_startup.ENV,
        check=True,
        timeout=600,
    ).stdout


def plan_bytes(side: Side, instance: Path) -> bytes:
    """What ``rackplan assign INSTANCE`` writes on stdout (the ``stats`` timing field aside)."""
    doc = json.loads(_child(side, bench_startup._ASSIGN, "assign", str(instance)))
    doc.get("stats", {}).pop("elapsed_ms", None)  # a measurement, different on every run
    return json.dumps(doc, sort_keys=True).encode()


def core_cpu(side: Side, instance: Path, samples: int) -> float:
    """Median CPU seconds per assignor call on the parsed instance, in a fresh interpreter of ``side``."""
    return float(_child(side, _CORE, str(instance), str(samples)).strip().splitlines()[-1])


def compare(
    base: Side, new: Side, instance: Path, rounds: int, samples: int, repeats: int
) -> tuple[bool, float, float, float, float, float]:
    """(same plan, core base, core new, median per-round core ratio, end to end CPU base, new) on one file."""
    same = plan_bytes(base, instance) == plan_bytes(new, instance)
    pairs = [(core_cpu(base, instance, samples), core_cpu(new, instance, samples)) for _ in range(rounds)]
    ratio = statistics.median(n / b for b, n in pairs)
    e2e = bench_startup.timed_pair(
        [base.python, "-c", bench_startup._ASSIGN, "assign", str(instance)],
        [new.python, "-c", bench_startup._ASSIGN, "assign", str(instance)],
        repeats,
    )
    return (
        same,
        statistics.median(b for b, _ in pairs),
        statistics.median(n for _, n in pairs),
        ratio,
        e2e[0][1],
        e2e[1][1],
    )


def line(row: Row) -> str:
    """A markdown table row (milliseconds)."""
    return (
        f"| {row.name} | {row.shape} | {'yes' if row.same_plan else '**no**'} "
        f"| {row.core_base * 1e3:.3f} | {row.core_new * 1e3:.3f} | {row.core_ratio:.3f} "
        f"| {row.e2e_base * 1e3:.1f} | {row.e2e_new * 1e3:.1f} | {row.e2e_new / row.e2e_base:.3f} |"
    )


HEADER = (
    "| case | shape | same plans | base core CPU ms | new core CPU ms | new / base core (median of rounds) "
    "| base end to end CPU ms | new end to end CPU ms | new / base end to end |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


def _revision(rev: str) -> str:
    return subprocess.run(
        ["git", "rev-parse", "--short", rev], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.strip()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--base", required=True, help="the revision to compare this tree with (git rev)")
    ap.add_argument("--only", default="", help="the cases whose name contains this text")
    ap.add_argument("--large", action="store_true", help="also the large cases")
    ap.add_argument("--rounds", type=int, default=8, help="core: fresh interpreters per side")
    ap.add_argument("--samples", type=int, default=5, help="core: samples per interpreter")
    ap.add_argument("--repeats", type=int, default=41, help="end to end: runs per side")
    args = ap.parse_args(argv)
    base_rev = _revision(args.base)
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as cache:
        scratch = Path(tmp)
        tree = scratch / "base-tree"
        subprocess.run(
            ["git", "worktree", "add", "-q", "--detach", str(tree), base_rev], check=True, cwd=ROOT
        )
        try:
            bench_startup.use_bytecode(cache)
            bench_startup.ENV.pop("PYTHONPATH", None)
            old, cur = install(scratch / "base", root=tree), install(scratch / "new")
            base, new = Side(str(old.python), str(old.cwd)), Side(str(cur.python), str(cur.cwd))
            bench_startup.CHILD["cwd"] = new.cwd
            print(f"base {base_rev}, new: this tree (uncommitted changes included), from their wheels\n")
            print(HEADER)
            for case in selected(cases(), quick=not args.large, huge=False, only=args.only):
                doc = case.build()
                path = scratch / "instance.json"
                path.write_text(json.dumps(doc))
                got = compare(base, new, path, args.rounds, args.samples, args.repeats)
                print(line(Row(case.name, shape(doc), *got)), flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], check=False, cwd=ROOT)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
