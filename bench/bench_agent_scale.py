"""The agent's cycle at scale through the real admin path: real Kafka, real Metadata, real publishing.

Run (starts the compose file's 6-broker Kafka 4.3.1 cluster on loopback, or uses a running one):

    .venv/bin/python bench/bench_agent_scale.py [--bootstrap HOST:PORT,...] \
        [--topics 1000] [--partitions 100] [--rf 3] [--groups 301] [--repeat 5] [--profile FILE]

Unlike bench/bench_agent.py (a fake AdminClient), every poll here sends a real
Metadata request through confluent-kafka's AdminClient and decodes its
answer, and every plan is published to the plan topic and confirmed by the
brokers.  Topics ``scale-NNNNN`` are created if missing (and grown to
``--partitions``).  ``--groups`` consumer groups (6 members in 3 racks, 4
topics each, assignors range / cooperative-sticky / rack-optimal in turn) are
defined in the settings file; ``membership.describe_groups`` is off (the groups
have no live members to describe).

Figures are CPU seconds, never wall time (the machine may be shared):

- ``process``: the whole process's CPU during the cycle (``time.process_time``:
  every thread, librdkafka's included);
- per phase: the agent thread's own CPU (``time.thread_time``) inside each
  phase: metadata (request + decode), diff (and reassignment hold / rack
  resolution), registrations (topic read + merge), planning, publish,
  metrics (series updates) and alerts; ``scrape`` renders ``/metrics`` once
  after the cycle.

Polls measured:

- idle: nothing changed;
- rack change: DescribeCluster's answer is changed to report broker 6 in
  rack ``az-a`` (it is in ``az-c``), as if the broker had been moved, so every
  partition with a replica on it changes its rack set: with RF 3 on 6 brokers
  that touches every group.  The Metadata request, planning and publishing are
  real.  The figure is the confirming cycle (``change_persist_polls: 1``) that
  re-plans and publishes every touched group, then the change is undone;
- big registration: one registration record of ``--reg-topics`` topic names
  (most not existing) on the registrations topic, then idle polls.  Above
  ``MAX_REGISTRATION_TOPICS`` (10,000) the record is refused when read; with
  ``--reg-topics 9000`` it is accepted and its plan skipped (topics missing).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rackplan.agent.core.logging import configure
from rackplan.agent.cycle import run as agent_cycle
from rackplan.agent.cycle.intake import Intake
from rackplan.agent.ha.heartbeat import Heartbeats
from rackplan.agent.kafka.exceptions import TopicReadError
from rackplan.agent.runtime import loop as agent_loop
from rackplan.agent.runtime.loop import Agent, CycleReport
from rackplan.agent.settings.sections import Settings

RACKS = ("az-a", "az-b", "az-c")
MEMBERS_PER_RACK = 2
TOPICS_PER_GROUP = 4
ASSIGNORS = ("range", "cooperative-sticky", "rack-optimal")
MOVED_BROKER, MOVED_TO = 6, "az-a"

#: phase -> (where the agent looks the function up, its name there)
PHASES: dict[str, tuple[tuple[Any, str], ...]] = {
    "metadata": ((agent_cycle, "poll_snapshot"),),
    "diff": ((agent_cycle, "diff"), (agent_cycle, "hold_reassignments"), (agent_cycle, "known_racks")),
    "registrations": ((Intake, "read"), (Intake, "refresh")),
    "planning": ((agent_cycle, "plan_group"),),
    "publish": ((agent_cycle, "publish_plans"), (agent_cycle, "publish_tombstones")),
    "metrics": (
        (agent_cycle, "snapshot_metrics"),
        (agent_cycle, "group_metrics"),
        (agent_cycle, "change_metrics"),
        (agent_loop, "follower_metrics"),
        (agent_cycle, "live_locality"),
    ),
    "alerts": ((agent_cycle, "evaluate_alerts"),),
    "watch": ((agent_loop, "watch_plans"), (agent_loop, "watch_lease"), (Heartbeats, "send")),
}


class PhaseClock:
    """Thread CPU per phase, accumulated by wrapping the agent's own functions (restored by ``close``)."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self._undo: list[Callable[[], None]] = []
        self._depth = 0
        for phase, names in PHASES.items():
            for owner, attr in names:
                original = getattr(owner, attr)
                setattr(owner, attr, self._wrap(phase, original))
                self._undo.append(partial(setattr, owner, attr, original))

    def _wrap(self, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if self._depth:  # nested inside another phase: counted there
                return fn(*args, **kwargs)
            self._depth += 1
            t0 = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.spent[phase] = self.spent.get(phase, 0.0) + time.thread_time() - t0
                self._depth -= 1

        return timed

    def take(self) -> dict[str, float]:
        out, self.spent = self.spent, {}
        return out

    def close(self) -> None:
        for undo in self._undo:
            undo()


class MovedRackAdmin:
    """The real AdminClient, except that DescribeCluster can report one broker in another rack."""

    def __init__(self, admin: Any) -> None:
        self._admin = admin
        self.moved = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._admin, name)

    def describe_cluster(self, **kw: Any) -> Any:
        fut = self._admin.describe_cluster(**kw)
        if not self.moved:
            return fut
        described = fut.result(timeout=kw.get("request_timeout", 10) + 5)
        for node in described.nodes:
            if node.id == MOVED_BROKER:
                node.rack = MOVED_TO
        return _Done(described)


