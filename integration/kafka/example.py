"""What ``python -m integration.kafka up`` adds for a person at the keyboard: topic ``orders`` and the
commands to try the agent on it (integration/README.md, "By hand", shows the same and the
reassignment that changes its racks; integration/test_by_hand.py runs them)."""

from __future__ import annotations

import json
import shlex
import time
from collections.abc import Mapping
from typing import Any

EXAMPLE_TOPIC = "orders"
#: the group of the printed ``agent run``: one member per rack, reading ``orders``
EXAMPLE_GROUPS = [
    {
        "group_id": "payments",
        "assignor": "rack-optimal",
        "members": [{"member_id": f"m-{r}", "rack": f"az-{r}", "topics": [EXAMPLE_TOPIC]} for r in "abc"],
    }
]
#: the README's reassignment: orders-0 from brokers 1, 2 (az-a, az-b) to 3, 6 (az-c only), so whichever
#: member read it locally now reads it cross-rack and the plan must change
EXAMPLE_MOVE = {"version": 1, "partitions": [{"topic": EXAMPLE_TOPIC, "partition": 0, "replicas": [3, 6]}]}


def example_replicas(broker_ids: list[int], partitions: int = 6) -> list[list[int]]:
    """Partition p on the p-th and next broker by id: with the compose file's racks (1, 4: az-a;
    2, 5: az-b; 3, 6: az-c) every partition spans two racks, and orders-0 is on 1 and 2."""
    ids = sorted(broker_ids)
    return [[ids[p % len(ids)], ids[(p + 1) % len(ids)]] for p in range(partitions)]


def create_example_topic(bootstrap: str, broker_ids: list[int], timeout: float = 60.0) -> list[list[int]]:
    """Topic ``orders`` with :func:`example_replicas` (left as it is if it exists); its replicas."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    replicas = example_replicas(broker_ids)
    new = NewTopic(EXAMPLE_TOPIC, num_partitions=len(replicas), replica_assignment=replicas)
    future = admin.create_topics([new])[EXAMPLE_TOPIC]
    try:
        future.result(timeout=timeout)
    except KafkaException as e:
        if e.args[0].name() != "TOPIC_ALREADY_EXISTS":
            raise
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(EXAMPLE_TOPIC, timeout=10).topics.get(EXAMPLE_TOPIC)
        if (
            md is not None
            and md.error is None
            and md.partitions
            and all(p.leader >= 0 for p in md.partitions.values())
        ):
            return [list(md.partitions[p].replicas) for p in sorted(md.partitions)]
        if time.monotonic() > deadline:
            raise TimeoutError(f"topic {EXAMPLE_TOPIC} has no leaders after {timeout:.0f} s")
        time.sleep(0.2)


def agent_run_command(bootstrap: str) -> str:
    """The ``agent run`` to try on the launched cluster (settings from the environment only)."""
    groups = json.dumps(EXAMPLE_GROUPS, separators=(",", ":"))
    return (
        f"RACKPLAN_KAFKA__BOOTSTRAP_SERVERS={bootstrap} RACKPLAN_POLL_INTERVAL_S=5 "
        f"RACKPLAN_CONSUMER_GROUPS={shlex.quote(groups)} rackplan agent run"
    )


def try_lines(bootstrap: str, replicas: Mapping[int, Any] | list[list[int]]) -> list[str]:
    first = bootstrap.split(",")[0]
    return [
        f"topic {EXAMPLE_TOPIC}: replicas {json.dumps(replicas, separators=(',', ':'))}",
        "try the agent on it (integration/README.md, 'By hand'):",
        f"  {agent_run_command(bootstrap)}",
        "  curl -s http://127.0.0.1:9464/v1/plans",
        f"  kcat -b {first} -C -t _rackplan.plans -K '\\t' -e",
    ]
