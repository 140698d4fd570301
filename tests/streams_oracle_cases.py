"""Streams apps for the comparison with Kafka's high-availability assignor, and the measures it compares.

Documents are contract ``streams_app`` inputs built directly as JSON (the
oracle reads the same bytes rackplan parses).  They are drawn where Kafka's
rack optimisation runs: every broker and every client has a rack, and every
changelog topic exists in the cluster (Kafka switches rack awareness off
otherwise, rackplan does not).  Small enough for Kafka's optimiser (at most
3 sub-topologies of 8 partitions).

The measures are computed here from the document, independently of
rackplan's model: a (task, topic partition) pair is cross-rack when no
replica of the partition is in the client's rack.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

RACKS = ("az-a", "az-b", "az-c")
ZONES = ("z1", "z2", "z3")
CLUSTERS = ("k1", "k2")
HOSTS = ("h1", "h2", "h3")


@st.composite
def ha_documents(draw: st.DrawFn, tag_keys: int | None = None, lags: bool | None = None) -> dict[str, Any]:
    """A contract ``streams_app`` document for the high-availability assignor, rack-aware in Kafka."""
    n_racks = draw(st.integers(1, 3))
    racks = list(RACKS[:n_racks])
    brokers = {b: draw(st.sampled_from(racks)) for b in range(1, draw(st.integers(n_racks, 6)) + 1)}
    for i, r in enumerate(racks):  # every rack holds a broker
        brokers[i + 1] = r
    ids = sorted(brokers)
    topics: dict[str, list[list[int]]] = {}

    def topic(name: str, n: int) -> None:
        rf = draw(st.integers(1, min(2, len(ids))))
        topics[name] = [
            draw(st.lists(st.sampled_from(ids), min_size=rf, max_size=rf, unique=True)) for _ in range(n)
        ]

    subs = []
    all_tasks: list[str] = []
    stateful_tasks: list[str] = []
    for s in range(draw(st.integers(1, 3))):
        n = draw(st.integers(1, 8))
        src = [f"s{s}-in{k}" for k in range(draw(st.integers(1, 2)))]
        stateful = draw(st.booleans()) or s == 0
        logs = [f"s{s}-log{k}" for k in range(draw(st.integers(1, 2)))] if stateful else []
        for t in src + logs:
            topic(t, n)
        subs.append({"id": str(s), "source_topics": src, "changelog_topics": logs, "stateful": stateful})
        tasks = [f"{s}_{p}" for p in range(n)]
        all_tasks += tasks
        if stateful:
            stateful_tasks += tasks
    keys = draw(st.integers(0, 2)) if tag_keys is None else tag_keys
    tag_names = ["zone", "cluster"][:keys]
    with_lags = draw(st.booleans()) if lags is None else lags
    clients = []
    n_clients = draw(st.integers(2, 6))
    for i in range(n_clients):
        rack = draw(st.sampled_from(racks))
        tags = {}
        if keys >= 1:
            # zones usually follow racks (tags describe where a client runs)
            tags["zone"] = (
                ZONES[racks.index(rack)] if draw(st.integers(0, 3)) else draw(st.sampled_from(ZONES))
            )
        if keys >= 2:
            tags["cluster"] = draw(st.sampled_from(CLUSTERS))
        if keys >= 1 and draw(st.integers(0, 3)) == 0:
            # a tag no key spreads over: Kafka's standby balancing still compares it
            tags["host"] = draw(st.sampled_from(HOSTS))
        client: dict[str, Any] = {
            "process_id": f"p-{i:02d}",
            "rack": rack,
            "threads": draw(st.integers(1, 3)),
            "tags": tags,
        }
        if with_lags:
            client["task_lags"] = {
                t: draw(st.sampled_from([-2, 0, 5, 10, 11, 20_000]))  # -2: LATEST_OFFSET; 10, 11: the bound
                for t in stateful_tasks
                if draw(st.integers(0, 2)) == 0
            }
        clients.append(client)
    rack_aware: dict[str, Any] = {"strategy": draw(st.sampled_from(["min_traffic", "balance_subtopology"]))}
    if draw(st.booleans()):
        rack_aware["traffic_cost"] = draw(st.integers(0, 20))
        rack_aware["non_overlap_cost"] = draw(st.integers(0, 5))
    return {
        "cluster": {"brokers": [{"id": b, "rack": brokers[b]} for b in ids], "topics": topics},
        "streams_app": {
            "application_id": "app",
            "subtopologies": subs,
            "clients": clients,
            "num_standby_replicas": draw(st.integers(0, 2)),
            "acceptable_recovery_lag": 10,
            "max_warmup_replicas": draw(st.integers(1, 3)),
            "rack_aware_assignment_tags": tag_names,
            "rack_aware": rack_aware,
            "assignor": "high-availability",
        },
    }


@dataclass(frozen=True)
class Measures:
    """One plan's figures on one document."""

    active_cross: int  # (active task, source or changelog partition) pairs cross-rack
    standby_cross: int  # (standby or warm-up, changelog partition) pairs cross-rack
    spread_breaks: int  # standby copies that break the spread rule (see spread_breaks)
    copies: int  # standbys and warm-ups in total


