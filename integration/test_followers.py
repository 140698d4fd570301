"""Scenarios 1 and 2: plan followers on the embedded cluster, with the agent running beside them.

1. The agent plans the groups its followers register; the followers read every
   message produced, each exactly where the plan says.
2. A decommission changes replica rack sets: the agent detects it, publishes a
   revoking plan and then the target, the followers hand partitions over
   without ever sharing one, and the locality alert fires and resolves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .conftest import FOLLOWER_AGENT_SETTINGS, POLL_S, RunningAgent, Target
from .e2e import CountedProducer, FollowerApp, Ledger, member_assignment, plan_history, wait_until

RunAgent = Callable[..., RunningAgent]
#: what a handover may leave a partition unowned. Plan-driven handovers take 0.2-0.6 s in CI (two poll
#: intervals plus the release), but one took 1.6 s and one 2.7 s with the 2 cores at load average 20-60;
#: a wall-clock bound cannot hold when the test's threads are not scheduled. 3.6 s still fails every
#: handover that is not plan-driven: one through a rebalance waits out the 6 s session timeout
#: (FollowerApp's session.timeout.ms).
MAX_GAP_S = 2 * POLL_S + 3.0


def settled(agent: RunningAgent, key: str, apps: list[FollowerApp]) -> bool:
    """The plan of record is a target plan naming every follower, and every follower applied it."""
    rec = agent.agent.term.book.latest(key)
    if rec is None or rec.state != "proposed" or key in dict(agent.agent.term.handovers()):
        return False
    plan = member_assignment(rec)
    if sorted(plan) != sorted(a.name for a in apps):
        return False
    return all(
        a.follower.generation == rec.generation and a.follower.assignment() == sorted(plan[a.name])
        for a in apps
    )


def start_followers(
    target: Target, group: str, topics: list[str], ledger: Ledger, assignor: str, racks: str = "abc"
) -> list[FollowerApp]:
    settings = target.follower_settings({"assignor": assignor})
    return [
        FollowerApp(target.bootstrap, group, f"{group}-{r}", f"az-{r}", topics, ledger, settings)
        for r in racks
    ]


def test_followers_consume_exactly_where_the_plan_says(
    target: Target, run_agent: RunAgent, e2e_report: Any
) -> None:
    orders = target.create_topic("orders", 12, 2)
    agent = run_agent(target.agent_settings([], FOLLOWER_AGENT_SETTINGS), target.cluster)
    agent.wait_for(lambda r: r.ok)
    ledger = Ledger()
    group = target.name("payments")
    apps = start_followers(target, group, [orders], ledger, "rack-optimal")
    key = f"consumer/{group}"
    wait_until(lambda: settled(agent, key, apps), 30, "the followers to apply a plan naming all three")
    rec = agent.agent.term.book.latest(key)
    assert rec is not None and rec.body["revoked"] == {}
    owner = {tp: m for m, parts in member_assignment(rec).items() for tp in parts}
    assert len(owner) == 12
    assert rec.document["stats"]["cross_rack"] == 0, "rf 2 over three racks: every partition can be local"

    producer = CountedProducer(target.bootstrap, orders, 12)
    producer.produce(600)
    wait_until(lambda: not ledger.missing(producer.delivered), 30, "every message to be consumed")
    for a in apps:
        a.stop()

    counts = ledger.counts()
    misplaced = [(f, t, p) for f, t, p, _o, at in ledger.consumed if at > 0 and owner[(t, p)] != f]
    handovers, _ = ledger.gaps()
    plans = target.control_topics["plan_topic"]
    e2e_report(
        target=target.kind,
        produced=len(producer.delivered),
        consumed=sum(counts.values()),
        duplicates=ledger.duplicates(),
        misplaced=len(misplaced),
        generations=len([r for r in plan_history(target.bootstrap, key, plans) if r is not None]),
        max_handover_gap_s=round(max(handovers, default=0.0), 3),
    )
    assert len(producer.delivered) == 600
    assert ledger.missing(producer.delivered) == []
    assert ledger.duplicates() == 0
    assert misplaced == [], "every message read by the member the plan gives its partition to"
    assert ledger.overlaps() == []
    assert ledger.consumed_outside_ownership() == 0
    assert max(handovers, default=0.0) <= MAX_GAP_S
    # The followers joined one by one: each join was a two-phase handover, never a regression.
    gens = [r.generation for r in plan_history(target.bootstrap, key, plans) if r is not None]
    assert gens == sorted(gens) and len(set(gens)) == len(gens)


def test_decommission_hands_partitions_over_and_alerts(
    target: Target, run_agent: RunAgent, e2e_report: Any
) -> None:
    from rackplan.agent.demo.run import WebhookReceiver

    # rf 1: decommissioning moves whole partitions between racks (real Kafka: Kafka's reassignment tool)
    if target.kind == "kafka":  # one partition per broker: broker 3 (az-c) holds partition 2
        from .test_kafka_operations import create

        topic = create(target, "payments", [[b] for b in range(1, 7)])
    else:
        topic = target.create_topic("payments", 6, 1)
    group = target.name("payments")
    receiver = WebhookReceiver()
    webhook = {"url": receiver.url, "timeout_s": 2, "backoff_initial_s": 0.05}
    settings = target.agent_settings([], {"webhook": webhook}, FOLLOWER_AGENT_SETTINGS)
    agent = run_agent(settings, target.cluster)
    agent.wait_for(lambda r: r.ok)
    ledger = Ledger()
    apps = start_followers(target, group, [topic], ledger, "range")
    key = f"consumer/{group}"
    wait_until(lambda: settled(agent, key, apps), 30, "the followers to apply a plan naming all three")
    before = agent.agent.term.book.latest(key)
    assert before is not None and before.locality_after.cross_rack == 0

    producer = CountedProducer(target.bootstrap, topic, 6, rate_per_s=150)
    producer.start()
    wait_until(lambda: len(ledger.consumed) > 100, 20, "the stream to flow")
    handover_start = len(ledger.intervals)
    # Broker 3's partitions move to another rack; on real Kafka a reassignment may confirm in two steps.
    while not agent.reports.empty():  # cycles so far go to the history: what follows is the change's
        agent.history.append(agent.reports.get_nowait())
    history_start = len(agent.history)
    target.move_off(3, [topic])
    confirmed = agent.wait_for(
        lambda r: r.confirmed and any(p.key == key and p.state == "revoking" for p in r.published), timeout=40
    )
    assert confirmed.change is not None and confirmed.change.counts()["replica_racks"] > 0
    (revoking,) = [p for p in confirmed.published if p.key == key]
    assert revoking.state == "revoking" and revoking.generation == before.generation + 1
    assert revoking.reason.startswith("replica racks changed: ")
    assert revoking.body["revoked"], "partitions move between followers"
    assert revoking.handover is not None and revoking.handover["awaiting"] == sorted(revoking.body["revoked"])
    # Nothing moving is given to anybody in the first phase.
    moving = {tuple(tp) for parts in revoking.body["revoked"].values() for tp in parts}
    assert not moving & {tuple(tp) for parts in revoking.body["assignment"].values() for tp in parts}

    done = agent.wait_for(lambda r: any(p.key == key for p in r.completed), timeout=20)
    (final,) = [p for p in done.completed if p.key == key]
    assert final.state == "proposed" and final.generation == revoking.generation + 1
    assert final.handover == {"from_generation": revoking.generation, "timed_out": []}
    assert final.locality_after.cross_rack <= revoking.locality_before.cross_rack  # type: ignore[union-attr]
    # Whether the change pages (agent/alerts/rules.py): the live assignment under the new metadata is above the
    # threshold, or worse than both the old and the new plan by worsen_delta. On the embedded cluster the
    # decommission leaves az-c without replicas (it pages); on real Kafka az-c keeps one, and the live
    # assignment is already as local as any balanced plan (nothing to page about).
    rules = settings.alerts
    live_f = revoking.locality_before.fraction  # type: ignore[union-attr]
    pages = (
        live_f > rules.cross_rack_threshold
        or live_f - max(before.locality_after.fraction, final.locality_after.fraction) >= rules.worsen_delta
    )
    since_change = agent.history[history_start:]
    firing = [a for r in since_change for a in r.alerts if a.status == "firing" and a.key == key]
    assert bool(firing) == pages, f"the change's alert fired: {bool(firing)}, live {live_f:.3f}"
    wait_until(lambda: settled(agent, key, apps), 20, "the followers to apply the target")
    if pages and not any(a.status == "resolved" for r in agent.history[history_start:] for a in r.alerts):
        agent.wait_for(lambda r: any(a.status == "resolved" for a in r.alerts), timeout=20)

    producer.stop()
    wait_until(lambda: not ledger.missing(producer.delivered), 30, "every message to be consumed")
    for a in apps:
        a.stop()
    agent.stop()  # delivers what the webhook still has queued
    # Alertmanager's view: the change's alert fired and resolved (the followers joining one by one may
    # have fired and resolved an initial-state alert before it: the first follower alone reads cross-rack).
    statuses = [s for s in receiver.statuses() if s[0] != "unfixable"]  # the first follower alone: unfixable
    if pages:
        assert statuses[-2:] == [("firing", key), ("resolved", key)]
    assert statuses == [("firing", key), ("resolved", key)] * (len(statuses) // 2)
    receiver.close()

    moved_gaps, _ = ledger.gaps()
    e2e_report(
        target=target.kind,
        produced=len(producer.delivered),
        consumed=len(ledger.consumed),
        duplicates=ledger.duplicates(),
        partitions_moved=len(moving),
        max_handover_gap_s=round(max(moved_gaps, default=0.0), 3),
        ownership_changes=len(ledger.intervals) - handover_start,
    )
    assert ledger.missing(producer.delivered) == []
    assert ledger.overlaps() == []
    assert ledger.consumed_outside_ownership() == 0
    assert max(moved_gaps, default=0.0) <= MAX_GAP_S
