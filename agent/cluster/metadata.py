"""Cluster metadata: one complete, immutable snapshot per poll, or an error.

A snapshot holds only what plans depend on: brokers with racks, and per
topic the replica list, leader and in-sync count of every partition.  It is
built from one Metadata request (replicas, leaders, ISRs: what every client
asks, answered by any broker) and, only for brokers whose rack is not known
yet, DescribeCluster.  Any failure makes the whole poll fail: a plan computed from half the topics
would move partitions for no reason, so a partial snapshot never exists.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from rackplan.assignor.model import Cluster

from ..core.errors import AgentError
from ..core.ports import AdminPort
from ..kafka.errors import error_name
from ..kafka.timeouts import operation_timeout_s, result_timeout_s
from ..settings.sections import MetadataSettings

NO_LEADER = -1


class MetadataError(AgentError, RuntimeError):
    """The cluster could not be described completely this time."""


@dataclass(frozen=True, slots=True)
class TopicState:
    """Replica lists and leaders of one topic's partitions, in partition order."""

    replicas: tuple[tuple[int, ...], ...]
    leaders: tuple[int, ...]
    #: partitions with a replica outside the ISR (catching up, offline, or added by a reassignment in flight)
    syncing: frozenset[int] = field(default=frozenset(), compare=False)
    #: equal states have equal fingerprints: the cheap first test of a diff
    fingerprint: int = field(init=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.replicas) != len(self.leaders):
            raise ValueError("replicas and leaders must have one entry per partition")
        # Hashes of tuples of ints do not depend on PYTHONHASHSEED.
        object.__setattr__(self, "fingerprint", hash((self.replicas, self.leaders)))


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Brokers (id -> rack, None when the broker reports none) and topics, at one instant."""

    brokers: Mapping[int, str | None]
    topics: Mapping[str, TopicState]
    taken_at: float = 0.0
    #: Kafka's cluster id, as the Metadata response says (None: the brokers did not say)
    cluster_id: str | None = field(default=None, compare=False)
    #: every broker id some replica names, live or not
    replica_brokers: frozenset[int] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        ids: set[int] = set()
        for state in self.topics.values():
            for replicas in state.replicas:
                ids.update(replicas)
        object.__setattr__(self, "replica_brokers", frozenset(ids))

    def partition_count(self) -> int:
        return sum(len(s.replicas) for s in self.topics.values())

    def resolve_racks(self, known: Mapping[int, str]) -> dict[int, str | None]:
        """Rack of every broker named here; a broker reporting no rack keeps its last known one.

        A broker that restarts, or is offline while still holding replicas,
        reports no rack for a while: that is unknown, not a change.
        """
        out: dict[int, str | None] = {}
        for b in sorted(self.replica_brokers.union(self.brokers)):
            rack = self.brokers.get(b)
            out[b] = rack if rack is not None else known.get(b)
        return out

    def to_cluster(self, racks: Mapping[int, str | None], topics: Iterable[str] | None = None) -> Cluster:
        """The assignor's model of this snapshot, restricted to ``topics`` when given."""
        names = sorted(self.topics) if topics is None else sorted(t for t in set(topics) if t in self.topics)
        return Cluster(
            broker_racks={b: racks.get(b) for b in sorted(self.replica_brokers.union(self.brokers))},
            topics={t: self.topics[t].replicas for t in names},
        )


def known_racks(previous: Mapping[int, str], snapshot: Snapshot) -> dict[int, str]:
    """Last known rack of every broker, updated with what this snapshot reports."""
    out = dict(previous)
    for b, rack in snapshot.brokers.items():
        if rack is not None:
            out[b] = rack
    return out


