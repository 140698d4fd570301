"""Soak: the agent against the embedded cluster with churn, its resident memory sampled, a verdict on the trend.

Run:  nice -n 10 .venv/bin/python bench/soak.py --duration-s 900 [--sample-s 30] [--tracemalloc]

The agent runs as it is deployed, in a process of its own (this script with
``--child``: :class:`rackplan.agent.runtime.loop.Agent` with the lease on, on the main
thread), against librdkafka's mock cluster (:mod:`rackplan.agent.kafka.embedded`,
3 racks x 2 brokers) hosted by this script's process, which churns what the
agent watches every ``--churn-s``:

- registrations join and leave: a member of one of ``--groups`` groups
  registers (new member, or a new subscription: ``orders``, ``payments`` or both)
  or leaves (a tombstone), from a bounded pool of member ids, so the steady
  state is bounded and the agent's memory should be too;
- partitions move: every ``--outage-every`` churn steps a broker is set down for
  one step and up again (metadata errors, leader moves, retries);
- plans are republished for every group whose membership changed.

The mock keeps every record in memory and this process holds it, so only the
agent's process is measured: every ``--sample-s`` its resident set size
(``/proc/<pid>/statm``) with its cycle count.  At the end a table, the
least-squares slope of RSS over the samples after the warm-up (the first
``--warmup-frac`` of the run) in MiB per hour, and a verdict: ``flat`` when
that slope stays under ``--flat-mib-per-hour``, else ``growing``.
Each sample also reads glibc's own account of the agent's heap (``mallinfo2``: bytes
in use by malloc's callers, and bytes free but kept by malloc), to tell a leak (in
use grows) from memory the allocator keeps (free grows, or RSS grows with neither).
``--trim-every-s`` has the agent's heap trimmed (``malloc_trim(0)``) that often, from a
thread of its own (an experiment; docs/performance.md says what it showed).
Each sample also splits the agent's RSS by where it lives (``/proc/<pid>/smaps`` grouped by
:mod:`bench.memory_map`: glibc's main heap, its per-thread arenas, thread stacks, other anonymous
mmaps, file-backed mappings), counts its threads, and reads how much Python's object allocator
holds in its own arenas (``sys._debugmallocstats`` in the agent), so a slope is put on a kind of
memory: the end prints each kind's slope.
``--tracemalloc`` also has the agent dump Python allocation snapshots (after
the warm-up, at the end; on SIGUSR1) and prints the largest growths by line,
to find what grows (it slows the agent and adds its own memory).  The agent's
process bounds glibc's malloc arenas and pins its mmap threshold as ``rackplan agent run`` does
(:mod:`rackplan.agent.runtime.malloc_arenas`); ``--default-malloc`` leaves them unbounded.
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.interned import InternedTable, interned_table
from bench.memory_map import KINDS, MemoryMap, read_memory_map, thread_count
from rackplan.agent.kafka.embedded import EmbeddedCluster
from rackplan.agent.kafka.publisher import Publisher
from rackplan.agent.protocol.registrations import REGISTRATION_SCHEMA, registration_key
from rackplan.agent.runtime.loop import Agent, CycleReport, topic_specs
from rackplan.agent.runtime.malloc_arenas import fix_mmap_threshold, limit_arenas
from rackplan.agent.settings.sections import Settings

TOPICS = (("orders", 24), ("payments", 12))
SUBSCRIPTIONS = (["orders"], ["payments"], ["orders", "payments"])
MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Sample:
    elapsed_s: float
    rss_bytes: int
    cycles: int
    churn_steps: int
    heap: HeapStats
    mem: MemoryMap
    threads: int
    interned: InternedTable | None = None


@dataclass(frozen=True, slots=True)
class HeapStats:
    """glibc's ``mallinfo2`` in the agent's process: ``in_use`` (arena and mmapped chunks handed out) and
    ``kept`` (free chunks malloc holds); zeros where the C library has no ``mallinfo2``."""

    in_use: int = 0
    kept: int = 0
    python_arenas: int = 0


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
            "keepcost",
        )
    ]  # fmt: skip


def start_trimmer(every_s: float) -> None:
    """``malloc_trim(0)`` every ``every_s`` seconds on a daemon thread (glibc; nothing elsewhere)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim.argtypes = [ctypes.c_size_t]

    def run() -> None:
        while True:
            time.sleep(every_s)
            trim(0)

    threading.Thread(target=run, name="soak-heap-trim", daemon=True).start()


