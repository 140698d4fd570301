"""The librdkafka mock cluster as tests start it: skipped where it cannot run, the agent's topics on demand.

One place for the set-up that several test files repeat (the embedded cluster made
or the test skipped, then the agent's own topics created the way a deployment's
operator or the agent itself would have).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

#: the agent's own topics (plans, alerts, registrations, the HA lease) under their default names
AGENT_TOPICS = ("_rackplan.plans", "_rackplan.alerts", "_rackplan.registrations", "_rackplan.lease")


@contextmanager
def embedded_cluster(racks: int = 3, brokers_per_rack: int = 1, agent_topics: bool = False) -> Iterator[Any]:
    """A running mock cluster of ``racks`` x ``brokers_per_rack`` brokers (racks ``az-a``, ``az-b``, ...), or
    the test skipped when confluent-kafka or its mock cluster is missing; ``agent_topics``: with
    :data:`AGENT_TOPICS` created (one partition each)."""
    embedded = pytest.importorskip(
        "rackplan.agent.kafka.embedded", reason="the embedded cluster needs confluent-kafka"
    )
    try:
        cluster = embedded.EmbeddedCluster(brokers_per_rack=brokers_per_rack, racks=racks)
    except embedded.EmbeddedClusterError as e:
        pytest.skip(f"librdkafka mock cluster unavailable: {e}")
    with cluster:
        if agent_topics:
            for name in AGENT_TOPICS:
                cluster.create_topic(name, 1, 1)
        yield cluster
