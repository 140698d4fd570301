"""KIP-848 groups assigned by rackplan's broker-side assignor on its own (issue 27, part 2).

confluent-kafka (librdkafka) consumers with ``group.protocol=consumer`` and ``group.remote.assignor=rackplan``
on the real 4.4 cluster, whose brokers load ``RackplanServerAssignor`` (integration/kafka/cluster.py), with
no agent and no plan: the assignment is the plugin's own (RackStickyBalancer).

- The group settles balanced (4 partitions each) with no cross-rack partition, the least possible on this
  topic (each partition has replicas in two of the three racks, each rack has two members); a second group
  on the same topic with Kafka's ``uniform`` has cross-rack partitions (it ignores racks).
- A partition reassignment that changes a partition's replica racks (partition 0 to az-c only): the
  coordinator runs the assignor again by itself (KIP-1101; no agent, no member action) and an az-c member
  takes the partition.
- A counted stream through member churn (one leaves, a new one joins): every delivered message consumed
  (0 lost) and no partition owned by two members at any moment (every assignment callback in one ledger).
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from integration.kafka.cluster import CLIENTS_JAR
from rackplan.agent.kafka.timeouts import admin_client_config, operation_timeout_s, result_timeout_s

from .conftest import Target
from .e2e import CountedProducer, Ledger, wait_until
from .test_kafka_java_followers import COORDINATOR_MOVING, live_assignment
from .test_kafka_operations import create

pytestmark = pytest.mark.skipif(not CLIENTS_JAR.exists(), reason=f"{CLIENTS_JAR} missing: run `make clients`")

RACK_OF_BROKER = {1: "az-a", 2: "az-b", 3: "az-c", 4: "az-a", 5: "az-b", 6: "az-c"}
PARTITIONS = 24
#: partition p's replicas: brokers 1 + p % 3 and 1 + (p + 1) % 3, so racks p % 3 and (p + 1) % 3
REPLICAS = [[1 + p % 3, 1 + (p + 1) % 3] for p in range(PARTITIONS)]


class Member:
    """A KIP-848 consumer on its own thread: every callback and message goes into the shared ledger."""

    def __init__(
        self, bootstrap: str, group: str, name: str, rack: str, topic: str, assignor: str, ledger: Ledger
    ):
        self.name, self.rack, self.ledger = name, rack, ledger
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "client.id": name,
                "client.rack": rack,
                "group.protocol": "consumer",
                "group.remote.assignor": assignor,
                "auto.offset.reset": "earliest",
            }
        )
        self.consumer.subscribe(
            [topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._lost
        )
        self._stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _assigned(self, _c: Any, parts: list[Any]) -> None:
        self.ledger.assigned(self.name, [(tp.topic, tp.partition) for tp in parts])

    def _revoked(self, _c: Any, parts: list[Any]) -> None:
        self.ledger.revoked(self.name, [(tp.topic, tp.partition) for tp in parts])

    def _lost(self, _c: Any, parts: list[Any]) -> None:
        self.ledger.revoked(self.name, [(tp.topic, tp.partition) for tp in parts], how="lost")

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                msg = self.consumer.poll(0.1)
                if msg is not None and msg.error() is None:
                    self.ledger.consume(self.name, msg)
            self.consumer.close()  # leaves the group: the revocation callback runs first
        except BaseException as e:  # reported by the test
            self.error = e

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(30)
        assert not self.thread.is_alive(), f"{self.name} did not stop"
        if self.error is not None:
            raise self.error


def cross_rack(
    assignment: dict[str, list[tuple[str, int]]],
    rack_of: dict[str, str],
    replicas: list[list[int]] = REPLICAS,
) -> int:
    return sum(
        1
        for member, parts in assignment.items()
        for _, p in parts
        if rack_of[member] not in {RACK_OF_BROKER[b] for b in replicas[p]}
    )


def reconciled(bootstrap: str, group: str) -> dict[str, list[tuple[str, int]]] | None:
    """client id -> partitions when every member holds its target assignment (KIP-848: the coordinator's
    target is reached only after the old owners' revocations, heartbeats apart), else None.

    A member with an empty target does not count as reconciled: Kafka 4.4 batches assignments
    (``group.consumer.assignment.interval.ms``, 1 s) and runs them off the request path, so a member that
    just joined shows an empty target, and the earlier members their old ones, until a later heartbeat
    (5 s apart by default) triggers the next assignment. One CI run saw exactly that for over 3 s: the
    first member's 24 partitions as target, five empty members. Every test here has at least as many
    partitions as members, so any balanced target gives every member one."""
    admin = AdminClient(admin_client_config({"bootstrap.servers": bootstrap}, 20))
    try:
        desc = admin.describe_consumer_groups([group], request_timeout=operation_timeout_s(20))[group].result(
            timeout=result_timeout_s(20)
        )
    except KafkaException as e:
        # A describe that timed out (a loaded machine: one run saw 20 s pass at load 22 on 2 cores) says
        # nothing yet; ``settled``'s deadline bounds the wait.
        if e.args[0].retriable() or e.args[0].code() in COORDINATOR_MOVING | {KafkaError._TIMED_OUT}:
            return None
        raise
    out = {}
    for m in desc.members:
        now = sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions)
        target = m.target_assignment
        if target is None or not target.topic_partitions:
            return None
        if now != sorted((tp.topic, tp.partition) for tp in target.topic_partitions):
            return None
        out[m.client_id] = now
    return out


def settled(bootstrap: str, group: str, members: int) -> dict[str, list[tuple[str, int]]]:
    """The group's assignment once ``members`` members hold their targets, every partition once,
    unchanged for 3 s."""
    last: dict[str, list[tuple[str, int]]] | None = None
    since = time.monotonic()
    deadline = since + 90
    while True:
        now = reconciled(bootstrap, group)
        owned = [tp for parts in (now or {}).values() for tp in parts]
        full = now is not None and len(now) == members and len(owned) == PARTITIONS == len(set(owned))
        if not (full and now == last):
            since = time.monotonic()
        elif time.monotonic() - since >= 3.0:
            assert now is not None
            return now
        last = now
        assert time.monotonic() < deadline, f"{group} never settled: {live_assignment(bootstrap, group)}"
        time.sleep(0.5)


def test_kip848_group_assigned_by_rackplan_alone_is_local_balanced_and_loses_nothing(
    real: Target, e2e_report: Any
) -> None:
    topic = create(real, "sa-orders", REPLICAS)
    ledger = Ledger()
    racks = {f"sa-{r}{i}": f"az-{r}" for r in "abc" for i in (1, 2)}
    group = real.name("sa-rackplan")
    members = {
        n: Member(real.bootstrap, group, n, rack, topic, "rackplan", ledger) for n, rack in racks.items()
    }
    uniform_group = real.name("sa-uniform")
    uniform_ledger = Ledger()
    uniform = [
        Member(real.bootstrap, uniform_group, f"u-{n}", rack, topic, "uniform", uniform_ledger)
        for n, rack in racks.items()
    ]
    producer = CountedProducer(real.bootstrap, topic, PARTITIONS)
    try:
        producer.produce(500)
        ours = settled(real.bootstrap, group, len(racks))
        theirs = settled(real.bootstrap, uniform_group, len(racks))
        for m in uniform:
            m.stop()
        uniform.clear()
        ours_x = cross_rack(ours, racks)
        theirs_x = cross_rack(theirs, {f"u-{n}": r for n, r in racks.items()})
        counts = sorted(len(p) for p in ours.values())
        assert counts == [PARTITIONS // len(racks)] * len(racks), f"balanced: {ours}"
        assert ours_x == 0, f"rackplan: {ours_x} cross-rack partitions where none are needed: {ours}"
        assert theirs_x > 0, f"uniform ignores racks: {theirs}"

        # KIP-1101: new replica racks re-run the assignor on the broker, with no agent and no member action.
        c_members = {n for n, r in racks.items() if r == "az-c"}
        assert real.kafka is not None, "the launcher's cluster (reassignments are ours to make)"
        moved = [[3, 6], *REPLICAS[1:]]
        t0 = time.monotonic()
        real.kafka.reassign({(topic, 0): moved[0]})
        wait_until(
            lambda: any(
                (topic, 0) in parts
                for m, parts in live_assignment(real.bootstrap, group).items()
                if m in c_members
            ),
            60,
            "partition 0 moves to an az-c member",
            step=0.5,
        )
        replanned_s = time.monotonic() - t0
        after = settled(real.bootstrap, group, len(racks))
        assert cross_rack(after, racks, moved) == 0, after

        # Member churn under a counted stream: one member leaves, a new one joins.
        producer.start()
        time.sleep(2.0)
        members.pop("sa-a1").stop()
        time.sleep(3.0)
        members["sa-a3"] = Member(real.bootstrap, group, "sa-a3", "az-a", topic, "rackplan", ledger)
        time.sleep(5.0)
        producer.stop()
        racks_now = {n: racks.get(n, "az-a") for n in members}
        wait_until(
            lambda: not ledger.missing(producer.delivered), 60, "every delivered message consumed", step=0.5
        )
        final = settled(real.bootstrap, group, len(members))
        lost = len(ledger.missing(producer.delivered))
        twice = ledger.overlaps(excuse_lost=True)
        e2e_report(
            target="kafka",
            protocol="consumer(KIP-848)",
            assignor="rackplan (no plan)",
            members=len(racks),
            partitions=PARTITIONS,
            cross_rack_rackplan=ours_x,
            cross_rack_uniform=theirs_x,
            replanned_after_reassignment_s=f"{replanned_s:.1f}",
            messages=len(producer.delivered),
            lost=lost,
            owned_twice=len(twice),
            lost_by_fencing=ledger.lost(),
            cross_rack_after_churn=cross_rack(final, racks_now, moved),
        )
        assert lost == 0
        assert twice == [], twice
        assert cross_rack(final, racks_now, moved) == 0, final
    finally:
        for m in [*members.values(), *uniform]:
            with contextlib.suppress(Exception):
                m.stop()