def fetch_snapshot(
    admin: AdminPort,
    settings: MetadataSettings,
    exclude: frozenset[str] = frozenset(),
    now: Callable[[], float] = time.time,
    rack_cache: dict[int, str | None] | None = None,
) -> Snapshot:
    """One attempt at a complete snapshot; ``exclude``: topics not watched.

    Replicas, leaders and in-sync replicas come from one Metadata request
    (``list_topics``): the path every Kafka client uses all the time, answered
    by any broker.  The Admin API's DescribeTopics and DescribeCluster are not
    used per poll: they wait for a controller that may be the broker just
    killed, and librdkafka 2.16 can abort the process when such a request
    meets a broker going down (librdkafka#4605, an assertion in
    ``rd_kafka_enq_once_del_source_return``).  Racks (absent from Metadata
    responses here) come from DescribeCluster only for broker ids not yet in
    ``rack_cache``, which the caller keeps across polls; without a cache every
    poll asks.
    """
    timeout = settings.request_timeout_s
    try:
        md = admin.list_topics(timeout=timeout)
    except Exception as e:
        raise MetadataError(f"metadata request failed: {e}") from e
    topics: dict[str, TopicState] = {}
    for name in sorted(md.topics):
        if name in exclude or any(name.startswith(p) for p in settings.exclude_prefixes):
            continue
        tmd = md.topics[name]
        if tmd.error is not None:
            if error_name(tmd.error) == "UNKNOWN_TOPIC_OR_PART":
                continue  # deleted since the listing: gone, not missing
            raise MetadataError(f"topic {name!r}: {tmd.error}")
        parts = tmd.partitions
        ids = sorted(parts)
        if ids != list(range(len(ids))):
            raise MetadataError(f"topic {name!r}: partition ids are not 0..n-1")
        # List comprehensions, not generators: this runs for every partition of every poll.
        pms = [parts[i] for i in ids]
        replicas = tuple([tuple(pm.replicas) for pm in pms])
        topics[name] = TopicState(
            replicas=replicas,
            leaders=tuple([pm.leader if pm.leader >= 0 else NO_LEADER for pm in pms]),
            syncing=frozenset([i for i, pm in enumerate(pms) if len(pm.isrs) < len(replicas[i])]),
        )
    live = set(md.brokers)
    brokers = _broker_racks(admin, timeout, live, rack_cache)
    cluster_id = getattr(md, "cluster_id", None)
    return Snapshot(
        brokers=brokers, topics=topics, taken_at=now(), cluster_id=str(cluster_id) if cluster_id else None
    )


def _broker_racks(
    admin: AdminPort, timeout: float, live: set[int], cache: dict[int, str | None] | None
) -> dict[int, str | None]:
    """Rack of every live broker: from the cache, else DescribeCluster (which then fills the cache).

    A DescribeCluster that fails leaves the new brokers' racks unknown (None)
    for this poll; the caller keeps each broker's last known rack.  A broker
    that leaves the metadata is forgotten, so its rack is asked again when it
    returns (a rack changes only with a restart); the caller also empties the
    cache every ``metadata.rack_refresh_s`` for restarts shorter than a poll.
    """
    if cache is not None and live:
        for gone in [b for b in cache if b not in live]:
            del cache[gone]  # back from a restart, it may bring another broker.rack: ask again then
    if cache is not None and live and live <= cache.keys():
        return {b: cache[b] for b in sorted(live)}
    try:
        described = admin.describe_cluster(
            include_authorized_operations=False, request_timeout=operation_timeout_s(timeout)
        )
        nodes = described.result(timeout=result_timeout_s(timeout)).nodes
    except Exception as e:
        if not live:
            raise MetadataError(f"describe cluster failed: {e}") from e
        known = cache or {}
        return {b: known.get(b) for b in sorted(live)}
    racks = {n.id: (n.rack or None) for n in nodes}
    if not racks:
        raise MetadataError("the cluster reported no brokers")
    if cache is not None:
        cache.update(racks)
    return racks if not live else {b: racks.get(b) for b in sorted(live | set(racks))}


def jittered_delays(
    attempts: int, initial_s: float, max_s: float, rng: Callable[[], float] = random.random
) -> list[float]:
    """Sleep before each of ``attempts - 1`` retries: exponential, capped, jittered to 50-100 % of the cap.

    Shared by every retry loop of the agent (metadata polls, the webhook), so
    clients restarted together do not retry in lockstep.
    """
    out = []
    for attempt in range(attempts - 1):
        cap = min(max_s, initial_s * (2**attempt))
        out.append(cap * (0.5 + 0.5 * rng()))
    return out


def backoff_delays(settings: MetadataSettings, rng: Callable[[], float] = random.random) -> list[float]:
    """Sleep before each retry of a metadata poll."""
    return jittered_delays(settings.max_attempts, settings.backoff_initial_s, settings.backoff_max_s, rng)


def poll_snapshot(
    admin: AdminPort,
    settings: MetadataSettings,
    *,
    sleep: Callable[[float], None] = time.sleep,
    rng: Callable[[], float] = random.random,
    on_retry: Callable[[int, float, MetadataError], None] | None = None,
    exclude: frozenset[str] = frozenset(),
    fetch: Callable[[AdminPort, MetadataSettings, frozenset[str]], Snapshot] = fetch_snapshot,
) -> Snapshot:
    """A complete snapshot, retrying with backoff and jitter; raises the last error when all fail."""
    delays = backoff_delays(settings, rng)
    for attempt in range(settings.max_attempts):
        try:
            return fetch(admin, settings, exclude)
        except MetadataError as e:
            if attempt == len(delays):
                raise
            if on_retry is not None:
                on_retry(attempt + 1, delays[attempt], e)
            sleep(delays[attempt])
    raise AssertionError("unreachable")  # pragma: no cover
