"""Samples of log-end offsets in, bytes/s per partition out: the measurement, with no I/O.

A partition's rate is the slope between the oldest and the newest sample of it
in the operator's window (``traffic.window_s``): one burst inside the window
moves the figure by its share of the window, not by its peak.  Offsets are
used for the rate because they only grow: a log whose size drops (retention,
compaction) still appends at the same rate.  An end offset that goes *down*
means the partition was recreated (a topic deleted and made again): its
history restarts at that sample, never a negative rate.  A partition missing
from some samples (a failed ListOffsets for its leader) is measured over the
samples that have it.  Records per second become bytes per second with an
average record size per topic (:func:`bytes_per_s`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

#: a topic and partition
TopicPart = tuple[str, int]


@dataclass(frozen=True, slots=True)
class OffsetSample:
    """Log-end offsets of some partitions, read at one moment (a steady clock, seconds)."""

    taken_at: float
    ends: Mapping[TopicPart, int]


def in_window(samples: Iterable[OffsetSample], now: float, window_s: float) -> tuple[OffsetSample, ...]:
    """The samples taken in the last ``window_s`` seconds before ``now``, oldest first.

    A clock that went back (a sample "after" ``now``) keeps the sample: only age drops one.
    """
    return tuple(sorted((s for s in samples if now - s.taken_at <= window_s), key=lambda s: s.taken_at))


#: samples kept per window at most (plus the newest): memory stays bounded however short the poll interval
KEPT_PER_WINDOW = 16


def add_sample(
    samples: Sequence[OffsetSample], new: OffsetSample, window_s: float, kept: int = KEPT_PER_WINDOW
) -> tuple[OffsetSample, ...]:
    """``samples`` (oldest first) with ``new`` added, those older than the window dropped, and thinned: a
    sample closer than ``window_s / kept`` to the one before it is replaced by the next, so at most
    ``kept + 1`` samples of every partition are held whatever the poll interval (each holds every
    partition's offset: a 1 s poll over a 300 s window would otherwise keep 300 copies)."""
    out = list(in_window((*samples, new), new.taken_at, window_s))
    if len(out) >= 3 and out[-2].taken_at - out[-3].taken_at < window_s / kept:
        del out[-2]
    return tuple(out)


def record_rates(samples: Sequence[OffsetSample], min_samples: int = 2) -> dict[TopicPart, float]:
    """Records/s of every partition with at least ``min_samples`` usable samples, over ``samples``.

    Per partition: the samples holding it since its end offset last went
    down (a recreated partition starts again), and then the slope between
    the first and the last of them.  A partition with fewer samples, or with
    all of them at the same instant, has no rate (it is left out).
    """
    return {tp: rate for tp, (rate, _) in slopes(samples, min_samples).items()}


def slopes(samples: Sequence[OffsetSample], min_samples: int = 2) -> dict[TopicPart, tuple[float, float]]:
    """:func:`record_rates`, each with the time of the newest sample it was measured to."""
    need = max(2, min_samples)
    first: dict[TopicPart, tuple[float, int]] = {}
    last: dict[TopicPart, tuple[float, int]] = {}
    count: dict[TopicPart, int] = {}
    for s in sorted(samples, key=lambda s: s.taken_at):
        for tp, end in s.ends.items():
            prev = last.get(tp)
            if prev is None or end < prev[1]:  # first seen, or recreated: history starts here
                first[tp] = (s.taken_at, end)
                count[tp] = 0
            last[tp] = (s.taken_at, end)
            count[tp] += 1
    out: dict[TopicPart, tuple[float, float]] = {}
    for tp, (t1, e1) in last.items():
        t0, e0 = first[tp]
        if count[tp] >= need and t1 > t0:
            out[tp] = ((e1 - e0) / (t1 - t0), t1)
    return out


class Measured(dict[str, tuple[float, ...]]):
    """``cluster.traffic`` (topic -> bytes/s per partition) that knows how old each topic's figures are.

    ``taken_at[topic]``: the newest sample its figures were measured to, on the steady ``clock`` of the
    samples; :meth:`age_s` is how long ago that was, so a wall-clock time at publishing becomes the
    time of the measurement (:meth:`rackplan.agent.traffic.publish.TrafficFeed.records`).
    """

    def __init__(
        self,
        rows: Mapping[str, tuple[float, ...]],
        taken_at: Mapping[str, float],
        clock: Callable[[], float],
    ) -> None:
        super().__init__(rows)
        self.taken_at = dict(taken_at)
        self.clock = clock

    def age_s(self, topic: str) -> float:
        """Seconds since the newest sample of ``topic``'s figures (0 for a sample "after" now)."""
        return max(0.0, self.clock() - self.taken_at[topic])


def bytes_per_s(
    rates: Mapping[TopicPart, float],
    partitions: Mapping[str, int],
    record_bytes: Callable[[str], float],
    unmeasured: float | None = None,
) -> dict[str, tuple[float, ...]]:
    """``cluster.traffic`` for the topics of ``partitions`` (name -> partition count) that are fully measured.

    A topic is given only when every one of its partitions has a rate: the
    contract's list has a figure per partition, and a topic half measured
    (a partition just added) is left unknown rather than guessed.  With
    ``unmeasured`` a figure, a topic with a rate for at least one partition
    is given and its others count that many records/s: a group's reads
    (:mod:`.reads`), where a partition it commits nothing for is one it does
    not read (0).
    """
    out: dict[str, tuple[float, ...]] = {}
    for topic, n in sorted(partitions.items()):
        row = [rates.get((topic, p), unmeasured) for p in range(n)]
        seen = any((topic, p) in rates for p in range(n))
        if n and seen and all(r is not None for r in row):
            size = record_bytes(topic)
            out[topic] = tuple(float(r) * size for r in row if r is not None)
    return out
