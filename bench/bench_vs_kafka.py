"""rackplan against Kafka's own assignors on every assignor both have, small groups included (issue 29's goal).

    .venv/bin/python -m bench.bench_vs_kafka            # small, medium and large cases
    .venv/bin/python -m bench.bench_vs_kafka --quick    # small and medium, fewer repeats
    .venv/bin/python -m bench.bench_vs_kafka --huge     # also bench_sticky's 50k/20k groups and Streams 1,000 x 100

Needs Java 17 and Maven (the oracle harness, ``oracle/``).  Cases (``bench/vs_kafka_cases.py``): range,
cooperative-sticky (equal and unequal subscriptions, fresh, one leaving, one joining) and Streams
high-availability with rack awareness, from 3 members x 12 partitions to the existing large benches.
Each case is one contract document, and every column of its row is measured on it in the same run:

* ours core: the assignor's call on the parsed model (``assign`` of the consumer assignor,
  ``plan_document`` for Streams), CPU (``time.process_time``) and wall medians after one untimed call;
* ours end to end: ``rackplan assign FILE`` in a fresh interpreter as the console script runs it, CPU
  of the child (``wait4``) and wall, medians; rackplan installed from its wheel built from this tree,
  bytecode cached as an installed wheel has it (``bench_startup``; ``--editable``: this development
  venv, whose editable finder adds to every interpreter start, the floor's too); the floor beside it (the interpreter reading the file, ``json.loads`` and
  ``json.dumps``), issue 29's reference for the command;
* Kafka warm and cold (``bench/kafka_jvm.py``): the JIT-warmed ``assign`` (wall, thread CPU) and the
  first call in a fresh JVM (wall, thread CPU), and that JVM from start to answer (wall, process CPU);
* ratios: Kafka warm CPU / ours core CPU (above 1: rackplan's core is faster) and Kafka cold / ours end
  to end, both the first call alone and the JVM from start.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from bench import bench_startup
from bench.common import timed
from bench.kafka_jvm import WarmKafka, cold
from bench.vs_kafka_cases import Case, cases, selected, shape
from bench.vs_kafka_table import HEADER, Row, Times, line, repeats_for, summary
from rackplan.assignor.model import ConsumerGroup
from rackplan.assignor.parse import parse_instance


def assignor_call(doc: dict[str, Any]) -> Callable[[], object]:
    """The assignor's call on the parsed model of a contract document (consumer group or Streams app)."""
    from rackplan.assignor.consumer import get_assignor
    from rackplan.assignor.streams import plan_document

    cluster, spec = parse_instance(doc)
    if isinstance(spec, ConsumerGroup):
        return partial(get_assignor(spec.assignor), cluster, spec)
    return partial(plan_document, cluster, spec)


def core(doc: dict[str, Any], budget: float, high: int) -> Times:
    """Medians of the assignor's call on the parsed model (one untimed call first sizes the repeats)."""
    call = assignor_call(doc)
    first = timed(call, 1)  # imports what the path needs; not in the medians
    t = timed(call, repeats_for(first.cpu, budget, 3, high))
    return Times(t.wall, t.cpu)


def end_to_end(path: Path, repeats: int) -> tuple[Times, Times]:
    """``rackplan assign FILE`` and the floor on the same file: medians of ``repeats`` fresh interpreters each,
    their runs interleaved."""
    e2e, floor = bench_startup.timed_pair(
        bench_startup.assign_argv(path), bench_startup.floor_argv(path), repeats
    )
    return Times(*e2e), Times(*floor)


def measure(case: Case, kafka: WarmKafka, tmp: Path, quick: bool, timeout: float) -> Row:
    doc = case.build()
    path = tmp / "instance.json"
    path.write_text(json.dumps(doc))
    ours = core(doc, 0.5 if quick else 2.0, 50 if quick else 200)
    e2e, floor = end_to_end(path, 3 if quick else 5)
    warm = kafka.time(doc)
    first = None if warm is None else cold(doc, timeout)  # a cold JVM is slower still: not waited for twice
    note = "" if warm is not None and first is not None else f"Kafka: no answer within {timeout:.0f} s"
    return Row(
        case.name,
        shape(doc),
        ours,
        e2e,
        floor,
        warm,
        None if first is None else first[0],
        None if first is None else first[1],
        note,
    )


def _commit() -> str:
    out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    return out.stdout.strip() or "unknown"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="small and medium cases, fewer repeats")
    ap.add_argument("--huge", action="store_true", help="also the huge cases (Kafka may take minutes)")
    ap.add_argument("--only", default="", help="run only the cases whose name contains this text")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds Kafka gets per case and JVM")
    ap.add_argument(
        "--editable", action="store_true", help="end to end in this development venv instead of the wheel"
    )
    args = ap.parse_args(argv)
    todo = selected(cases(), args.quick, args.huge, args.only)
    print(
        f"commit {_commit()}, load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}, python {sys.version.split()[0]}, "
        f"end to end {'in the development venv' if args.editable else 'from the built wheel'}"
    )
    print()
    print(HEADER)
    rows = []
    kafka = WarmKafka(1.0 if args.quick else 3.0, 500 if args.quick else 2000, args.timeout)
    try:
        with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as cache:
            bench_startup.use_bytecode(cache)
            if not args.editable:
                bench_startup.use_installed(Path(tmp) / "installed")
            for case in todo:
                row = measure(case, kafka, Path(tmp), args.quick, args.timeout)
                rows.append(row)
                print(line(row), flush=True)
    finally:
        kafka.close()
    print()
    for sentence in summary(rows):
        print(f"- {sentence}")
    print(f"\nload average at the end {' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
