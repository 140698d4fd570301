"""Stand-ins for the AdminClient's description objects, for tests and benchmarks without a broker."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any


@dataclass
class Node:
    id: int
    rack: str | None = None


@dataclass
class Part:
    id: int
    leader: Node | None
    replicas: list[Node]
    #: in-sync replicas: all of them unless a test says otherwise
    isr: list[Node] | None = None

    def __post_init__(self) -> None:
        if self.isr is None:
            self.isr = list(self.replicas)


@dataclass
class Desc:
    partitions: list[Part]


def done(v: Any) -> Future[Any]:
    """A future that already holds ``v``, as the AdminClient's calls return."""
    f: Future[Any] = Future()
    f.set_result(v)
    return f


@dataclass
class PartitionMeta:
    """confluent-kafka's PartitionMetadata: what a Metadata request says of one partition."""

    id: int
    leader: int
    replicas: list[int]
    isrs: list[int]
    error: Any = None


@dataclass
class TopicMeta:
    partitions: dict[int, PartitionMeta]
    error: Any = None


@dataclass
class ClusterMeta:
    """confluent-kafka's ClusterMetadata, as ``list_topics`` returns it."""

    topics: dict[str, TopicMeta]
    brokers: dict[int, Any]


def cluster_metadata(
    topics: dict[str, list[list[int]]], brokers: Any, errors: dict[str, Any] | None = None
) -> ClusterMeta:
    """Metadata of ``topics`` (replica lists, leader first, all in sync) with ``brokers`` live."""
    out = {
        t: TopicMeta({i: PartitionMeta(i, r[0] if r else -1, list(r), list(r)) for i, r in enumerate(reps)})
        for t, reps in topics.items()
    }
    for t, err in (errors or {}).items():
        out[t] = TopicMeta({}, err)
    return ClusterMeta(out, dict.fromkeys(brokers))