class _Done:
    def __init__(self, value: Any) -> None:
        self._value = value

    def result(self, timeout: float | None = None) -> Any:
        return self._value


def ensure_topics(bootstrap: str, topics: int, partitions: int, rf: int) -> list[str]:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.cimpl import NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    names = [f"scale-{t:05d}" for t in range(topics)]
    md = admin.list_topics(timeout=60)
    missing = [n for n in names if n not in md.topics]
    small = [n for n in names if n in md.topics and len(md.topics[n].partitions) < partitions]
    for i in range(0, len(missing), 50):
        fs = admin.create_topics(
            [NewTopic(n, partitions, rf) for n in missing[i : i + 50]], request_timeout=300
        )
        for f in fs.values():
            f.result(timeout=400)
    for i in range(0, len(small), 50):
        fs = admin.create_partitions(
            [NewPartitions(n, partitions) for n in small[i : i + 50]], request_timeout=300
        )
        for f in fs.values():
            try:
                f.result(timeout=400)
            except KafkaException as e:  # grown meanwhile: the metadata read above was behind
                if e.args[0].name() != "INVALID_PARTITIONS":
                    raise
    return names


def settings(bootstrap: str, names: list[str], groups: int, prefix: str) -> Settings:
    regs = []
    for g in range(groups):
        subs = sorted({names[(g * 7 + k * 251) % len(names)] for k in range(TOPICS_PER_GROUP)})
        members = [
            {"member_id": f"g{g:03d}-{r}-{i}", "rack": r, "topics": subs}
            for r in RACKS
            for i in range(MEMBERS_PER_RACK)
        ]
        regs.append(
            {"group_id": f"group-{g:03d}", "assignor": ASSIGNORS[g % len(ASSIGNORS)], "members": members}
        )
    return Settings.model_validate(
        {
            "kafka": {"bootstrap_servers": bootstrap},
            "consumer_groups": regs,
            "plan_topic": f"{prefix}.plans",
            "alerts_topic": f"{prefix}.alerts",
            "registrations_topic": f"{prefix}.registrations",
            "ha": {"lease_topic": f"{prefix}.lease"},
            "change_persist_polls": 1,
            "membership": {"describe_groups": False},
            "metadata": {"request_timeout_s": 60},
            "io_timeout_s": 60,
            "registrations": {"allow_override_settings_groups": False},
            "alerts": {"cooldown_s": 0, "for_s": 0, "keep_firing_for_s": 0},
            "log": {"level": "error"},
        }
    )


@contextmanager
def profiled(path: str | None, label: str) -> Iterator[None]:
    if not path:
        yield
        return
    prof = cProfile.Profile()
    prof.enable()
    try:
        yield
    finally:
        prof.disable()
        prof.dump_stats(f"{path}.{label}")


def cycle(
    agent: Agent, clock: PhaseClock, profile: str | None, label: str
) -> tuple[dict[str, float], CycleReport]:
    clock.take()
    t0, w0 = time.process_time(), time.perf_counter()
    with profiled(profile, label):
        report = agent.run_once()
    process = time.process_time() - t0
    phases = clock.take()
    s0 = time.thread_time()
    agent.metrics.render()
    phases["scrape"] = time.thread_time() - s0
    phases["process"] = process
    phases["wall"] = time.perf_counter() - w0
    return phases, report


def big_registration(agent: Agent, topics: int, existing: list[str]) -> int:
    """One registration record naming ``topics`` topics (a few existing), as a member would publish it."""
    from rackplan.agent.kafka.publisher import Publisher

    names = sorted({*existing[:4], *(f"nope-{i:07d}" for i in range(topics - 4))})
    value = {
        "schema": 1,
        "kind": "consumer",
        "group_id": "big-group",
        "member_id": "big-1",
        "rack": "az-a",
        "topics": names,
        "timestamp_ms": int(time.time() * 1000),
    }
    raw = json.dumps(value).encode()
    pub = Publisher(agent.client_config, 8 * 1024 * 1024)
    pub.publish(agent.settings.registrations_topic, "consumer/big-group/big-1", raw, 60)
    pub.flush(60)
    return len(raw)