class Instance:
    """A document's tasks, partitions' racks and clients, for measuring plans of it."""

    def __init__(self, doc: Mapping[str, Any]) -> None:
        rack_of = {b["id"]: b["rack"] for b in doc["cluster"]["brokers"]}
        topics = doc["cluster"]["topics"]
        app = doc["streams_app"]
        self.sources: dict[str, list[set[str]]] = {}
        self.logs: dict[str, list[set[str]]] = {}
        for sub in app["subtopologies"]:
            n = len(topics[sub["source_topics"][0]])
            for p in range(n):
                task = f"{sub['id']}_{p}"
                self.sources[task] = [{rack_of[b] for b in topics[t][p]} for t in sub["source_topics"]]
                self.logs[task] = [{rack_of[b] for b in topics[t][p]} for t in sub["changelog_topics"]]
        self.rack = {c["process_id"]: c["rack"] for c in app["clients"]}
        keys = app["rack_aware_assignment_tags"]
        self.values: dict[str, tuple[str | None, ...]] = {
            c["process_id"]: tuple(c["tags"].get(k) for k in keys) if keys else (c["rack"],)
            for c in app["clients"]
        }
        self.standbys = app["num_standby_replicas"]

    def cross(self, client: str, racks: list[set[str]]) -> int:
        return sum(1 for r in racks if self.rack[client] not in r)

    def measure(self, assignment: Mapping[str, Mapping[str, list[str]]]) -> Measures:
        active = sum(
            self.cross(c, self.sources[t] + self.logs[t]) for c, a in assignment.items() for t in a["active"]
        )
        copies = {c: list(a["standby"]) + list(a.get("warmup", [])) for c, a in assignment.items()}
        standby = sum(self.cross(c, self.logs[t]) for c, ts in copies.items() for t in ts)
        return Measures(active, standby, self.spread_breaks(assignment), sum(len(v) for v in copies.values()))

    def spread_breaks(self, assignment: Mapping[str, Mapping[str, list[str]]]) -> int:
        """Standby copies placed against the spread rule, summed over tasks and spread keys.

        The rule (KIP-708, one key at a time: a tag key, or the client rack when
        no tags are set): a task whose active has value ``v`` and that has ``k``
        standbys covers ``min(k, V)`` distinct values other than ``v``, ``V``
        being the number of such values among clients (a client without the
        value covers none).  The breaks of a task are ``min(k, V)`` minus the
        values it covers: standbys in the active's rack (or doubling up a rack)
        while another rack could take them.
        """
        owner = {t: c for c, a in assignment.items() for t in a["active"]}
        holders: dict[str, list[str]] = {}
        for c, a in assignment.items():
            for t in a["standby"]:
                holders.setdefault(t, []).append(c)
        breaks = 0
        width = len(next(iter(self.values.values())))
        for t, clients in holders.items():
            for k in range(width):
                v = self.values[owner[t]][k]
                others = {self.values[c][k] for c in self.values} - {v, None}
                covered = {self.values[c][k] for c in clients} - {v, None}
                breaks += min(len(clients), len(others)) - len(covered)
        return breaks
