"""``rackplan assign`` end to end on huge instances: where the time goes outside the assignor.

    python -m bench.bench_cli [--quick] [--case NAME]

For each case the instance is written to a temporary JSON file once, then:

* ``json.loads``: decoding the file's bytes alone, the floor any reader pays;
* ``parse``, ``assignor``, ``stats``, ``output``: the command's own stages,
  in process (``assignor`` is the core call, the figure docs/performance.md
  reports elsewhere; ``stats`` the contract's statistics; ``output`` building
  and encoding the plan document);
* ``end to end``: ``rackplan assign FILE`` (``rackplan.cli.main``) in a fresh
  interpreter, from process start to the plan on stdout (written to
  /dev/null), with the child's CPU time from ``wait4`` and its own peak
  resident memory (``VmHWM``).

Medians over the repeats; stages in CPU seconds of this process, end to end
in wall and CPU seconds of the child (the machine is shared: CPU is the
figure that does not depend on the neighbours).  Cases (issue 17, issue 10):

* ``4.5M x 30``: 4,500,000 partitions (10 topics x 450,000, rf 3 over three
  racks), 30 members on three racks, every member subscribing to every topic,
  no previous owners; once per consumer assignor (a ~50 MB document);
* ``2,000 x 50,000 leave``: 50 topics x 1,000 partitions (rf 1), 2,000
  members 60/30/10% over three racks that own a settled cooperative-sticky
  round, then one member leaves.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rackplan.assignor.cli import decode, dumps
from rackplan.assignor.consumer import consumer_stats, get_assignor, plan_body
from rackplan.assignor.contract import instance_document
from rackplan.assignor.model import Cluster, ConsumerGroup, StreamsApp
from rackplan.assignor.parse import parse_instance
from rackplan.assignor.record import replace

ROOT = Path(__file__).resolve().parent.parent
RACKS = ("az-a", "az-b", "az-c")


def huge_document(
    n_topics: int, per_topic: int, n_members: int, assignor: str, seed: int = 7
) -> dict[str, Any]:
    """rf 3, one replica per rack on 9 brokers; every member subscribes to every topic."""
    rng = random.Random(seed)
    brokers = [{"id": b, "rack": RACKS[b % 3]} for b in range(9)]
    triples = [[a, b, c] for a in range(0, 9, 3) for b in range(1, 9, 3) for c in range(2, 9, 3)]
    topics = {f"topic-{t:02d}": [rng.choice(triples) for _ in range(per_topic)] for t in range(n_topics)}
    names = sorted(topics)
    members = [
        {"member_id": f"consumer-{i:03d}", "rack": RACKS[i % 3], "topics": names} for i in range(n_members)
    ]
    return {
        "cluster": {"brokers": brokers, "topics": topics},
        "consumer_group": {"group_id": "huge", "assignor": assignor, "members": members},
    }


def leave_document() -> dict[str, Any]:
    """The 2,000 x 50,000 case of bench_sticky: a settled group, then one member leaves."""
    from bench.bench_sticky import converged, make_cluster, make_group, one_leaves

    cluster = make_cluster(50, 1000, 1, seed=1)
    group = one_leaves(converged(cluster, make_group(2000, sorted(cluster.topics), seed=2)))
    doc = instance_document(cluster, replace(group, assignor="cooperative-sticky"))
    doc["cluster"]["brokers"].sort(key=lambda x: x["id"])
    return doc


@dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[], dict[str, Any]]


def cases(quick: bool) -> list[Case]:
    per_topic = 45_000 if quick else 450_000
    label = "450k x 30" if quick else "4.5M x 30"
    out = [
        Case(f"{label} {a}", lambda a=a: huge_document(10, per_topic, 30, a))  # type: ignore[misc]
        for a in ("range", "cooperative-sticky", "rack-optimal")
    ]
    out.append(Case("2,000 x 50,000 leave cooperative-sticky", leave_document))
    out.append(
        Case("2,000 x 50,000 leave rack-optimal", lambda: _with_assignor(leave_document(), "rack-optimal"))
    )
    return out


def _with_assignor(doc: dict[str, Any], assignor: str) -> dict[str, Any]:
    doc["consumer_group"]["assignor"] = assignor
    return doc


def _median(fn: Callable[[], object], repeats: int) -> float:
    """Median CPU seconds of ``fn`` (this process; the machine is shared, so CPU is the stable figure)."""
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times)


def stages(data: bytes, repeats: int) -> dict[str, float]:
    """Seconds per stage of the command, in process."""
    out: dict[str, float] = {"json.loads": _median(lambda: json.loads(data), repeats)}
    gc.disable()  # as the command runs (see rackplan.assignor.cli.cmd_assign)
    try:
        out["json.loads, no GC"] = _median(lambda: json.loads(data), repeats)
        out["decode"] = _median(lambda: decode(data), repeats)
        doc, plain = decode(data)
        out["parse"] = _median(lambda: parse_instance(doc, plain), repeats)
        cluster, group = parse_instance(doc, plain)
        _assignor_stages(cluster, group, repeats, out)
    finally:
        gc.enable()
    return out


def _assignor_stages(
    cluster: Cluster, group: ConsumerGroup | StreamsApp, repeats: int, out: dict[str, float]
) -> None:
    assert isinstance(group, ConsumerGroup)
    assign = get_assignor(group.assignor)
    out["assignor"] = _median(lambda: assign(cluster, group), repeats)
    plan = assign(cluster, group)
    out["stats"] = _median(lambda: consumer_stats(cluster, group, plan, 0.0), repeats)
    out["output"] = _median(
        lambda: dumps({"consumer_group": plan_body(group, plan, False)}).encode(), repeats
    )


#: The command as users run it, then its own peak RSS on stderr.  ``ru_maxrss`` from ``wait4``
#: would not do: a child forked from this (large) process keeps the parent's high-water mark
#: across ``exec``; ``VmHWM`` belongs to the child's own address space.
_CHILD = """
import sys
from rackplan.cli import main
try:
    code = main(["assign", sys.argv[1]])
