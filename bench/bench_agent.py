"""Benchmark the agent's cycle on a synthetic cluster: 200,000 partitions, 500 registered groups.

Run:  .venv/bin/python bench/bench_agent.py [--repeat 5] [--topics 2000] [--groups 500]

The agent runs its real cycle (snapshot building, diff, debounce, registration
merge, planning, plan encoding, alerts, metrics) against a fake AdminClient
whose answers are built beforehand, and a fake producer that confirms at
once, so the figures are the agent's own CPU beyond the AdminClient calls
(``time.process_time``; the process runs no other thread).

- quiet poll: a poll that finds nothing changed;
- change poll: a poll confirming a change of the replica racks of 10% of
  the topics (``change_persist_polls: 1``), re-planning the groups it touches.

Baseline, same run: the naive agent, which takes the same fresh snapshot and
recomputes every group's plan on every poll (no fingerprint short-cut, no
touched-topics filter), timed on the same inputs as the agent's poll (for the
change poll: the changed snapshot and the plans of record before it).
Prints medians and the ratio naive / agent.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rackplan.agent.cluster.metadata import fetch_snapshot
from rackplan.agent.core.logging import configure
from rackplan.agent.planning.planner import plan_for
from rackplan.agent.runtime.loop import Agent
from rackplan.agent.settings.sections import Settings
from rackplan.agent.testing import FakeAdmin, FakePublisher, Node, TopicMeta, cluster_metadata

RACKS = ("az-a", "az-b", "az-c")
BROKERS = 9  # broker b is in rack RACKS[b % 3]
PARTITIONS_PER_TOPIC = 100
MEMBERS_PER_RACK = 2
TOPICS_PER_GROUP = 4
ASSIGNORS = ("range", "cooperative-sticky", "rack-optimal")


def fake_admin(topics: dict[str, TopicMeta]) -> FakeAdmin:
    """An AdminClient over ready descriptions: :data:`BROKERS` brokers, broker b in rack ``RACKS[b % 3]``."""
    return FakeAdmin(topics, nodes=[Node(b, RACKS[b % 3]) for b in range(BROKERS)])


def describe(replicas: list[tuple[int, int]]) -> TopicMeta:
    """What a Metadata request says of a topic with these (leader, follower) replica pairs."""
    return cluster_metadata({"t": [list(r) for r in replicas]}, ()).topics["t"]


def cluster(topics: int, rng: random.Random) -> dict[str, list[tuple[int, int]]]:
    """Each partition on two brokers of different racks."""
    out = {}
    for t in range(topics):
        reps = []
        for _ in range(PARTITIONS_PER_TOPIC):
            first = rng.randrange(BROKERS)
            second = (first + rng.choice((1, 2, 4, 5, 7, 8))) % BROKERS
            reps.append((first, second))
        out[f"topic-{t:05d}"] = reps
    return out


def moved(replicas: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The same topic after a reassignment that changes every partition's rack set."""
    out = []
    for a, b in replicas:
        c = next(x for x in range(BROKERS) if x % 3 not in (a % 3, b % 3))
        out.append((a, c))
    return out


def settings(topics: list[str], groups: int, rng: random.Random) -> Settings:
    regs = []
    for g in range(groups):
        subs = sorted(rng.sample(topics, TOPICS_PER_GROUP))
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
            "consumer_groups": regs,
            "change_persist_polls": 1,
            "membership": {"describe_groups": False},
            "alerts": {"cooldown_s": 0, "for_s": 0, "keep_firing_for_s": 0},
            "log": {"level": "error"},
        }
    )


def cpu(fn: Callable[[], Any]) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def naive_poll(agent: Agent, admin: FakeAdmin) -> None:
    """What a stateless agent does every poll: a fresh snapshot, then every group planned again."""
    snap = fetch_snapshot(admin, agent.settings.metadata)
    racks = snap.resolve_racks(agent.term.known)
    for reg in agent.term.regs:
        plan_for(snap, racks, reg, agent.term.book.latest(reg.key))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="timed polls per figure (median)")
    ap.add_argument("--topics", type=int, default=2000, help=f"topics of {PARTITIONS_PER_TOPIC} partitions")
    ap.add_argument("--groups", type=int, default=500)
    ap.add_argument(
        "--naive-repeat", type=int, default=3, help="timed naive polls (each re-plans every group)"
    )
    args = ap.parse_args(argv)
    configure("json", "error", stream=sys.stderr)
    rng = random.Random(7)

    replicas = cluster(args.topics, rng)
    names = sorted(replicas)
    state_a = {t: describe(r) for t, r in replicas.items()}
    changed = sorted(rng.sample(names, max(1, len(names) // 10)))
    state_b = {**state_a, **{t: describe(moved(replicas[t])) for t in changed}}
    admin = fake_admin(dict(state_a))
    agent = Agent(settings(names, args.groups, rng), admin=admin, publisher=FakePublisher(decode=False))
    agent.begin([])
    partitions = args.topics * PARTITIONS_PER_TOPIC
    t0 = time.perf_counter()
    first = agent.run_once()
    setup_s = time.perf_counter() - t0
    assert first.ok and len(first.published) + len(first.skipped) == args.groups, first.skipped

    quiet, naive_quiet = [], []
    for i in range(args.repeat):
        report = None

        def poll() -> None:
            nonlocal report
            report = agent.run_once()

        quiet.append(cpu(poll))
        assert report is not None and report.ok and not report.published
        if i < args.naive_repeat:
            naive_quiet.append(cpu(lambda: naive_poll(agent, admin)))
    replanned: list[int] = []
    change: list[float] = []
    naive_change: list[float] = []
    for i in range(args.repeat):
        admin.topics = dict(state_b if i % 2 == 0 else state_a)
        if i < args.naive_repeat:  # same input as the agent's poll below: the plans of record before it
            naive_change.append(cpu(lambda: naive_poll(agent, admin)))
        report = None

        def poll_change() -> None:
            nonlocal report
            report = agent.run_once()

        change.append(cpu(poll_change))
        assert report is not None and report.confirmed, "the change was not confirmed"
        replanned.append(len(report.published))

    q, c = statistics.median(quiet), statistics.median(change)
    nq, nc = statistics.median(naive_quiet), statistics.median(naive_change)
    print(
        f"{partitions:,} partitions in {args.topics:,} topics, {args.groups} groups "
        f"({MEMBERS_PER_RACK * len(RACKS)} members, {TOPICS_PER_GROUP} topics each; "
        f"assignors {', '.join(ASSIGNORS)} in turn); first poll (all initial plans) {setup_s:.1f} s wall"
    )
    print(f"change: replica racks of {len(changed)} topics (10%), back and forth; groups re-planned "
          f"per change: median {statistics.median(replanned):.0f}")  # fmt: skip
    print(f"CPU seconds, medians: agent of {args.repeat} polls, naive of {args.naive_repeat}")
    print(f"{'poll':<34}{'agent s':>10}{'naive s':>10}{'ratio':>8}{'target':>9}")
    print(f"{'no change':<34}{q:>10.3f}{nq:>10.3f}{nq / q:>8.1f}{'< 1 s':>9}")
    print(f"{'change touching 10% of topics':<34}{c:>10.3f}{nc:>10.3f}{nc / c:>8.1f}{'< 10 s':>9}")
    return 0 if q < 1.0 and c < 10.0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