def heap_stats() -> HeapStats:
    """This process's glibc heap account (``mallinfo2``, glibc 2.33 and later)."""
    try:
        fn = ctypes.CDLL(None).mallinfo2
    except (OSError, AttributeError):
        return HeapStats()
    fn.restype = _Mallinfo2
    m = fn()
    return HeapStats(in_use=m.uordblks + m.hblkhd, kept=m.fordblks + m.fsmblks)


def python_arena_bytes() -> int:
    """Bytes Python's object allocator holds in its arenas (this process), from
    ``sys._debugmallocstats``, which writes to the C ``stderr``: it is pointed at a file meanwhile."""
    with tempfile.TemporaryFile() as f:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(f.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        m = re.search(rb"arenas \* \d+ bytes/arena *= *([\d,]+)", f.read())
    return int(m[1].replace(b",", b"")) if m else 0


def rss_bytes(pid: int) -> int:
    """A process's resident set size (Linux ``/proc/<pid>/statm``: pages times the page size)."""
    fields = Path(f"/proc/{pid}/statm").read_text().split()
    return int(fields[1]) * os.sysconf("SC_PAGE_SIZE")


def slope_per_hour(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of ``(seconds, value)`` points, per hour; 0 with fewer than two distinct times."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return 0.0
    return 3600.0 * sum((x - mx) * (y - my) for x, y in points) / sxx


def soak_settings(bootstrap: str, groups: int, poll_interval_s: float) -> dict[str, Any]:
    """The agent's settings (a document: the child validates it again), fresh topic and group names."""
    run = uuid.uuid4().hex[:8]
    return {
        "kafka": {"bootstrap_servers": bootstrap},
        "poll_interval_s": poll_interval_s,
        "plan_topic": f"_soak.{run}.plans",
        "alerts_topic": f"_soak.{run}.alerts",
        "registrations_topic": f"_soak.{run}.registrations",
        "change_persist_polls": 1,
        "ha": {"enabled": True, "lease_topic": f"_soak.{run}.lease", "group_id": f"soak-{run}"},
        "http": {"port": 0},
        "metadata": {"request_timeout_s": 5, "backoff_initial_s": 0.2, "backoff_max_s": 1},
        "io_timeout_s": 10,
        "log": {"format": "json", "level": "error"},
        "consumer_groups": [
            {
                "group_id": f"file-{g}",
                "assignor": "cooperative-sticky",
                "members": [
                    {"member_id": f"f{g}-{r}", "rack": f"az-{r}", "topics": ["orders"]} for r in "abc"
                ],
            }
            for g in range(max(1, groups // 4))
        ],
    }


class Churn:
    """Registrations joining and leaving, subscriptions changing, brokers going down and up."""

    def __init__(
        self, cluster: EmbeddedCluster, s: Settings, groups: int, members: int, outage_every: int
    ) -> None:
        self.cluster = cluster
        self.s = s
        self.rng = random.Random(20261128)
        self.pool = [(f"g{g}", f"m{m}") for g in range(groups) for m in range(members)]
        self.outage_every = outage_every
        self.down: int | None = None
        self.steps = 0
        self.unconfirmed = 0
        self.publisher = Publisher(s.kafka.client_config(), s.plan_max_message_bytes)

    def step(self) -> None:
        self.steps += 1
        if self.down is not None:
            self.cluster.set_up(self.down)
            self.down = None
        elif self.outage_every and self.steps % self.outage_every == 0:
            self.down = self.rng.choice(sorted(self.cluster.broker_racks))
            self.cluster.set_down(self.down)
        records: list[tuple[str, bytes | None]] = []
        for _ in range(3):
            group, member = self.rng.choice(self.pool)
            key = registration_key("consumer", group, member)
            if self.rng.random() < 0.35:
                records.append((key, None))  # the member leaves
                continue
            value = {
                "schema": REGISTRATION_SCHEMA,
                "group_id": group,
                "member_id": member,
                "rack": f"az-{self.rng.choice('abc')}",
                "topics": self.rng.choice(SUBSCRIPTIONS),
                "assignor": self.rng.choice(["range", "cooperative-sticky"]),
                "timestamp_ms": int(time.time() * 1000),
            }
            records.append((key, json.dumps(value).encode()))
        try:
            self.publisher.publish_many(self.s.registrations_topic, records, self.s.io_timeout_s)
        except Exception:  # a broker just set down: the next step registers again
            self.unconfirmed += 1

    def close(self) -> None:
        if self.down is not None:
            self.cluster.set_up(self.down)
        self.publisher.flush(self.s.io_timeout_s)


HEADER = (
    f"{'elapsed s':>9} {'RSS MiB':>8} {'in use':>7} {'kept':>6} {'pyarena':>7} "
    + " ".join(f"{k:>6}" for k in KINDS)
    + f" {'thr':>4} {'cycles':>7} {'churn':>6}"
)
#: with ``--interned``: live interned strings / entry slots consumed / 2**k slots of their table
INTERNED_HEADER = f" {'interned live/used/2^k':>20}"


def row(sm: Sample) -> str:
    kinds = " ".join(f"{sm.mem.rss.get(k, 0) / MIB:6.1f}" for k in KINDS)
    return (
        f"{sm.elapsed_s:9.0f} {sm.rss_bytes / MIB:8.1f} {sm.heap.in_use / MIB:7.1f} {sm.heap.kept / MIB:6.1f} "
        f"{sm.heap.python_arenas / MIB:7.1f} {kinds} {sm.threads:4d} {sm.cycles:7d} {sm.churn_steps:6d}"
    ) + (
        f" {sm.interned.live:>9}/{sm.interned.consumed:>6}/{sm.interned.log2_size:>3}" if sm.interned else ""
    )


def sample(
    proc: subprocess.Popen[bytes], workdir: Path, elapsed_s: float, churn_steps: int, interned: bool = False
) -> Sample:
    """One sample of the agent's process: RSS, its split by mapping kind, threads, its own heap account,
    and with ``interned`` its table of interned strings (:mod:`bench.interned`, through gdb)."""
    cycles, heap = read_cycles(workdir)
    return Sample(
        elapsed_s,
        rss_bytes(proc.pid),
        cycles,
        churn_steps,
        heap,
        read_memory_map(proc.pid),
        thread_count(proc.pid),
        interned_table(proc.pid) if interned else None,
    )


def top_growth(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot, n: int = 15) -> list[str]:
    """The Python heap traced in both snapshots, then the ``n`` lines whose allocations grew most."""
    stats = after.compare_to(before, "lineno")
    total = [sum(st.size for st in snap.statistics("filename")) / MIB for snap in (before, after)]
    return [f"  traced Python heap {total[0]:.2f} -> {total[1]:.2f} MiB"] + [
        f"  {st.size_diff / 1024:+9.1f} KiB {st.count_diff:+7d} blocks  {st.traceback}"
        for st in sorted(stats, key=lambda st: -st.size_diff)[:n]
    ]


# ---- the agent's process ---------------------------------------------------------------------------------


def child(settings_path: str, workdir: Path, trace: bool, default_malloc: bool, trim_every_s: float) -> int:
    """The agent on this process's main thread; its cycle count in ``workdir/cycles``; on SIGUSR1 (with
    ``trace``) a tracemalloc snapshot ``workdir/snapshot-<n>``; SIGTERM stops it after its cycle."""
    from rackplan.agent.core.logging import configure
    from rackplan.agent.runtime.signals import install_stop_handlers

    configure("json", "error", stream=sys.stderr)
    if not default_malloc:
        limit_arenas()  # as `rackplan agent run` does
        fix_mmap_threshold()
    if trim_every_s > 0:
        start_trimmer(trim_every_s)
    if trace:
        tracemalloc.start(8)
    cycles = [0]
    dumped = [0]

    def counted(_r: CycleReport) -> None:
        cycles[0] += 1
        if cycles[0] % 10 == 1:
            h = heap_stats()
            (workdir / "cycles.tmp").write_text(f"{cycles[0]} {h.in_use} {h.kept} {python_arena_bytes()}")
            os.replace(workdir / "cycles.tmp", workdir / "cycles")

    def dump(_signum: int, _frame: Any) -> None:
        dumped[0] += 1
        path = workdir / f"snapshot-{dumped[0]}"
        tracemalloc.take_snapshot().dump(str(path) + ".tmp")
        os.replace(str(path) + ".tmp", path)

    settings = Settings.model_validate(json.loads(Path(settings_path).read_text()))
    agent = Agent(settings, on_cycle=counted)
    install_stop_handlers(agent.stop)
    if trace:
        signal.signal(signal.SIGUSR1, dump)
    return agent.run()


def read_cycles(workdir: Path) -> tuple[int, HeapStats]:
    """The agent's cycle count and heap account as it last wrote them (every 10 cycles)."""
    try:
        cycles, in_use, kept, py = (int(x) for x in (workdir / "cycles").read_text().split())
    except (OSError, ValueError):
        return 0, HeapStats()
    return cycles, HeapStats(in_use, kept, py)


def snapshot(proc: subprocess.Popen[bytes], workdir: Path, n: int) -> tracemalloc.Snapshot:
    proc.send_signal(signal.SIGUSR1)
    path = workdir / f"snapshot-{n}"
    deadline = time.monotonic() + 120
    while not path.exists():
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError("the agent wrote no tracemalloc snapshot")
        time.sleep(0.2)
    return tracemalloc.Snapshot.load(str(path))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--duration-s", type=float, default=900.0)
    p.add_argument("--sample-s", type=float, default=30.0)
    p.add_argument("--churn-s", type=float, default=1.0)
    p.add_argument("--poll-interval-s", type=float, default=0.5)
    p.add_argument("--groups", type=int, default=20)
    p.add_argument("--members", type=int, default=6, help="member ids per group in the churn pool")
    p.add_argument("--outage-every", type=int, default=20, help="churn steps between broker outages; 0: none")
    p.add_argument("--warmup-frac", type=float, default=0.2)
    p.add_argument("--flat-mib-per-hour", type=float, default=2.0)
    p.add_argument("--tracemalloc", action="store_true")
    p.add_argument(
        "--default-malloc",
        action="store_true",
        help="leave glibc's malloc arenas unbounded (the agent bounds them)",
    )
    p.add_argument("--trim-every-s", type=float, default=0.0, help="an experiment: trim the agent's heap")
    p.add_argument(
        "--interned",
        action="store_true",
        help="read the agent's table of interned strings each sample (bench/interned.py: gdb, a moment's stop)",
    )
    p.add_argument("--child", metavar="SETTINGS_JSON", help=argparse.SUPPRESS)
    p.add_argument("--workdir", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        return child(a.child, Path(a.workdir), a.tracemalloc, a.default_malloc, a.trim_every_s)

    samples: list[Sample] = []
    with EmbeddedCluster(brokers_per_rack=2, racks=3) as cluster, tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        for name, partitions in TOPICS:
            cluster.create_topic(name, partitions, 3)
        doc = soak_settings(cluster.bootstrap_servers, a.groups, a.poll_interval_s)
        s = Settings.model_validate(doc)
        for spec in topic_specs(s):  # the mock has no CreateTopics
            cluster.create_topic(spec.name, spec.partitions, 3)
        (workdir / "settings.json").write_text(json.dumps(doc))
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", str(workdir / "settings.json")]
        cmd += ["--workdir", str(workdir)] + (["--tracemalloc"] if a.tracemalloc else [])
        cmd += ["--default-malloc"] if a.default_malloc else []
        cmd += ["--trim-every-s", str(a.trim_every_s)]
        proc = subprocess.Popen(cmd)
        churn: Churn | None = None
        warm: tracemalloc.Snapshot | None = None
        last: tracemalloc.Snapshot | None = None
        try:
            deadline = time.monotonic() + 120
            while read_cycles(workdir)[0] == 0:
                if time.monotonic() > deadline or proc.poll() is not None:
                    print(f"the agent ran no cycle within 120 s (exit {proc.poll()})", file=sys.stderr)
                    return 1
                time.sleep(0.2)
            churn = Churn(cluster, s, a.groups, a.members, a.outage_every)
            t0 = time.monotonic()
            next_sample = t0
            header = HEADER + (INTERNED_HEADER if a.interned else "")
            print(f"agent pid {proc.pid}; MiB except thr(eads), cycles, churn\n{header}", flush=True)
            while (now := time.monotonic()) < t0 + a.duration_s and proc.poll() is None:
                if now >= next_sample:
                    sm = sample(proc, workdir, now - t0, churn.steps, a.interned)
                    samples.append(sm)
                    print(row(sm), flush=True)
                    next_sample += a.sample_s
                    if a.tracemalloc and warm is None and sm.elapsed_s >= a.warmup_frac * a.duration_s:
                        warm = snapshot(proc, workdir, 1)
                churn.step()
                time.sleep(max(0.0, min(a.churn_s, next_sample - time.monotonic())))
            if proc.poll() is not None:
                print(f"the agent exited {proc.returncode} during the soak", file=sys.stderr)
                return 1
            end = sample(proc, workdir, time.monotonic() - t0, churn.steps, a.interned)
            samples.append(end)
            print(row(end))
            if warm is not None:
                last = snapshot(proc, workdir, 2)
        finally:
            if churn is not None:
                churn.close()
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    warmed = [sm for sm in samples if sm.elapsed_s >= a.warmup_frac * a.duration_s]
    slope = slope_per_hour([(sm.elapsed_s, sm.rss_bytes / MIB) for sm in warmed])
    first, final = samples[0], samples[-1]
    print(
        f"\nagent RSS {first.rss_bytes / MIB:.1f} -> {final.rss_bytes / MIB:.1f} MiB over {final.elapsed_s:.0f} s; "
        f"after the warm-up ({len(warmed)} samples from {warmed[0].elapsed_s:.0f} s): "
        f"{warmed[0].rss_bytes / MIB:.1f} -> {warmed[-1].rss_bytes / MIB:.1f} MiB, slope {slope:+.2f} MiB/h"
    )
    print(
        f"cycles {final.cycles}, churn steps {final.churn_steps} "
        f"({churn.unconfirmed if churn else 0} with registrations unconfirmed: a broker down)"
    )
    for label, attr in (
        ("malloc in use", "in_use"),
        ("malloc keeps free", "kept"),
        ("Python's arenas", "python_arenas"),
    ):
        series = [(sm.elapsed_s, getattr(sm.heap, attr) / MIB) for sm in warmed]
        print(
            f"{label}: {series[0][1]:.1f} -> {series[-1][1]:.1f} MiB, "
            f"slope {slope_per_hour(series):+.2f} MiB/h"
        )
    for kind in KINDS:
        series = [(sm.elapsed_s, sm.mem.rss.get(kind, 0) / MIB) for sm in warmed]
        counts = [sm.mem.regions.get(kind, 0) for sm in warmed]
        print(
            f"RSS in {kind:>6}: {series[0][1]:6.1f} -> {series[-1][1]:6.1f} MiB, slope {slope_per_hour(series):+6.2f}"
            f" MiB/h; mappings {counts[0]} -> {counts[-1]} (max {max(counts)})"
        )
    tables = [(sm.cycles, sm.interned) for sm in samples if sm.interned is not None]
    if tables:
        (c0, first_table), (c1, last_table) = tables[0], tables[-1]
        rebuilt = [
            (c, t.log2_size) for (_, p_), (c, t) in itertools.pairwise(tables) if t.consumed < p_.consumed
        ]
        print(
            f"interned strings live {first_table.live} -> {last_table.live}; table 2**{first_table.log2_size} -> 2**{last_table.log2_size} slots "
            f"({first_table.table_bytes / MIB:.2f} -> {last_table.table_bytes / MIB:.2f} MiB) from cycle {c0} to {c1}; "
            f"rebuilt near cycles {[c for c, _ in rebuilt]} (to 2**{[k for _, k in rebuilt]})"
        )
    threads = [sm.threads for sm in warmed]
    print(f"threads {threads[0]} -> {threads[-1]} (min {min(threads)}, max {max(threads)})")
    verdict = "flat" if abs(slope) < a.flat_mib_per_hour else ("growing" if slope > 0 else "shrinking")
    print(f"verdict: {verdict} (threshold {a.flat_mib_per_hour} MiB/h)")
    if warm is not None and last is not None:
        print("\nlargest Python allocation growths in the agent since the warm-up (tracemalloc):")
        print("\n".join(top_growth(warm, last)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
