"""Hypothesis strategies for contract instances, and the next-round input, shared by every assignor's tests."""

from __future__ import annotations

from hypothesis import strategies as st

from rackplan.assignor import contract
from rackplan.assignor.model import Cluster, ConsumerGroup, ConsumerPlan, Member, TopicPartition

RACKS = ("az-a", "az-b", "az-c", "az-d")


@st.composite
def clusters(
    draw: st.DrawFn,
    max_racks: int = 3,
    max_brokers: int = 6,
    max_topics: int = 3,
    max_partitions: int = 8,
    max_rf: int = 3,
    rackless_brokers: bool = True,
) -> Cluster:
    """A cluster with a few racks, some brokers maybe rack-less, and small topics."""
    n_racks = draw(st.integers(1, max_racks))
    n_brokers = draw(st.integers(1, max_brokers))
    rack_choices: list[str | None] = list(RACKS[:n_racks])
    if rackless_brokers:
        rack_choices.append(None)
    brokers = {b: draw(st.sampled_from(rack_choices)) for b in range(1, n_brokers + 1)}
    topics: dict[str, tuple[tuple[int, ...], ...]] = {}
    for t in range(draw(st.integers(1, max_topics))):
        rf = draw(st.integers(1, min(max_rf, n_brokers)))
        n_parts = draw(st.integers(1, max_partitions))
        parts = []
        for _ in range(n_parts):
            parts.append(
                tuple(draw(st.lists(st.integers(1, n_brokers), min_size=rf, max_size=rf, unique=True)))
            )
        topics[f"t{t}"] = tuple(parts)
    return Cluster(broker_racks=brokers, topics=topics)


#: Bytes/s values for traffic: zero, fractions that are not exact in binary, ties and a skew.
BYTES = st.sampled_from([0.0, 0.1, 0.3, 1.0, 2.5, 10.0, 10.0, 77.7, 1000.0])
#: Whole bytes/s, as an agent measuring whole bytes reports them.
WHOLE_BYTES = st.sampled_from([0.0, 1.0, 3.0, 10.0, 10.0, 250.0, 1000.0])


@st.composite
def traffic_for(draw: st.DrawFn, cluster: Cluster, whole: bool | None = None) -> Cluster:
    """``cluster`` with ``cluster.traffic``: per topic a list, a total spread evenly, or unknown.

    ``whole=True``: whole bytes/s in lists on every topic (``None`` draws either kind).
    """
    whole = draw(st.booleans()) if whole is None else whole
    values = WHOLE_BYTES if whole else BYTES
    traffic: dict[str, tuple[float, ...]] = {}
    for t, parts in cluster.topics.items():
        kind = "list" if whole else draw(st.sampled_from(["list", "list", "total", "unknown"]))
        if kind == "list":
            traffic[t] = tuple(draw(st.lists(values, min_size=len(parts), max_size=len(parts))))
        elif kind == "total":
            traffic[t] = (draw(values) / len(parts),) * len(parts) if parts else ()
    return Cluster(broker_racks=cluster.broker_racks, topics=cluster.topics, traffic=traffic)


@st.composite
def consumer_groups(
    draw: st.DrawFn,
    cluster: Cluster,
    assignor: str,
    max_members: int = 6,
    equal_subscriptions: bool | None = None,
    with_owned: bool = True,
    rackless_members: bool = True,
) -> ConsumerGroup:
    """A group over ``cluster``; ``equal_subscriptions=None`` draws either kind.

    Owned partitions, when drawn, are a plausible previous assignment: each
    partition claimed by at most one member (generation conflicts are tested
    separately), some of them no longer subscribed.
    """
    topics = sorted(cluster.topics)
    n = draw(st.integers(1, max_members))
    equal = draw(st.booleans()) if equal_subscriptions is None else equal_subscriptions
    rack_choices: list[str | None] = [*cluster.racks, "az-z"]  # az-z: a rack with no broker
    if rackless_members:
        rack_choices.append(None)
    shared = tuple(draw(st.lists(st.sampled_from(topics), min_size=1, unique=True)))
    subs = [
        shared if equal else tuple(draw(st.lists(st.sampled_from(topics), min_size=1, unique=True)))
        for _ in range(n)
    ]
    owned: list[list[TopicPartition]] = [[] for _ in range(n)]
    if with_owned and draw(st.booleans()):
        for t in topics:
            for p in range(len(cluster.topics[t])):
                who = draw(st.integers(-1, n - 1))
                if who >= 0:
                    owned[who].append((t, p))
    members = tuple(
        Member(
            member_id=f"m-{i:02d}",
            rack=draw(st.sampled_from(rack_choices)),
            topics=tuple(sorted(set(subs[i]))),
            owned=tuple(owned[i]),
            generation=1 if owned[i] else -1,
        )
        for i in range(n)
    )
    return ConsumerGroup(group_id="g", assignor=assignor, members=members)


def follow_up(group: ConsumerGroup, plan: ConsumerPlan) -> ConsumerGroup:
    """The next round: each member owns exactly what it was assigned, one generation later."""
    return contract.follow_up(
        group, plan.assignment, max((m.generation for m in group.members), default=-1) + 1
    )
