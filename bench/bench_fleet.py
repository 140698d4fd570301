"""Benchmark the fleet job: its in-process engine and plain Python vs local[1] vs local[2] vs a
standalone cluster of 1 and 2 workers.

Run:  .venv/bin/python bench/bench_fleet.py [--repeats 3] [--groups 100,1000,2000]
      [--configs inprocess,plain,local1,local2,standalone1,standalone2,local2+cds]

``inprocess`` is ``rackplan fleet --engine local`` (rackplan.fleet.local: the whole job, tables
written, in one Python process); ``plain`` the bare loop of pure functions without any output.

Fleets: ``--groups`` consumer groups in total (synthetic, ``rackplan.fleet.synthetic``),
spread over up to 20 clusters, baseline + 3 scenarios x 3 assignors = 12 units a group.
Every run is a fresh process, so each pays the JVM start as a user would:
``python -m rackplan.fleet.job --master local[N]``, or ``spark-submit`` to a
loopback standalone cluster (master + N 1-core workers from PySpark's own
``spark-class``, started once per N and not timed; the job is submitted as
docs/fleet.md says: code zip, packed environment).  Memory is the peak of the
summed resident memory of the process tree (driver, JVMs, Python workers;
standalone: plus the workers' trees, i.e. the executors and the two worker
JVMs), sampled every 0.2 s.  Prints medians per size and configuration, and
the job's own phase timings (``summary.json``: Spark start, list, units, tables).
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SCENARIOS = [
    {"name": "lose-az-a", "kind": "lose_rack", "rack": "az-a"},
    {"name": "shift-30pc-to-az-b", "kind": "shift_members", "fraction": 0.3, "to_rack": "az-b", "seed": 1},
    {"name": "rf3-everywhere", "kind": "raise_rf", "topic": "*", "replication_factor": 3, "seed": 2},
]

PLAIN = """
import json, sys
from rackplan.fleet import units
from rackplan.fleet.scenarios import load_scenarios
from rackplan.agent.cluster.archive import snapshot_files
scenarios = load_scenarios(sys.argv[2])
n = 0
for f in snapshot_files([sys.argv[1]]):
    for g in units.group_rows(f.read_text(), str(f)):
        for r in units.with_comparisons(units.group_results(g, scenarios)):  # what each Spark task runs
            assert r["status"] in (units.OK, units.NOT_APPLICABLE), r["detail"]
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


