"""Benchmark the fleet job: 2,000 groups across 20 synthetic clusters, 3 scenarios, local mode.

Run:  .venv/bin/python bench/bench_fleet.py [--repeats 3] [--clusters 20] [--groups 100]

Every run is a fresh process (``python -m agent.fleet.job``), so each pays
the JVM start as a user would, and its memory is that of the whole job:
the peak of the summed resident memory of the process tree (driver Python,
JVM, Python workers), sampled every 0.2 s.  Configurations, interleaved per
repeat to spread machine noise: ``local[1]`` (the baseline), ``local[2]``,
and the same units in one plain Python process without Spark (what Spark's
overhead costs).  Prints medians; the speed-up is local[1] / local[2].
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

SCENARIOS = [
    {"name": "lose-az-a", "kind": "lose_rack", "rack": "az-a"},
    {"name": "shift-30pc-to-az-b", "kind": "shift_members", "fraction": 0.3, "to_rack": "az-b", "seed": 1},
    {"name": "rf3-everywhere", "kind": "raise_rf", "topic": "*", "replication_factor": 3, "seed": 2},
]

PLAIN = """
import json, sys
from agent.fleet import units
from agent.fleet.scenarios import load_scenarios
from agent.fleet.snapshot import snapshot_files
scenarios = load_scenarios(sys.argv[2])
n = 0
for f in snapshot_files([sys.argv[1]]):
    for g in units.group_rows(f.read_text(), str(f)):
        for u in units.unit_rows(g, scenarios):
            assert units.evaluate(u)["status"] == units.OK
            n += 1
print(json.dumps({"units": n}))
"""


def _children() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        out.setdefault(ppid, []).append(int(entry))
    return out


def tree_sample(root: int) -> tuple[int, dict[int, float]]:
    """Resident bytes of ``root`` and all its descendants, and each one's CPU seconds so far (Linux /proc)."""
    kids = _children()
    total, stack = 0, [root]
    cpu: dict[int, float] = {}
    page, tick = os.sysconf("SC_PAGE_SIZE"), os.sysconf("SC_CLK_TCK")
    while stack:
        pid = stack.pop()
        stack.extend(kids.get(pid, []))
        try:
            with open(f"/proc/{pid}/statm", encoding="ascii") as f:
                total += int(f.read().split()[1]) * page
            with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            cpu[pid] = (int(fields[11]) + int(fields[12])) / tick  # utime + stime
        except (OSError, ValueError, IndexError):
            continue
    return total, cpu


def measure(cmd: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Wall time, CPU seconds, peak resident memory of the process tree, and the JSON ``cmd`` prints.

    CPU is sampled per process (the JVM does not wait for its children's
    accounting to reach us): processes living under 0.2 s are missed.
    """
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    peak = 0
    cpu: dict[int, float] = {}
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.2):
            rss, times = tree_sample(proc.pid)
            peak = max(peak, rss)
            for pid, t in times.items():
                cpu[pid] = max(cpu.get(pid, 0.0), t)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, _ = proc.communicate()
    done.set()
    sampler.join()
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}")
    text = out.strip()
    doc = json.loads(text[text.index("{") :]) if "{" in text else {}
    return {
        "wall_s": wall,
        "cpu_s": sum(cpu.values()),
        "peak_rss_mb": peak / 2**20,
        "load": os.getloadavg()[0],
        "out": doc,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--groups", type=int, default=100, help="consumer groups per cluster")
    parser.add_argument("--no-plain", action="store_true", help="skip the plain-Python baseline")
    args = parser.parse_args(argv)
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("bench_fleet: skipped, pyspark is not installed (pip install -e '.[spark]')")
        return 0
    from agent.fleet.synthetic import cluster_document

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    with tempfile.TemporaryDirectory(prefix="bench_fleet_") as tmp:
        snaps = Path(tmp, "snapshots")
        snaps.mkdir()
        for i in range(args.clusters):
            doc = cluster_document(i, args.groups, seed=2026)
            (snaps / f"{doc['cluster_id']}.json").write_text(json.dumps(doc))
        scen = Path(tmp, "scenarios.json")
        scen.write_text(json.dumps(SCENARIOS))
        configs: dict[str, list[str]] = {}
        for cores in (1, 2):
            configs[f"local[{cores}]"] = [
                sys.executable, "-m", "agent.fleet.job", "--snapshots", str(snaps), "--scenarios", str(scen),
                "--out", str(Path(tmp, f"out{cores}")), "--master", f"local[{cores}]", "--progress", "0",
            ]  # fmt: skip
        if not args.no_plain:
            configs["plain Python, no Spark"] = [sys.executable, "-c", PLAIN, str(snaps), str(scen)]
        results: dict[str, list[dict[str, Any]]] = {k: [] for k in configs}
        for r in range(args.repeats):
            for name, cmd in configs.items():
                res = measure(cmd, env)
                results[name].append(res)
                print(
                    f"  run {r + 1}: {name}: {res['wall_s']:.1f} s wall, {res['cpu_s']:.1f} s CPU, "
                    f"peak {res['peak_rss_mb']:.0f} MB, load average {res['load']:.1f}",
                    flush=True,
                )
    groups = args.clusters * args.groups
    units_count = results["local[1]"][0]["out"].get("units")
    print(
        f"{groups:,} groups across {args.clusters} clusters, {len(SCENARIOS)} scenarios + baseline, "
        f"3 assignors: {units_count:,} units; median of {args.repeats} run(s); "
        f"load average at the end {os.getloadavg()[0]:.1f}"
    )
    print(f"{'configuration':<26}{'wall s':>9}{'job s':>9}{'CPU s':>9}{'cores':>7}{'peak MB':>10}")
    med: dict[str, tuple[float, float]] = {}
    for name, runs in results.items():
        wall = statistics.median(x["wall_s"] for x in runs)
        job = statistics.median(x["out"].get("elapsed_s", x["wall_s"]) for x in runs)
        cpu = statistics.median(x["cpu_s"] for x in runs)
        peak = statistics.median(x["peak_rss_mb"] for x in runs)
        med[name] = (wall, job)
        print(f"{name:<26}{wall:>9.1f}{job:>9.1f}{cpu:>9.1f}{cpu / wall:>7.2f}{peak:>10.0f}")
    w1, j1 = med["local[1]"]
    w2, j2 = med["local[2]"]
    print(
        f"speed-up local[1] -> local[2]: {j1 / j2:.2f}x on the job, {w1 / w2:.2f}x wall (JVM start included)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