def median_phases(rows: list[dict[str, float]]) -> dict[str, float]:
    keys = sorted({k for r in rows for k in r})
    return {k: statistics.median(r.get(k, 0.0) for r in rows) for k in keys}


def show(title: str, rows: list[dict[str, float]]) -> None:
    m = median_phases(rows)
    order = [*PHASES, "scrape", "process", "wall"]
    print(f"{title} (median of {len(rows)}): " + ", ".join(f"{k} {m.get(k, 0.0):.3f}" for k in order))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bootstrap", help="a running cluster (else the compose cluster is started)")
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=100, help="partitions per topic")
    ap.add_argument("--rf", type=int, default=3)
    ap.add_argument("--groups", type=int, default=301)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--reg-topics", type=int, default=60_000, help="topic names of the big registration")
    ap.add_argument("--profile", help="write cProfile stats to FILE.<poll>")
    args = ap.parse_args(argv)
    configure("json", "error", stream=sys.stderr)
    cluster = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        from integration.kafka.cluster import KafkaCluster

        cluster = KafkaCluster(heap_mb=768)
        print(cluster.start(timeout=900).line())
        bootstrap = cluster.bootstrap
    try:
        return run(args, bootstrap)
    finally:
        if cluster is not None:
            cluster.close()


def run(args: argparse.Namespace, bootstrap: str) -> int:
    from confluent_kafka.admin import AdminClient

    t0 = time.perf_counter()
    names = ensure_topics(bootstrap, args.topics, args.partitions, args.rf)
    print(f"topics ready in {time.perf_counter() - t0:.0f} s wall")
    prefix = f"bench-scale-{uuid.uuid4().hex[:8]}"
    s = settings(bootstrap, names, args.groups, prefix)
    admin = MovedRackAdmin(AdminClient(s.kafka.client_config()))
    agent = Agent(s, admin=admin)
    clock = PhaseClock()
    try:
        for attempt in range(10):  # brokers busy creating partitions learn the agent's new topics late
            try:
                agent.start()
                break
            except TopicReadError as e:
                print(f"start: {e}; again in 10 s", file=sys.stderr)
                if attempt == 9:
                    raise
                time.sleep(10)
        first, report = cycle(agent, clock, None, "first")
        snap = report.snapshot
        assert report.ok and snap is not None, report.error
        assert len(report.published) == args.groups, (len(report.published), report.skipped)
        print(
            f"real Kafka: {len(snap.brokers)} brokers, {len(snap.topics):,} topics, "
            f"{snap.partition_count():,} partitions (RF {args.rf}), {args.groups} groups "
            f"({MEMBERS_PER_RACK * len(RACKS)} members, {TOPICS_PER_GROUP} topics each)"
        )
        show("first poll (every group planned and published)", [first])
        idle = []
        for i in range(args.repeat):
            row, report = cycle(agent, clock, args.profile if i == 0 else None, "idle")
            assert report.ok and not report.published, report
            idle.append(row)
        show("idle poll", idle)
        change, republished = [], []
        for i in range(args.repeat):
            admin.moved = not admin.moved
            agent.io.snapshots.rack_cache.clear()  # the broker "came back": its rack is asked again
            row, report = cycle(agent, clock, args.profile if i == 0 else None, "change")
            assert report.ok and report.confirmed, report
            change.append(row)
            republished.append(len(report.published))
        if admin.moved:  # back to the real racks
            admin.moved = False
            agent.io.snapshots.rack_cache.clear()
            cycle(agent, clock, None, "undo")
        show(
            f"rack change (broker {MOVED_BROKER} -> {MOVED_TO}, back and forth; groups republished "
            f"median {statistics.median(republished):.0f} of {args.groups})",
            change,
        )
        size = big_registration(agent, args.reg_topics, names)
        big, skipped = [], []
        for i in range(args.repeat + 1):
            row, report = cycle(agent, clock, args.profile if i == 1 else None, "bigreg")
            if i:  # the first one reads the record
                big.append(row)
            skipped.append(sorted(report.skipped))
        print(f"big registration: {args.reg_topics:,} topic names, {size:,} bytes; skipped: {skipped[-1]}")
        show("poll after a big registration", big)
        idle_cpu = statistics.median(r["process"] for r in idle)
        change_cpu = statistics.median(r["process"] for r in change)
        return 0 if idle_cpu < 1.0 and change_cpu < 10.0 else 1
    finally:
        clock.close()
        agent.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
