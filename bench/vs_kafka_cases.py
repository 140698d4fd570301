"""The instances of ``bench.bench_vs_kafka``: every assignor Kafka also has, from 3 members to the large benches.

Built from the existing benches' builders (``bench_sticky``, ``bench_range``, ``bench_streams``) and the
cliff's shape (``tests/assignor/test_sticky_work.py``), so a row here is the same instance as the row of
the bench it comes from.  A case is a contract document (what both sides read) built on demand: ``--only``
builds just what it runs, and the huge cases only with ``--huge``.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bench import bench_range, bench_sticky
from bench.bench_streams import make_instance
from rackplan.assignor.model import Cluster, ConsumerGroup
from rackplan.assignor.record import replace

#: A case's size class: ``huge`` runs only with ``--huge``; ``--quick`` keeps small and medium.
SIZES = ("small", "medium", "large", "huge")


@dataclass(frozen=True)
class Case:
    """One instance: ``build`` makes its contract document (consumer group or Streams app)."""

    name: str
    size: str
    build: Callable[[], dict[str, Any]]


def consumer_doc(cluster: Cluster, group: ConsumerGroup) -> dict[str, Any]:
    """The contract document of a model instance, as the oracle reads it."""
    from tests.kafka_oracle import document

    return document(cluster, group)


def shape(doc: dict[str, Any]) -> str:
    """``members x partitions`` (partitions of the topics someone subscribes to), or ``tasks x clients``."""
    topics = doc["cluster"]["topics"]
    if "streams_app" in doc:
        app = doc["streams_app"]
        tasks = sum(len(topics[s["source_topics"][0]]) for s in app["subtopologies"])
        return f"{tasks:,} tasks x {len(app['clients']):,} clients"
    members = doc["consumer_group"]["members"]
    subscribed = {t for m in members for t in m["topics"]}
    return f"{len(members):,} x {sum(len(topics[t]) for t in subscribed):,}"


def _group(assignor: str, n: int, cluster: Cluster, seed: int, **kw: Any) -> ConsumerGroup:
    return replace(bench_sticky.make_group(n, sorted(cluster.topics), seed, **kw), assignor=assignor)


def _fresh(assignor: str, n: int, topics: int, per_topic: int, rf: int, **kw: Any) -> dict[str, Any]:
    cluster = bench_sticky.make_cluster(topics, per_topic, rf, seed=1)
    return consumer_doc(cluster, _group(assignor, n, cluster, 2, **kw))


def _leaves(n: int, topics: int, per_topic: int, rf: int, **kw: Any) -> dict[str, Any]:
    """cooperative-sticky: the group after it converged (rackplan's rounds), then its middle member leaves."""
    cluster = bench_sticky.make_cluster(topics, per_topic, rf, seed=1)
    group = bench_sticky.converged(cluster, _group("cooperative-sticky", n, cluster, 2, **kw))
    return consumer_doc(cluster, bench_sticky.one_leaves(group))


def _joins(ranged: bool, seed: int) -> dict[str, Any]:
    """The cliff's shape: 23 members x 148 partitions, seven racks, unequal; the last member joins."""
    from tests.assignor.test_sticky_work import one_joins, seven_racks

    cluster, members = seven_racks(seed, 23, 148)
    if ranged:  # the same members, all at once
        return consumer_doc(cluster, ConsumerGroup("g", "range", tuple(members)))
    return consumer_doc(cluster, one_joins(cluster, members))


def _range_large(index: int) -> dict[str, Any]:
    """bench_range's shapes at 2,000 x 50,000, drawn from its seed in its order (the same instances)."""
    rng = random.Random(20_240_501)
    shapes = [(1, 1.0), (50, 1.0), (500, 0.1)]
    for i, (topics, subscribe) in enumerate(shapes):
        cluster = bench_range.cluster(topics, rng)
        group = bench_range.group(cluster, rng, subscribe)
        if i == index:
            return consumer_doc(cluster, group)
    raise IndexError(index)


#: bench_sticky's cases, built once (its converged groups take seconds) for all the rows that take one.
_sticky_cases = functools.cache(bench_sticky.cases)


def _sticky_large(name: str) -> Callable[[], dict[str, Any]]:
    def build() -> dict[str, Any]:
        (case,) = [c for c in _sticky_cases() if c.name == name]
        return consumer_doc(case.cluster, case.group)

    return build


def _streams(tasks: int, clients: int) -> Callable[[], dict[str, Any]]:
    """bench_streams' app: high-availability, one standby, rack-aware ``balance_subtopology``."""
    return lambda: make_instance(tasks, clients)


def cases() -> list[Case]:
    """Every case, small to huge; names start with the assignor."""
    huge_sticky = [
        "equal-50k fresh (rf 2, racks even)",
        "equal-50k (rf 1, one of 2,000 leaves)",
        "equal-50k (rf 1, rack-blind previous owners)",
        "unequal-20k fresh",
        "unequal-20k (one of 1,000 leaves)",
        "unequal-20k (rf 1, rack-blind previous owners)",
    ]
    return [
        Case("range, equal, fresh", "small", lambda: _fresh("range", 3, 2, 6, 2, even=True)),
        Case("range, equal, fresh", "small", lambda: _fresh("range", 10, 4, 25, 2)),
        Case("range, unequal, 7 racks", "small", lambda: _joins(True, 0)),
        Case("range, equal, fresh", "medium", lambda: _fresh("range", 200, 20, 250, 2)),
        Case(
            "range, unequal (3-10 of 40 topics)",
            "medium",
            lambda: _fresh("range", 200, 40, 50, 2, subs=(3, 10)),
        ),
        Case("range, bench_range: 1 topic", "large", lambda: _range_large(0)),
        Case("range, bench_range: 50 topics", "large", lambda: _range_large(1)),
        Case("range, bench_range: 500 topics, ~10% each", "large", lambda: _range_large(2)),
        Case(
            "cooperative-sticky, equal, fresh",
            "small",
            lambda: _fresh("cooperative-sticky", 3, 2, 6, 2, even=True),
        ),
        Case("cooperative-sticky, equal, one leaves", "small", lambda: _leaves(10, 4, 25, 2)),
        Case("cooperative-sticky, unequal, one leaves", "small", lambda: _leaves(10, 8, 12, 2, subs=(1, 5))),
        Case(
            "cooperative-sticky, unequal, 7 racks, one joins (the cliff)", "small", lambda: _joins(False, 0)
        ),
        Case("cooperative-sticky, equal, one leaves", "medium", lambda: _leaves(200, 20, 250, 1)),
        Case(
            "cooperative-sticky, unequal, one leaves", "medium", lambda: _leaves(200, 40, 50, 2, subs=(3, 10))
        ),
        Case(
            "cooperative-sticky, bench_sticky leave-2100 (rf 1)",
            "large",
            _sticky_large("leave-2100 (rf 1, one of 2,100 leaves)"),
        ),
        *[Case(f"cooperative-sticky, bench_sticky {n}", "huge", _sticky_large(n)) for n in huge_sticky],
        Case("streams HA, rack-aware", "small", _streams(12, 3)),
        Case("streams HA, rack-aware", "small", _streams(100, 10)),
        Case("streams HA, rack-aware", "medium", _streams(250, 25)),
        Case("streams HA, rack-aware", "large", _streams(500, 50)),
        Case("streams HA, rack-aware", "huge", _streams(1000, 100)),
    ]


def selected(all_cases: list[Case], quick: bool, huge: bool, only: str) -> list[Case]:
    """The cases a run takes: ``--quick`` small and medium, ``--huge`` adds the huge, ``--only`` filters names."""
    sizes = {"small", "medium"} if quick else {"small", "medium", "large"}
    if huge:
        sizes.add("huge")
    return [c for c in all_cases if c.size in sizes and only in c.name]