def _comm(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return ""


def thread_sample(pid: int) -> dict[tuple[int, str], float]:
    """CPU seconds so far of each thread of a JVM, keyed by (thread id, name with digits as ``#``)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[tuple[int, str], float] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        name = "".join("#" if c.isdigit() else c for c in text[text.index("(") + 1 : text.rindex(")")])
        fields = text.rsplit(")", 1)[1].split()
        out[(int(tid), name)] = (int(fields[11]) + int(fields[12])) / tick
    return out


def measure(cmd: list[str], env: dict[str, str], extra_roots: Sequence[int] = ()) -> dict[str, Any]:
    """Wall time, CPU seconds, peak resident memory of the process tree, and the JSON ``cmd`` prints.

    CPU is sampled per process (the JVM does not wait for its children's
    accounting to reach us): processes living under 0.2 s are missed.
    """
    before: dict[int, float] = {}  # a standalone cluster's JVMs ran before this job: count only its share
    for root in extra_roots:
        before.update(tree_sample(root)[1])
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    peak = 0
    cpu: dict[int, float] = {}
    kinds: dict[int, str] = {}
    threads: dict[tuple[int, str], float] = {}
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.2):
            rss, times = tree_sample(proc.pid)
            for root in extra_roots:  # a standalone cluster's workers and their executors
                more, more_times = tree_sample(root)
                rss += more
                times.update(more_times)
            peak = max(peak, rss)
            for pid, t in times.items():
                cpu[pid] = max(cpu.get(pid, 0.0), t)
                if pid not in kinds or kinds[pid] == "other":
                    comm = _comm(f"/proc/{pid}/comm")
                    kinds[pid] = (
                        "jvm" if comm == "java" else "python" if comm.startswith("python") else "other"
                    )
                if kinds[pid] == "jvm":
                    for key, tt in thread_sample(pid).items():
                        threads[key] = max(threads.get(key, 0.0), tt)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, _ = proc.communicate()
    done.set()
    sampler.join()
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}")
    text = out.strip()
    start_doc = text.find("\n{\n") + 1 if not text.startswith("{\n") else 0  # the summary (indented), last
    doc = json.loads(text[start_doc:]) if "{" in text else {}
    by_kind: dict[str, float] = {}
    for pid, t in cpu.items():
        kind = "driver" if pid == proc.pid else kinds.get(pid, "other")
        by_kind[kind] = by_kind.get(kind, 0.0) + t - before.get(pid, 0.0)
    by_thread: dict[str, float] = {}
    for (_, name), t in threads.items():
        by_thread[name] = by_thread.get(name, 0.0) + t
    return {
        "wall_s": wall,
        "cpu_s": sum(t - before.get(pid, 0.0) for pid, t in cpu.items()),
        "cpu_by_kind": {k: round(v, 1) for k, v in sorted(by_kind.items())},
        "jvm_threads": {k: round(v, 1) for k, v in sorted(by_thread.items(), key=lambda kv: -kv[1])[:6]},
        "peak_rss_mb": peak / 2**20,
        "load": os.getloadavg()[0],
        "out": doc,
    }


CONFIGS = ("inprocess", "plain", "local1", "local2", "standalone1", "standalone2")
#: also accepted by --configs: local1+cds, local2+cds (with ``spark.class_archive``, written by an untimed run)


def fleet_shape(groups: int) -> tuple[int, int]:
    """(clusters, groups per cluster) for a total number of groups."""
    clusters = max(1, min(20, groups // 10))
    return clusters, max(1, groups // clusters)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--groups", default="100,1000,2000", help="fleet sizes: consumer groups in total")
    parser.add_argument(
        "--threads", action="store_true", help="also print each run's busiest JVM threads (CPU seconds)"
    )
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"some of {','.join(CONFIGS)}")
    args = parser.parse_args(argv)
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("bench_fleet: skipped, pyspark is not installed (pip install -e '.[spark]')")
        return 0
    sys.path.insert(
        0, str(Path(__file__).resolve().parent.parent)
    )  # this checkout's package, not an installed one
    from rackplan.fleet.standalone import Standalone, pack_code, pack_env, submit_command
    from rackplan.fleet.synthetic import cluster_document

    configs = [c for c in args.configs.split(",") if c]
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    sizes = [int(g) for g in args.groups.split(",")]
    results: dict[tuple[int, str], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_fleet_") as tmp:
        scen = Path(tmp, "scenarios.json")
        scen.write_text(json.dumps(SCENARIOS))
        code = pack_code(root, Path(tmp, "rackplan.zip"))
        envzip = (
            pack_env(root, Path(tmp, "env.zip")) if any(c.startswith("standalone") for c in configs) else None
        )
        script = Path(tmp, "fleet_job.py")
        script.write_text((root / "fleet" / "job.py").read_text())

        def spark_args(snaps: Path, out: str) -> list[str]:
            return ["--snapshots", str(snaps), "--scenarios", str(scen), "--out", out, "--progress", "0"]

        for groups in sizes:
            clusters, per = fleet_shape(groups)
            snaps = Path(tmp, f"snapshots-{groups}")
            snaps.mkdir()
            for i in range(clusters):
                doc = cluster_document(i, per, seed=2026)
                (snaps / f"{doc['cluster_id']}.json").write_text(json.dumps(doc))
            for r in range(args.repeats):
                for name in configs:
                    out = str(Path(tmp, f"out-{groups}-{name}"))
                    if name == "plain":
                        res = measure([sys.executable, "-c", PLAIN, str(snaps), str(scen)], env)
                    elif name == "inprocess":
                        cmd = [sys.executable, "-m", "rackplan.fleet.job", *spark_args(snaps, out)]
                        res = measure([*cmd, "--engine", "local"], env)
                    elif name.startswith("local"):
                        cmd = [
                            sys.executable,
                            "-m",
                            "rackplan.fleet.job",
                            *spark_args(snaps, out),
                            "--engine",
                            "spark",
                            "--master",
                            f"local[{name[5]}]",
                        ]
                        run_env = env
                        if name.endswith("+cds"):  # spark.class_archive: one untimed run writes it first
                            archive = Path(tmp, "classes.jsa")
                            run_env = {**env, "RACKPLAN_SPARK__CLASS_ARCHIVE": str(archive)}
                            if not archive.exists():
                                measure(cmd, run_env)
                        res = measure(cmd, run_env)
                    else:
                        assert envzip is not None
                        with Standalone(
                            Path(tmp, f"cluster-{name}"), workers=int(name[-1]), cores=1
                        ) as cluster:
                            cmd = submit_command(
                                cluster.url, code, envzip, script, spark_args(snaps, out),
                                **{"spark.executor.memory": "1g", "spark.ui.enabled": "false",
                                   "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"},
                            )  # fmt: skip
                            res = measure(cmd, {**env, **cluster.env()}, extra_roots=cluster.pids())
                    results.setdefault((groups, name), []).append(res)
                    timings = res["out"].get("timings_s", {})
                    print(
                        f"  {groups:,} groups, run {r + 1}: {name}: {res['wall_s']:.1f} s wall, "
                        f"{res['cpu_s']:.1f} s CPU, peak {res['peak_rss_mb']:.0f} MB, load {res['load']:.1f}; "
                        f"units {res['out'].get('units')}, phases {timings}; CPU by process {res['cpu_by_kind']}"
                        + (f", JVM threads {res['jvm_threads']}" if args.threads else ""),
                        flush=True,
                    )
    print(f"medians of {args.repeats} run(s); load average at the end {os.getloadavg()[0]:.1f}")
    print(
        f"{'groups':>7}{'units':>8}  {'configuration':<14}{'wall s':>8}{'job s':>8}{'start s':>9}{'units s':>9}{'CPU s':>8}{'peak MB':>9}{'load':>6}"
    )
    points: dict[str, list[tuple[int, float, float]]] = {}  # configuration -> (units, wall, CPU) medians
    for groups in sizes:
        walls: dict[str, float] = {}
        for name in configs:
            runs = results[(groups, name)]
            wall = statistics.median(x["wall_s"] for x in runs)
            walls[name] = wall
            job = statistics.median(x["out"].get("elapsed_s", x["wall_s"]) for x in runs)
            start = statistics.median(x["out"].get("timings_s", {}).get("spark_start", 0.0) for x in runs)
            unit_phase = statistics.median(
                x["out"].get("timings_s", {}).get("units", x["wall_s"]) for x in runs
            )
            cpu = statistics.median(x["cpu_s"] for x in runs)
            peak = statistics.median(x["peak_rss_mb"] for x in runs)
            units_count = runs[0]["out"].get("units", 0)
            load = statistics.median(x["load"] for x in runs)
            points.setdefault(name, []).append((units_count, wall, cpu))
            print(
                f"{groups:>7,}{units_count:>8,}  {name:<14}{wall:>8.1f}{job:>8.1f}{start:>9.1f}{unit_phase:>9.1f}{cpu:>8.1f}{peak:>9.0f}{load:>6.1f}"
            )
        pairs = [
            ("local1", "local2"),
            ("standalone1", "standalone2"),
            ("plain", "local2"),
            ("plain", "standalone2"),
            ("inprocess", "local1"),
            ("inprocess", "local2"),
        ]
        notes = [f"{b} vs {a}: {walls[a] / walls[b]:.2f}x" for a, b in pairs if a in walls and b in walls]
        print(f"{'':>17}speed-up (wall): " + "; ".join(notes))
    for line in crossover_lines(points):
        print(line)
    return 0


def fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least-squares (fixed, per-unit) of ``y = fixed + per_unit * x``."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    return my - slope * mx, slope


def crossover_lines(points: dict[str, list[tuple[int, float, float]]]) -> list[str]:
    """The model of each configuration over the fleet sizes (fixed seconds + ms per unit, wall and CPU),
    and the unit count from which its wall time would beat plain Python's on the same machine."""
    out = []
    models = {
        name: (
            fit([u for u, _, _ in p], [w for _, w, _ in p]),
            fit([u for u, _, _ in p], [c for _, _, c in p]),
        )
        for name, p in points.items()
        if len({u for u, _, _ in p}) >= 2
    }
    for name, ((wa, wb), (ca, cb)) in models.items():
        line = f"model {name}: wall {wa:.1f} s + {wb * 1000:.3f} ms/unit; CPU {ca:.1f} s + {cb * 1000:.3f} ms/unit"
        for base in ("plain", "inprocess"):
            if name in ("plain", "inprocess") or base not in models:
                continue
            pa, pb = models[base][0]
            if wb < pb:
                line += f"; wall beats {base} from {(wa - pa) / (pb - wb):,.0f} units"
            else:
                line += f"; wall never beats {base} (per-unit wall not below its)"
        out.append(line)
    return out


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
