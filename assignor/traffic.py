"""Traffic (the contract's optional section): bytes/s per partition, as figures and as weights.

One place for what every assignor reports and every traffic-aware rule
weighs, so the consumer assignors, Streams and the tests cannot disagree:

- :func:`consumer_traffic_stats`, :func:`streams_traffic_stats`: the contract's
  additive ``stats`` when ``cluster.traffic`` is present (unknown traffic
  counts 0 there);
- :func:`group_weights`, :func:`default_floor`, :func:`load_weights`: what a
  partition *weighs* for ``objective: bytes`` and ``balance: bytes`` (unknown
  traffic weighs the mean of the group's known partitions, 1 when none is known);
- :func:`exact_integers`: floats as integers in one exact common scale, for the
  integer min-cost flows (no rounding, so "optimal" stays exact);
- :func:`streams_counted_bytes`: the most a Streams app's traffic stats can add
  up to, which the input check keeps within a float.

Pure: values in, values out.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Mapping, Sequence

from .model import Cluster, ConsumerGroup, StreamsApp, TopicPartition, is_cross_rack

#: Per topic, one weight per partition.
Weights = Mapping[str, Sequence[float]]


def known_bytes(cluster: Cluster, topic: str, partition: int) -> float | None:
    """The partition's bytes/s, or None when the instance does not say."""
    row = None if cluster.traffic is None else cluster.traffic.get(topic)
    return None if row is None else row[partition]


def group_weights(cluster: Cluster, topics: Iterable[str]) -> dict[str, tuple[float, ...]]:
    """Bytes/s of every partition of ``topics``, unknown ones weighing the mean of the known ones.

    The mean is over the known partitions of these topics (the group's), and 1
    when none is known: with no traffic at all every partition weighs the same.
    """
    traffic = cluster.traffic or {}
    names = sorted(set(topics))
    known = [x for t in names if t in traffic for x in traffic[t]]
    mean = math.fsum(known) / len(known) if known else 1.0
    return {t: tuple(traffic[t]) if t in traffic else (mean,) * len(cluster.topics[t]) for t in names}


def default_floor(weights: Weights) -> float:
    """``balance_floor``'s default: 1% of the mean weight of the partitions, 1 when that mean is 0."""
    values = [x for row in weights.values() for x in row]
    mean = math.fsum(values) / len(values) if values else 0.0
    return 0.01 * mean if mean > 0 else 1.0


def load_weights(cluster: Cluster, group: ConsumerGroup) -> dict[str, tuple[float, ...]]:
    """The contract's w(p) for ``balance: bytes``: bytes/s (unknown: the mean) plus ``balance_floor``."""
    weights = group_weights(cluster, (t for m in group.members for t in m.topics))
    floor = default_floor(weights) if group.balance_floor is None else group.balance_floor
    return {t: tuple(x + floor for x in row) for t, row in weights.items()}


def exact_load_weights(cluster: Cluster, group: ConsumerGroup, parts: Sequence[TopicPartition]) -> list[int]:
    """:func:`load_weights` of ``parts`` as exact integers in one scale: bytes/s and floor added exactly.

    The floats' sum ``x + floor`` rounds (a floor of ``1e17`` swallows a bytes/s of 1), and the load
    rule compares sums of weights; scaling both terms first (:func:`exact_integers`) keeps the rule the
    contract's, in exact arithmetic, at every magnitude.
    """
    weights = group_weights(cluster, (t for m in group.members for t in m.topics))
    floor = default_floor(weights) if group.balance_floor is None else group.balance_floor
    scaled, _ = exact_integers([*(weights[t][p] for t, p in parts), floor])
    extra = scaled.pop()
    return [w + extra for w in scaled]


def exact_integers(values: Sequence[float]) -> tuple[list[int], int]:
    """``values`` times one power of two ``2**k``, as exact integers, and ``k``.

    Every finite float is ``n / 2**e``; scaling all by the largest ``2**e``
    keeps every sum and comparison exact, so an integer min-cost flow over
    these costs is exactly optimal for the floats (Python integers do not
    overflow; ``0.1`` needs ``2**55``).
    """
    ratios = [float(v).as_integer_ratio() for v in values]
    k = max((d.bit_length() - 1 for _, d in ratios), default=0)
    return [n << (k - (d.bit_length() - 1)) for n, d in ratios], k


def scaled_down(value: int, k: int) -> float:
    """``value / 2**k`` as the largest float not above it: a lower bound stays a lower bound.

    Division rounds to the nearest float, which can be one step above the exact ratio (a bound
    of ``0.1 + 0.3`` in the scale of :func:`exact_integers` came back as ``0.4``, above the exact
    ``0.39999999999999997`` it bounds); compared in integers, so exact for any size. A ratio beyond
    the largest float (a bound in weights where unknown traffic weighs the mean of ``1e308``s) is
    that largest float: still not above it, where the division raised ``OverflowError``.
    """
    try:
        out = value / (1 << k)
    except OverflowError:
        return sys.float_info.max
    n, d = out.as_integer_ratio()
    if n << k > value * d:
        out = math.nextafter(out, -math.inf)
    return out


