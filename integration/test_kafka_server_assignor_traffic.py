"""A KIP-848 group on rackplan's broker assignor weighs the agent's traffic feed (issue 27 §2, §4).

Six partitions with one replica each, four in az-a and one each in az-b and az-c; six confluent-kafka
consumers (``group.protocol=consumer``, ``group.remote.assignor=rackplan``), two per rack. Balanced
(one partition each), two az-a partitions must be read from another rack. Producers write 200-byte
records at 300, 3, 300, 3, 30 and 30 records/s; the agent (traffic window 4 s) measures them and
publishes its feed to ``_rackplan.traffic``, which the brokers' ``RackplanServerAssignor`` reads. The
group's assignment then reads exactly the two light az-a partitions (1 and 3) across racks: the fewest
cross-rack bytes/s any balanced assignment has (1,200 bytes/s). With the agent's feed sent elsewhere (the
plugin weighs nothing) the same test read partitions 2 and 3 across racks, 60,600 bytes/s, and failed.
No partition is ever owned twice (every callback in one ledger). Waits on conditions only (the sixth
member joins once five hold their targets, so the group's final assignment comes well after the
brokers read the feed); about 36 s after the cluster is up.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from integration.kafka.cluster import CLIENTS_JAR

from .conftest import RunningAgent, Target
from .e2e import Ledger, wait_until
from .test_kafka_operations import create
from .test_kafka_server_assignor import Member, reconciled
from .test_kafka_traffic import RECORD, Producing

pytestmark = pytest.mark.skipif(not CLIENTS_JAR.exists(), reason=f"{CLIENTS_JAR} missing: run `make clients`")

#: the topic the brokers' plugin reads (its default rackplan.traffic.topic)
FEED = "_rackplan.traffic"
REPLICAS = [[1], [4], [1], [4], [2], [3]]  # racks az-a, az-a, az-a, az-a, az-b, az-c
RACK_OF_PARTITION = ["az-a", "az-a", "az-a", "az-a", "az-b", "az-c"]
RATES = {0: 300.0, 1: 3.0, 2: 300.0, 3: 3.0, 4: 30.0, 5: 30.0}


def feed_has(bootstrap: str, topic: str) -> bool:
    """The feed topic holds a record for ``topic`` (read from the beginning, as the plugin reads it)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rackplan-reader", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(FEED, 0, 0)])
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error() is None and msg.key() == f"traffic/{topic}".encode() and msg.value():
                return True
        return False
    finally:
        c.close()


def settled(bootstrap: str, group: str, members: int) -> dict[str, list[tuple[str, int]]] | None:
    """Every member holds its target, each partition once (None until then)."""
    now = reconciled(bootstrap, group)
    owned = [tp for parts in (now or {}).values() for tp in parts]
    if now is None or len(now) != members or len(owned) != len(REPLICAS) or len(set(owned)) != len(owned):
        return None
    return now


def test_the_broker_assignor_reads_the_light_partitions_across_racks(
    real: Target, run_agent: Any, e2e_report: Any
) -> None:
    topic = create(real, "st-orders", REPLICAS)
    producing = Producing(real.bootstrap, topic, RATES)
    measured: dict[str, Any] = {"group_id": real.name("st-measured"), "assignor": "rack-optimal"}
    measured["members"] = [{"member_id": "m-a", "rack": "az-a", "topics": [topic]}]
    traffic = {"window_s": 4.0, "record_bytes": RECORD, "request_timeout_s": 10}
    running: RunningAgent = run_agent(
        real.agent_settings([measured], {"traffic": traffic, "traffic_topic": FEED})
    )
    ledger = Ledger()
    racks = {f"st-{r}{i}": f"az-{r}" for r in "abc" for i in (1, 2)}
    group = real.name("st-rackplan")
    members: list[Member] = []
    try:
        # The feed is made once the agent has started (its thread may not have yet when run_agent returns).
        def fed(_r: Any) -> bool:
            made = running.agent.io.traffic_feed
            return made is not None and topic in made.published

        running.wait_for(fed, timeout=60)
        feed = running.agent.io.traffic_feed
        assert feed is not None
        wait_until(lambda: feed_has(real.bootstrap, topic), 30, "the feed record on the topic", step=0.5)
        names = sorted(racks)
        # five first; the sixth joins once they hold their targets, so the group's final assignment is
        # made well after the brokers' readers (each second while the feed was missing) read the feed
        for n in names[:-1]:
            members.append(Member(real.bootstrap, group, n, racks[n], topic, "rackplan", ledger))
        wait_until(
            lambda: settled(real.bootstrap, group, 5) is not None, 60, "five members settled", step=0.5
        )
        members.append(Member(real.bootstrap, group, names[-1], racks[names[-1]], topic, "rackplan", ledger))
        final: dict[str, list[tuple[str, int]]] = {}

        def crossing_settled() -> bool:
            now = settled(real.bootstrap, group, 6)
            if now is None or sorted(len(p) for p in now.values()) != [1] * 6:
                return False
            final.clear()
            final.update(now)
            return True

        wait_until(crossing_settled, 60, "six members holding one partition each", step=0.5)
        crossing = sorted(
            p for m, parts in final.items() for _, p in parts if RACK_OF_PARTITION[p] != racks[m]
        )
        e2e_report(
            assignment={m: [p for _, p in parts] for m, parts in sorted(final.items())},
            crossing=crossing,
            cross_rack_bytes_per_s=sum(RATES[p] * RECORD for p in crossing),
            least=(RATES[1] + RATES[3]) * RECORD,
            lost_by_fencing=ledger.lost(),
        )
        assert crossing == [1, 3], f"the light az-a partitions cross, not {crossing}: {final}"
        assert ledger.overlaps(excuse_lost=True) == []
    finally:
        for m in members:
            m.stop()
        producing.close()
