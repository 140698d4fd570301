"""Offset samples -> records/s -> bytes/s: exact on steady producers, never negative, restarts and gaps handled."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rackplan.agent.traffic.rates import (
    KEPT_PER_WINDOW,
    OffsetSample,
    add_sample,
    bytes_per_s,
    in_window,
    record_rates,
)

TP = ("orders", 0)


def samples_of(points: list[tuple[float, int | None]], tp: tuple[str, int] = TP) -> list[OffsetSample]:
    """One sample per point; None: the partition is missing from that sample (its ListOffsets failed)."""
    return [OffsetSample(t, {} if end is None else {tp: end}) for t, end in points]


@settings(max_examples=200, deadline=None)
@given(
    rate=st.integers(0, 10**6),
    base=st.integers(0, 10**12),
    times=st.lists(st.integers(0, 10**5), min_size=2, max_size=30, unique=True),
    missing=st.sets(st.integers(0, 29)),
)
def test_a_steady_producer_gives_its_rate_exactly(
    rate: int, base: int, times: list[int], missing: set[int]
) -> None:
    """Offsets growing ``rate`` per second, whatever samples are missing: the rate, exactly."""
    times.sort()
    points: list[tuple[float, int | None]] = [
        (float(t), None if i in missing else base + rate * t) for i, t in enumerate(times)
    ]
    present = [p for p in points if p[1] is not None]
    rates = record_rates(samples_of(points))
    if len(present) >= 2:
        assert rates[TP] == rate
    else:
        assert TP not in rates


@st.composite
def monotone_with_resets(draw: st.DrawFn) -> list[tuple[float, int | None]]:
    """Samples of one partition: growing offsets, sometimes recreated (back to a lower offset), sometimes missing."""
    n = draw(st.integers(1, 25))
    t = 0.0
    end = draw(st.integers(0, 10**9))
    points: list[tuple[float, int | None]] = []
    for i in range(n):
        t += draw(st.floats(0.001, 1000.0))
        if draw(st.integers(0, 3)) == 0:
            end = draw(st.integers(0, end))  # recreated
        else:
            end += draw(st.integers(0, 10**6))
        points.append((t, None if i and draw(st.integers(0, 4)) == 0 else end))
    return points


@settings(max_examples=300, deadline=None)
@given(monotone_with_resets(), st.integers(2, 5))
def test_rates_restart_with_the_partition_and_are_never_negative(
    points: list[tuple[float, int | None]], min_samples: int
) -> None:
    """Oracle: in the partition's last observed life (after the last offset seen going down), the sum of
    the per-interval deltas over the sum of the intervals."""
    seen = [(t, e) for t, e in points if e is not None]
    start = max((i for i in range(1, len(seen)) if seen[i][1] < seen[i - 1][1]), default=0)
    life = seen[start:]
    rates = record_rates(samples_of(points), min_samples)
    if len(life) < min_samples or life[-1][0] == life[0][0]:
        assert TP not in rates
        return
    deltas = sum(b[1] - a[1] for a, b in itertools.pairwise(life))
    dts = sum(b[0] - a[0] for a, b in itertools.pairwise(life))
    assert rates[TP] >= 0
    assert rates[TP] == pytest.approx(deltas / dts, rel=1e-9)


def test_a_size_drop_is_not_used_and_a_recreated_partition_is_not_negative() -> None:
    """Offsets 1000 -> 3000 (2/s), then the topic is recreated (offset 10), then 10 -> 110 in 10 s."""
    points: list[tuple[float, int | None]] = [(0, 1000), (1000, 3000), (1010, 10), (1020, 110)]
    assert record_rates(samples_of(points)) == {TP: 10.0}


def test_a_partition_appearing_waits_for_min_samples() -> None:
    other = ("orders", 1)
    samples = [
        OffsetSample(0, {TP: 0}),
        OffsetSample(10, {TP: 100}),
        OffsetSample(20, {TP: 200, other: 5}),
    ]
    assert record_rates(samples, 2) == {TP: 10.0}
    assert record_rates([*samples, OffsetSample(30, {TP: 300, other: 55})], 2) == {TP: 10.0, other: 5.0}
    assert record_rates(samples, 3) == {TP: 10.0}
    assert record_rates(samples, 4) == {}


@settings(max_examples=200, deadline=None)
@given(
    times=st.lists(st.floats(0, 10_000), min_size=1, max_size=30),
    now=st.floats(0, 10_000),
    window=st.floats(1, 5_000),
)
def test_in_window_keeps_exactly_the_recent_samples_in_order(
    times: list[float], now: float, window: float
) -> None:
    kept = in_window([OffsetSample(t, {}) for t in times], now, window)
    assert [s.taken_at for s in kept] == sorted(t for t in times if now - t <= window)


def test_one_burst_counts_for_its_share_of_the_window() -> None:
    """60,000 records in one 30 s poll of a 300 s window at an otherwise idle partition: 200 records/s, not 2,000."""
    ends = [0] * 10 + [60_000]
    samples = [OffsetSample(30.0 * i, {TP: e}) for i, e in enumerate(ends)]
    kept = in_window(samples, samples[-1].taken_at, 300)
    assert record_rates(kept) == {TP: 200.0}


def test_bytes_per_s_gives_only_fully_measured_topics() -> None:
    rates = {("a", 0): 1.0, ("a", 1): 10.0, ("b", 0): 3.0, ("c", 0): 0.0}
    sizes = {"a": 100.0, "b": 7.0, "c": 5.0}
    out = bytes_per_s(rates, {"a": 2, "b": 2, "c": 1, "d": 0}, sizes.__getitem__)
    assert out == {"a": (100.0, 1000.0), "c": (0.0,)}


@settings(max_examples=100, deadline=None)
@given(
    rate=st.integers(0, 10**4),
    gaps=st.lists(st.integers(1, 5000), min_size=1, max_size=400),
    window=st.floats(5.0, 500.0),
)
def test_the_kept_samples_are_bounded_and_a_steady_rate_stays_exact(
    rate: int, gaps: list[int], window: float
) -> None:
    """However short the poll interval (gaps in hundredths of a second): at most KEPT_PER_WINDOW + 2
    samples, all in the window, the newest kept; a steady producer's rate unchanged by the thinning."""
    kept: tuple[OffsetSample, ...] = ()
    ticks = 0
    for gap in gaps:
        ticks += gap
        t = ticks / 100
        kept = add_sample(kept, OffsetSample(t, {TP: rate * ticks}), window)
        assert len(kept) <= KEPT_PER_WINDOW + 2
        assert kept[-1].taken_at == t and all(t - s.taken_at <= window for s in kept)
    rates = record_rates(kept)
    if len(kept) >= 2:
        assert rates[TP] == pytest.approx(rate * 100, rel=1e-9)