def consumer_traffic_stats(
    cluster: Cluster, group: ConsumerGroup, assignment: Mapping[str, Sequence[TopicPartition]]
) -> dict[str, float | int]:
    """``bytes_per_s``, ``cross_rack_bytes_per_s``, member max/min and ``partitions_without_traffic``.

    Over the assigned partitions only (withheld ones are nobody's); unknown
    traffic counts 0 in the sums and once in ``partitions_without_traffic``.
    Sums use :func:`math.fsum`, so they do not depend on the order of the plan.
    """
    traffic = cluster.traffic or {}
    racks = {m.member_id: m.rack for m in group.members}
    masks = cluster.masks
    loads: list[float] = []
    every: list[float] = []  # summed once: a sum of the rounded loads would depend on who holds what
    cross: list[float] = []
    unknown = 0
    for mid, parts in assignment.items():
        rack = racks.get(mid)
        bit = cluster.member_bit(rack)
        mine: list[float] = []
        for t, p in parts:
            row = traffic.get(t)
            if row is None:
                unknown += 1
                continue
            mine.append(row[p])
            if is_cross_rack(rack, bit, masks[t][p]):
                cross.append(row[p])
        loads.append(math.fsum(mine))
        every += mine
    return {
        "bytes_per_s": math.fsum(every),
        "cross_rack_bytes_per_s": math.fsum(cross),
        "max_member_bytes_per_s": max(loads, default=0.0),
        "min_member_bytes_per_s": min(loads, default=0.0),
        "partitions_without_traffic": unknown,
    }


def pairs_bytes(cluster: Cluster, pairs: Iterable[TopicPartition]) -> float:
    """The known bytes/s of topic partitions (unknown ones and topics the cluster lacks count 0)."""
    traffic = cluster.traffic or {}
    return math.fsum(traffic[t][p] for t, p in pairs if t in traffic and p < len(traffic[t]))


#: A rack group's probe: its rack (None: no rack) and its mask bit (see :func:`is_cross_rack`).
Probe = tuple[str | None, int]


def crossing_bytes(
    cluster: Cluster, probes: Sequence[Probe], tasks: Sequence[Sequence[TopicPartition]]
) -> tuple[tuple[float, ...], ...]:
    """Per task and probe, the known bytes/s of the task's partitions that cross for that rack."""
    traffic = cluster.traffic or {}
    masks = cluster.masks
    out = []
    for pairs in tasks:
        known = [(masks[t][p], traffic[t][p]) for t, p in pairs if t in traffic]
        out.append(
            tuple(math.fsum(b for m, b in known if is_cross_rack(rack, bit, m)) for rack, bit in probes)
        )
    return tuple(out)


def crossing_weights(
    cluster: Cluster, probes: Sequence[Probe], tasks: Sequence[Sequence[TopicPartition]]
) -> tuple[tuple[tuple[int, ...], ...], int]:
    """Per task and probe, the crossing partitions' bytes/s as exact integers, and their scale ``k``.

    The integers are bytes/s times ``2**k`` (:func:`exact_integers`).

    Unknown traffic weighs the mean of the known bytes/s of the app's
    partitions (1 when none is known, which makes every weight a count).
    """
    traffic = cluster.traffic or {}
    distinct = sorted({tp for pairs in tasks for tp in pairs})
    known = [traffic[t][p] for t, p in distinct if t in traffic]
    mean = math.fsum(known) / len(known) if known else 1.0
    values = [traffic[t][p] if t in traffic else mean for t, p in distinct]
    scaled, k = exact_integers(values)
    weight = dict(zip(distinct, scaled, strict=True))
    masks = cluster.masks
    return tuple(
        tuple(
            sum(weight[t, p] for t, p in pairs if is_cross_rack(rack, bit, masks[t][p]))
            for rack, bit in probes
        )
        for pairs in tasks
    ), k


def streams_counted_bytes(cluster: Cluster, app: StreamsApp) -> tuple[float, float]:
    """The most the app's two Streams traffic stats can add up to (``inf``: more than a float holds).

    The known bytes/s of every (task, topic partition) pair an active counts, and of every pair a
    standby counts times the standbys a task can have (``num_standby_replicas``, one client being the
    active's). A partition counts once per pair: a topic both a source and a changelog, or a source
    of two sub-topologies, counts twice, so these can pass the cluster's total when it does not.
    """
    traffic = cluster.traffic or {}
    active: list[float] = []
    logs: list[float] = []
    for s in app.subtopologies:
        n = app.partitions[s.id]
        for t in s.source_topics:
            active += traffic.get(t, ())[:n]
        for t in s.changelog_topics if s.stateful else ():
            logs += traffic.get(t, ())[:n]
    copies = max(0, min(app.num_standby_replicas, len(app.clients) - 1))
    return _fsum([*active, *logs]), _fsum(logs) * copies if copies else 0.0


def _fsum(values: Sequence[float]) -> float:
    """:func:`math.fsum`, ``inf`` where the sum is more than a float holds (fsum raises on the way)."""
    try:
        return math.fsum(values)
    except OverflowError:
        return math.inf


def streams_traffic_stats(active_cross_pairs: float, standby_cross_pairs: float) -> dict[str, float]:
    """The Streams stats of the contract's traffic section, from the bytes of the crossing pairs."""
    return {
        "active_cross_rack_bytes_per_s": active_cross_pairs,
        "standby_cross_rack_bytes_per_s": standby_cross_pairs,
    }
