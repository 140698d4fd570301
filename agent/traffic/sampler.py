"""The measurement's I/O: end offsets sampled once a cycle, kept for the window, turned into bytes/s.

One ListOffsets request per sample for the partitions of the registered
groups' topics; a partition the metadata gives no leader is not asked (it
would only wait for a timeout).  Partitions whose error clears by itself (a
leader moving) are asked again with backoff (``traffic.max_attempts``,
default 1: the next cycle is the retry); what still fails is left out of
this sample only, so its rate is measured over the samples that have
it (:mod:`.rates`).  A sample that got nothing is skipped and logged: traffic
is never a reason for a cycle to fail.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from ..cluster.metadata import jittered_delays
from ..core.ports import AdminPort, Logger
from ..kafka.errors import transient
from ..kafka.offsets import TopicPart, end_offsets
from ..settings.traffic import TrafficSettings
from .rates import Measured, OffsetSample, add_sample, bytes_per_s, in_window, slopes
from .reads import GroupReads

#: per topic, bytes/s of each partition: the contract's ``cluster.traffic``
Traffic = Mapping[str, tuple[float, ...]]


def read_sample(
    admin: AdminPort,
    wanted: list[TopicPart],
    s: TrafficSettings,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
) -> tuple[OffsetSample, dict[TopicPart, str]]:
    """End offsets of ``wanted``, transient failures asked again (``traffic.max_attempts``); what failed, named.

    The sample is stamped at the middle of the first request, which answers every partition but the
    retried ones: the brokers read their offsets somewhere between sending and answering. Stamped at
    its start, a window whose last request answers 2 s slower than its first would count 2 s more of
    writing than its stamps span (a quarter too much over 8 s); at the middle, half of that is left.
    """
    ends: dict[TopicPart, int] = {}
    failed: dict[TopicPart, str] = {}
    taken_at: float | None = None
    delays = jittered_delays(s.max_attempts, s.backoff_initial_s, s.backoff_max_s)
    for attempt in range(s.max_attempts):
        sent = clock()
        got = end_offsets(admin, wanted, s.request_timeout_s)
        if taken_at is None:
            taken_at = (sent + clock()) / 2
        ends.update(got.ends)
        failed = got.failed
        wanted = sorted(tp for tp, name in failed.items() if transient(name))
        if not wanted or attempt == s.max_attempts - 1:
            break
        sleep(delays[attempt])
    assert taken_at is not None  # max_attempts >= 1 (the settings' bound)
    return OffsetSample(taken_at, ends), failed


@dataclass
class TrafficMeter:
    """Samples of the last ``traffic.window_s``, and the bytes/s they give.

    ``clock`` is a steady clock (``time.monotonic``): a wall clock set back
    must not make a rate negative or huge.
    """

    admin: AdminPort
    settings: TrafficSettings
    log: Logger
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    samples: tuple[OffsetSample, ...] = field(default=())
    #: the errors (and whether anything was read) last logged as a warning
    logged: tuple[tuple[str, ...], bool] = ((), True)
    #: each consumer group's committed offsets, for what it really reads (None: not measured)
    reads: GroupReads | None = None
    #: samples were found further apart than the window (said once as a warning, then at debug level)
    gap_logged: bool = False

    def sample(self, partitions: Mapping[str, int], leaderless: Collection[TopicPart] = ()) -> bool:
        """Read one sample of ``partitions`` (topic -> count) but the ``leaderless`` ones (the metadata
        names no leader: asking would only wait for a timeout); False (logged) when nothing was read."""
        skip = set(leaderless)
        wanted = [(t, p) for t, n in sorted(partitions.items()) for p in range(n) if (t, p) not in skip]
        if not wanted:
            return False
        sample, failed = read_sample(self.admin, wanted, self.settings, self.clock, self.sleep)
        names = tuple(sorted(set(failed.values())))
        if failed:
            log = self.log.warning if (names, bool(sample.ends)) != self.logged else self.log.debug
            log(
                "traffic sample incomplete; those partitions wait for the next one"
                if sample.ends
                else "traffic sample failed; skipped",
                failed=len(failed),
                errors=list(names[:5]),
                example=[f"{t}-{p}" for t, p in sorted(failed)[:5]],
            )
        self.logged = (names, bool(sample.ends))  # the same trouble again is logged at debug level
        if not sample.ends:  # what aged out of the window meanwhile goes: it measures nothing any more
            self.samples = in_window(self.samples, sample.taken_at, self.settings.window_s)
            return False
        if self.samples and sample.taken_at - self.samples[-1].taken_at > self.settings.window_s:
            self._too_far_apart(sample.taken_at - self.samples[-1].taken_at)
        self.samples = add_sample(self.samples, sample, self.settings.window_s)
        return True

    def _too_far_apart(self, gap_s: float) -> None:
        """Two samples in a row further apart than the window: no rate until two fall within one. With
        ``traffic.window_s`` below ``poll_interval_s`` (allowed when neither traffic key is set: the
        settings, ``samples_fit_the_window``) that is every sample, and nothing is ever measured."""
        log = self.log.debug if self.gap_logged else self.log.warning
        self.gap_logged = True
        log(
            "traffic samples further apart than traffic.window_s; nothing is measured until two fall in one "
            "window: keep traffic.window_s above poll_interval_s",
            gap_s=round(gap_s, 3),
            window_s=self.settings.window_s,
        )

    def traffic(self, partitions: Mapping[str, int]) -> Measured:
        """``cluster.traffic`` of the topics of ``partitions`` that the samples of the window measure, the
        window ending now: after a window of failed samples (the brokers silent), nothing is measured."""
        now = self.clock()
        got = slopes(in_window(self.samples, now, self.settings.window_s), self.settings.min_samples)
        rates = {tp: rate for tp, (rate, _) in got.items()}
        rows = bytes_per_s(rates, partitions, self.settings.bytes_per_record)
        taken_at = {t: max(got[t, p][1] for p in range(len(row))) for t, row in rows.items()}
        return Measured(rows, taken_at, self.clock)