finally:
    sys.stderr.write(next(line for line in open("/proc/self/status") if line.startswith("VmHWM")))
sys.exit(code)
"""


def end_to_end(path: Path, repeats: int) -> tuple[float, float, float]:
    """``rackplan assign PATH`` in a fresh interpreter: median wall and CPU seconds, largest peak RSS (MiB).

    CPU (user + system, from ``wait4``) is what the command costs; wall time
    also shows how long it waited for a core on a shared machine.
    """
    walls, cpus, peaks = [], [], []
    with open(os.devnull, "wb") as sink:
        for _ in range(repeats):
            start = time.perf_counter()
            proc = subprocess.Popen(
                [sys.executable, "-c", _CHILD, str(path)], stdout=sink, stderr=subprocess.PIPE, cwd=ROOT
            )
            assert proc.stderr is not None
            err = proc.stderr.read()
            _, status, usage = os.wait4(proc.pid, 0)
            walls.append(time.perf_counter() - start)
            proc.returncode = os.waitstatus_to_exitcode(status)
            if proc.returncode != 0:
                raise RuntimeError(f"rackplan assign exited {proc.returncode} on {path}: {err!r}")
            cpus.append(usage.ru_utime + usage.ru_stime)
            peaks.append(int(err.split()[-2]) / 2**10)  # "VmHWM:  123456 kB"
    return statistics.median(walls), statistics.median(cpus), max(peaks)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="4.5M cases at a tenth of the size, 1 repeat")
    ap.add_argument("--case", help="run only cases whose name contains this")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    cols = ("json.loads", "json.loads, no GC", "decode", "parse", "assignor", "stats", "output")
    print(
        "| case | MB | "
        + " | ".join(cols)
        + " | end to end (wall) | end to end (CPU) | CPU / json.loads | peak RSS |"
    )
    print("|---" * (len(cols) + 6) + "|")
    with tempfile.TemporaryDirectory() as tmp:
        for case in cases(args.quick):
            if args.case and args.case not in case.name:
                continue
            data = dumps(case.make()).encode()
            path = Path(tmp) / "instance.json"
            path.write_bytes(data)
            st = stages(data, repeats)
            wall, cpu, rss = end_to_end(path, repeats)
            cells = [f"{len(data) / 1e6:.1f}", *(f"{st[c]:.2f} s" for c in cols)]
            cells += [f"{wall:.2f} s", f"{cpu:.2f} s", f"{cpu / st['json.loads']:.1f}", f"{rss:.0f} MiB"]
            print(f"| {case.name} | " + " | ".join(cells) + " |", flush=True)
    print(f"load average at the end: {' / '.join(f'{x:.1f}' for x in os.getloadavg())} (1 / 5 / 15 min)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
