"""Synthetic fleets: deterministic snapshots for tests, benchmarks and trying the job out.

Each cluster has 3 racks, brokers spread over them, topics with rack-aware
replica lists (replicas on distinct racks where possible) and skewed traffic;
groups subscribe to one to three topics with members in every rack (a few
without ``client.rack``); some clusters also carry a Streams app.
"""

from __future__ import annotations

import random
from typing import Any

from rackplan.agent.cluster.archive import SCHEMA, FleetSnapshot, parse_snapshot

RACKS = ("az-a", "az-b", "az-c")


def cluster_document(
    index: int,
    groups: int,
    seed: int = 0,
    topics: int = 12,
    max_partitions: int = 24,
    max_members: int = 8,
    streams_apps: int = 0,
) -> dict[str, Any]:
    """One synthetic snapshot document (``cluster-NN``); the same arguments give the same document."""
    rng = random.Random(f"synthetic|{seed}|{index}")
    per_rack = rng.randint(2, 3)
    brokers = [{"id": i + 1, "rack": RACKS[i % len(RACKS)]} for i in range(per_rack * len(RACKS))]
    by_rack: dict[str, list[int]] = {
        r: [i + 1 for i in range(len(brokers)) if RACKS[i % len(RACKS)] == r] for r in RACKS
    }
    topic_docs: dict[str, list[list[int]]] = {}
    leaders: dict[str, list[int]] = {}
    traffic: dict[str, list[float | None]] = {}
    for t in range(topics):
        name = f"topic-{t:02d}"
        rf = rng.choice((1, 2, 2, 3))
        parts = []
        for _ in range(rng.randint(3, max_partitions)):
            racks = rng.sample(RACKS, rf)
            parts.append([rng.choice(by_rack[r]) for r in racks])
        topic_docs[name] = parts
        # Leaders usually the preferred (first) replica, sometimes moved.
        leaders[name] = [r[0] if rng.random() < 0.9 else r[-1] for r in parts]
        scale = rng.choice((1e3, 1e4, 1e5, 1e6))
        traffic[name] = [
            None if rng.random() < 0.05 else round(scale * rng.uniform(0.2, 2.0), 1) for _ in parts
        ]
    names = sorted(topic_docs)
    groups_doc = []
    for g in range(groups):
        subscribed = rng.sample(names, rng.randint(1, 3))
        members = []
        for m in range(rng.randint(1, max_members)):
            rack = None if rng.random() < 0.05 else rng.choice(RACKS)
            members.append({"member_id": f"m-{m:02d}", "rack": rack, "topics": sorted(subscribed)})
        entry: dict[str, Any] = {
            "group_id": f"group-{g:03d}",
            "assignor": rng.choice(("range", "cooperative-sticky", "cooperative-sticky", "rack-optimal")),
            "members": members,
        }
        if rng.random() < 0.2:
            entry["fetch_mode"] = "leader"
        groups_doc.append(entry)
    apps = []
    for a in range(streams_apps):
        source = rng.choice(names)
        apps.append(
            {
                "application_id": f"app-{a:02d}",
                "subtopologies": [
                    {"id": "0", "source_topics": [source], "changelog_topics": [], "stateful": False}
                ],
                "clients": [
                    {"process_id": f"p-{c}", "rack": RACKS[c % len(RACKS)], "threads": 1} for c in range(3)
                ],
                "rack_aware": {"strategy": "balance_subtopology"},
            }
        )
    return {
        "schema": SCHEMA,
        "kind": "rackplan.snapshot",
        "cluster_id": f"cluster-{index:02d}",
        "taken_at": "2026-11-21T22:00:00Z",
        "fetch_mode": "nearest-replica",
        "brokers": brokers,
        "topics": topic_docs,
        "leaders": leaders,
        "traffic": traffic,
        "consumer_groups": groups_doc,
        "streams_apps": apps,
    }


def fleet(clusters: int, groups_per_cluster: int, seed: int = 0, **kw: Any) -> list[FleetSnapshot]:
    return [parse_snapshot(cluster_document(i, groups_per_cluster, seed, **kw)) for i in range(clusters)]
