"""The contract's invariants (and a flow's feasibility) as assertions, shared by every assignor's tests."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from rackplan.assignor.consumer import subscribed_partitions
from rackplan.assignor.flow import FlowResult
from rackplan.assignor.model import Cluster, ConsumerGroup, ConsumerPlan, TopicPartition


def assert_valid(cluster: Cluster, group: ConsumerGroup, plan: ConsumerPlan) -> None:
    """Invariant 1: every subscribed partition assigned once to a subscriber, or withheld."""
    members = {m.member_id: m for m in group.members}
    assert set(plan.assignment) == set(members), "every member must be listed"
    owner: dict[TopicPartition, str] = {}
    for mid, parts in plan.assignment.items():
        assert list(parts) == sorted(parts), f"{mid}: partitions not sorted"
        for tp in parts:
            assert tp not in owner, f"{tp} assigned to {owner[tp]} and {mid}"
            assert tp[0] in members[mid].topics, f"{tp} assigned to {mid}, not subscribed"
            owner[tp] = mid
    withheld = {tp for parts in plan.revoked.values() for tp in parts}
    assert not (withheld & set(owner)), "a withheld partition is also assigned"
    assert set(owner) | withheld == subscribed_partitions(cluster, group)


def equal_subscriptions(group: ConsumerGroup) -> bool:
    return len({m.topics for m in group.members}) <= 1


def assert_balanced(group: ConsumerGroup, plan: ConsumerPlan) -> None:
    """Invariant 2 for sticky and rack-optimal assignors (nothing withheld)."""
    counts = {m: len(v) for m, v in plan.assignment.items()}
    if equal_subscriptions(group):
        assert max(counts.values()) - min(counts.values()) <= 1, counts
        return
    subscribers: dict[str, list[str]] = {}
    for m in group.members:
        for t in m.topics:
            subscribers.setdefault(t, []).append(m.member_id)
    for mid, parts in plan.assignment.items():
        for t, p in parts:
            for other in subscribers[t]:
                assert counts[mid] - counts[other] < 2, (
                    f"{t}-{p} on {mid} ({counts[mid]}) could move to {other} ({counts[other]})"
                )


def assert_range_balanced(group: ConsumerGroup, plan: ConsumerPlan) -> None:
    """Invariant 2 for range: per topic, subscribers' counts differ by at most one."""
    per_topic: dict[str, Counter[str]] = {}
    for mid, parts in plan.assignment.items():
        for t, _ in parts:
            per_topic.setdefault(t, Counter())[mid] += 1
    for t, cnt in per_topic.items():
        vals = [cnt.get(m.member_id, 0) for m in group.members if t in m.topics]
        assert max(vals) - min(vals) <= 1, (t, vals)


def assert_feasible_flow(
    n: int, edges: Sequence[tuple[int, int, int, int]], supply: Sequence[int], result: FlowResult
) -> None:
    """A min-cost flow result is within capacities, conserves ``supply`` and costs what it claims."""
    assert all(0 <= f <= c for f, (_, _, c, _) in zip(result.flow, edges, strict=True))
    net = [0] * n
    for f, (u, v, _, _) in zip(result.flow, edges, strict=True):
        net[u] += f
        net[v] -= f
    assert net == list(supply)
    assert sum(f * w for f, (_, _, _, w) in zip(result.flow, edges, strict=True)) == result.cost


def assert_contract_checker_passes(shared_dir: Path, instance: Path, plan_json: str, work_dir: Path) -> None:
    """The contract's own checker (shared/tools/check_plan.py) on an instance file and a plan document."""
    plan = work_dir / "plan.json"
    plan.write_text(plan_json)
    check = subprocess.run(
        [sys.executable, str(shared_dir / "tools" / "check_plan.py"), str(instance), str(plan)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert check.returncode == 0, check.stdout + check.stderr