@settings(max_examples=200, deadline=None)
@given(
    counts=st.dictionaries(st.sampled_from("abcd"), st.integers(0, 5), max_size=4),
    rated=st.dictionaries(
        st.tuples(st.sampled_from("abcde"), st.integers(0, 5)), st.floats(0, 1e6, allow_nan=False)
    ),
    unmeasured=st.one_of(st.none(), st.floats(0, 10, allow_nan=False)),
)
def test_bytes_per_s_against_a_per_partition_oracle(
    counts: dict[str, int], rated: dict[tuple[str, int], float], unmeasured: float | None
) -> None:
    """A topic is given when some partition has a rate and every other one has ``unmeasured`` to count
    (None: none may lack a rate); each figure is its records/s (or ``unmeasured``) x the topic's size."""
    size = {t: 10.0 * (i + 1) for i, t in enumerate("abcd")}
    got = bytes_per_s(rated, counts, size.__getitem__, unmeasured)
    for topic, n in counts.items():
        have = [(topic, p) in rated for p in range(n)]
        given_ = any(have) and (all(have) or unmeasured is not None)
        assert (topic in got) == given_, (topic, n)
        if given_:
            want = [rated.get((topic, p), unmeasured) for p in range(n)]
            assert got[topic] == tuple(float(r) * size[topic] for r in want if r is not None)
    assert set(got) <= set(counts)
