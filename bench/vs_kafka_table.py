"""The pure parts of ``bench.bench_vs_kafka``: what a row holds, its ratios, medians and the table's text.

Nothing here times or runs anything, so tests/bench/test_vs_kafka_table.py checks it exactly.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Times:
    """Wall-clock and CPU seconds of one measured thing (medians where it was repeated)."""

    wall: float
    cpu: float


@dataclass(frozen=True)
class Row:
    """One case, both sides, same instance, same run.

    ``warm`` is Kafka's JIT-warmed ``assign`` (thread CPU), ``cold`` its first call in a fresh JVM,
    ``jvm`` that JVM from process start to the answer read (the whole process's CPU); each is None
    when Kafka did not answer within the timeout (``note`` says so).
    """

    case: str
    shape: str
    core: Times
    e2e: Times
    floor: Times
    warm: Times | None
    cold: Times | None
    jvm: Times | None
    note: str = ""


def ratio(kafka: float | None, ours: float) -> float | None:
    """Kafka's figure over ours (above 1: rackplan is faster); None without Kafka's or with ours at 0."""
    if kafka is None or ours <= 0:
        return None
    return kafka / ours


def warm_median(samples: Sequence[int]) -> float:
    """Median seconds of the later half of nanosecond samples: the JIT is still compiling in the first."""
    if not samples:
        raise ValueError("no samples")
    later = samples[len(samples) // 2 :]
    return float(statistics.median(later)) / 1e9


def repeats_for(first: float, budget: float, low: int, high: int, limit: float | None = None) -> int:
    """How many timed calls fit ``budget`` seconds when one took ``first``, within ``[low, high]``.

    ``limit``: seconds the calls must stay under whatever ``low`` says (a timeout), but at least one call.
    """
    n = high if first <= 0 else max(low, min(high, int(budget / first)))
    if limit is not None and first > 0:
        n = min(n, max(1, int(limit / first)))
    return n


def ms(seconds: float | None) -> str:
    """Milliseconds with three significant figures or so; ``-`` for a missing figure."""
    if seconds is None:
        return "-"
    m = seconds * 1000
    if m < 10:
        return f"{m:.2f}"
    if m < 100:
        return f"{m:.1f}"
    return f"{m:,.0f}"


def times(t: Times | None) -> str:
    """``CPU / wall`` in milliseconds."""
    return "-" if t is None else f"{ms(t.cpu)} / {ms(t.wall)}"


def x(r: float | None) -> str:
    """A ratio as ``1.23x`` (``0.004x``, ``123x``); below 1 in bold (rackplan slower); ``-`` when missing."""
    if r is None:
        return "-"
    text = f"{r:.3f}x" if r < 0.1 else f"{r:,.2f}x" if r < 10 else f"{r:,.0f}x"
    return f"**{text}**" if r < 1 else text


HEADER = (
    "| case | members x partitions | ours core CPU / wall ms | ours end to end CPU / wall ms | floor CPU ms "
    "| end to end / floor (CPU) | Kafka warm CPU / wall ms | **Kafka warm CPU / ours core CPU** "
    "| Kafka cold call CPU / wall ms | JVM start to answer CPU / wall ms | Kafka cold call / ours end to end (CPU) "
    "| JVM start to answer / ours end to end (CPU) |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def line(row: Row) -> str:
    """The row in the table of :data:`HEADER`."""
    cold_cpu = None if row.cold is None else row.cold.cpu
    jvm_cpu = None if row.jvm is None else row.jvm.cpu
    warm_cpu = None if row.warm is None else row.warm.cpu
    name = f"{row.case} ({row.note})" if row.note else row.case
    cells = [
        name,
        row.shape,
        times(row.core),
        times(row.e2e),
        ms(row.floor.cpu),
        f"{row.e2e.cpu / row.floor.cpu:.2f}" if row.floor.cpu > 0 else "-",
        times(row.warm),
        x(ratio(warm_cpu, row.core.cpu)),
        times(row.cold),
        times(row.jvm),
        x(ratio(cold_cpu, row.e2e.cpu)),
        x(ratio(jvm_cpu, row.e2e.cpu)),
    ]
    return "| " + " | ".join(cells) + " |"


def summary(rows: Sequence[Row]) -> list[str]:
    """Plain sentences: where rackplan's core is below Kafka's warm CPU and where not, with the ratios."""
    behind = [(f"{r.case} {r.shape}", ratio(r.warm.cpu, r.core.cpu)) for r in rows if r.warm is not None]
    slower = [(c, q) for c, q in behind if q is not None and q < 1]
    out = [
        f"rackplan's core below Kafka's warm CPU in {len(behind) - len(slower)} of {len(behind)} cases Kafka answered"
    ]
    out += [
        f"rackplan's core above Kafka's warm CPU: {c} (Kafka / ours {x(q).strip('*')})" for c, q in slower
    ]
    missing = [f"{r.case} {r.shape}" for r in rows if r.warm is None]
    if missing:
        out.append("Kafka did not answer: " + ", ".join(missing))
    return out
