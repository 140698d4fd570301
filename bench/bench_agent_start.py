"""What the lease costs a single agent: time from start to its first published plan, lease on and off.

Run:  .venv/bin/python bench/bench_agent_start.py [--repeat 5] [--kafka]

``ha.enabled`` is on by default, even for one agent (a second agent of the
same settings stands by instead of publishing beside it).  The price is at
start-up: the agent joins the lease group and confirms the lease before its
first cycle.  This times an in-process agent (``rackplan.agent.runtime.loop.Agent``
on a thread) from construction to the first cycle that published a plan,
for one registered range group, with ``ha.enabled`` false and true, fresh
topic and group names each run.  Targets: librdkafka's mock cluster (always)
and, with ``--kafka``, the real six-broker Kafka cluster of the integration
suite (``group.initial.rebalance.delay.ms`` 0 there, as in docker-compose.yml;
stock brokers wait 3 s more on a group's first join).  Prints medians.
"""

from __future__ import annotations

import argparse
import queue
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rackplan.agent.core.logging import configure
from rackplan.agent.demo.run import topic_creator
from rackplan.agent.kafka.embedded import EmbeddedCluster
from rackplan.agent.kafka.topics import TopicSpec
from rackplan.agent.runtime.loop import Agent, CycleReport
from rackplan.agent.settings.sections import Settings

TOPIC = "orders"


def settings(bootstrap: str, leased: bool) -> Settings:
    """One range group of three members (one per rack) on :data:`TOPIC`; every name fresh."""
    run = uuid.uuid4().hex[:8]
    return Settings.model_validate(
        {
            "kafka": {"bootstrap_servers": bootstrap},
            "poll_interval_s": 0.2,
            "plan_topic": f"_bench.{run}.plans",
            "alerts_topic": f"_bench.{run}.alerts",
            "registrations_topic": f"_bench.{run}.registrations",
            "ha": {"enabled": leased, "lease_topic": f"_bench.{run}.lease", "group_id": f"bench-{run}"},
            "http": {"port": 0},
            "log": {"format": "json", "level": "error"},
            "consumer_groups": [
                {
                    "group_id": f"g-{run}",
                    "assignor": "range",
                    "members": [{"member_id": f"m-{r}", "rack": f"az-{r}", "topics": [TOPIC]} for r in "abc"],
                }
            ],
        }
    )


def time_to_first_plan(s: Settings, create: Callable[[list[TopicSpec]], None] | None) -> float:
    """Seconds from constructing the agent to the end of its first cycle that published a plan."""
    reports: queue.Queue[CycleReport] = queue.Queue()
    t0 = time.perf_counter()
    agent = Agent(s, create_missing_topics=create)
    agent.on_cycle = reports.put
    errors: list[BaseException] = []

    def run() -> None:
        try:
            agent.run()
        except BaseException as e:  # reported below, never swallowed
            errors.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        while True:
            if errors:
                raise RuntimeError(f"agent failed: {errors[0]!r}")
            try:
                r = reports.get(timeout=0.05)
            except queue.Empty:
                if time.perf_counter() - t0 > 120:
                    raise RuntimeError("no plan within 120 s") from None
                continue
            if r.published:
                return time.perf_counter() - t0
    finally:
        agent.stop.set()
        thread.join(60)


def measure(
    label: str, bootstrap: str, create: Callable[[list[TopicSpec]], None] | None, repeat: int
) -> dict[str, float]:
    medians: dict[str, float] = {}
    for leased in (False, True):
        times = [time_to_first_plan(settings(bootstrap, leased), create) for _ in range(repeat)]
        medians["on" if leased else "off"] = statistics.median(times)
        print(
            f"{label:<26} lease {'on ' if leased else 'off'}  median {statistics.median(times):6.2f} s  "
            f"(min {min(times):.2f}, max {max(times):.2f}, n={repeat})",
            flush=True,
        )
    print(f"{label:<26} lease on / off: {medians['on'] / medians['off']:.2f}x", flush=True)
    return medians


def create_topic(bootstrap: str, name: str, partitions: int, replication_factor: int) -> None:
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, replication_factor)])[name].result(timeout=60)
    deadline = time.monotonic() + 60
    while name not in admin.list_topics(timeout=10).topics:
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {name} never appeared")
        time.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--kafka", action="store_true", help="also on the real six-broker cluster (make kafka)")
    args = ap.parse_args(argv)
    configure("json", "error", stream=sys.stderr)
    with EmbeddedCluster(brokers_per_rack=2, racks=3) as mock:
        mock.create_topic(TOPIC, 6, 2)
        measure("embedded (librdkafka mock)", mock.bootstrap_servers, topic_creator(mock), args.repeat)
    if args.kafka:
        from integration.kafka.cluster import KafkaCluster

        cluster = KafkaCluster()
        try:
            print(cluster.start().line(), flush=True)
            create_topic(cluster.bootstrap, TOPIC, 6, 2)
            measure("real Kafka, 6 brokers", cluster.bootstrap, None, args.repeat)
        finally:
            cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
