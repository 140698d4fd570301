"""Followers back from a self-fence never read a partition another follower reads.

Two races, each forced step by step on real Kafka (the agent on a thread, the followers real
PlanFollowers); both were first seen only under load.

**The late plan** (:func:`test_a_late_plan_waits_for_the_holder_back_from_expiry`).

The race session 26 found in the chaos test under load, forced step by step on real Kafka (the agent
on a thread, the followers real PlanFollowers):

1. Follower c's registration refreshes go unanswered (:class:`HeldProducer`): at 2/3 of its TTL c
   fences itself and gives its partitions up; at the TTL the agent expires it and decides a plan
   without it, giving c's partitions to a and b.
2. That plan is slow to be published (:class:`PlanGate`), as a cycle that spans a broker outage is.
   Meanwhile c's refreshes are answered again: c reads the plan topic to its end, finds nothing newer
   than the plan that names it, and takes its partitions back.
3. The plan arrives. a and b must not read c's partitions before c has given them up.

Without the agent's ``handover.unreleased`` listing (docs/followers.md, "Two-phase handovers", step 7)
a and b took them on receipt, while c still read them until it applied the same plan: tens to
hundreds of milliseconds of two readers in the stressed runs.

**The lagging tail** (:func:`test_a_follower_back_from_its_fence_reads_to_the_end_before_it_takes`):
c fences itself, the agent expires it and publishes a plan without it at once, a and b take c's
partitions; but c's incremental reads of the plan topic lag (:class:`LaggingTail`). Confirmed again,
c must read the plan topic to its end before it follows its cached plan (docs/followers.md, "Its
registration"); found on real Kafka after a broker restart, when one follower re-took its cached plan
while the others already read the newer one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rackplan.agent.follower import FollowerClients, kafka_producer, kafka_tail
from rackplan.agent.protocol.plans import PlanRecord

from .conftest import FOLLOWER_AGENT_SETTINGS, RunningAgent, Target
from .e2e import CountedProducer, FollowerApp, Ledger, math_inf, plan_history, wait_until
from .holds import HeldProducer, LaggingTail, PlanGate
from .test_followers import settled

RunAgent = Callable[..., RunningAgent]
PARTITIONS = 12


def gate_plans(agent: RunningAgent, plan_topic: str, key: str) -> PlanGate:
    """Put a :class:`PlanGate` around the agent's publisher, on the agent's own thread, at a cycle's end."""
    installed = threading.Event()
    gate: list[PlanGate] = []
    put = agent.agent.on_cycle
    assert put is not None

    def hook(report: Any) -> None:
        inner = agent.agent.publisher
        if not installed.is_set() and inner is not None:
            gate.append(PlanGate(inner, plan_topic, key))
            agent.agent.publisher = gate[0]
            installed.set()
        put(report)

    agent.agent.on_cycle = hook
    wait_until(installed.is_set, 30, "a cycle to install the gate")
    return gate[0]


@dataclass
class Scene:
    """An agent on a thread (its plans through a gate), followers a, b and c of one group, a counted stream."""

    agent: RunningAgent
    gate: PlanGate
    bootstrap: str
    group: str
    plans: str
    apps: dict[str, FollowerApp]
    ledger: Ledger
    producer: CountedProducer

    @property
    def key(self) -> str:
        return f"consumer/{self.group}"

    @property
    def c_name(self) -> str:
        return f"{self.group}-c"

    @property
    def every(self) -> list[FollowerApp]:
        return list(self.apps.values())

    def finish(self) -> list[PlanRecord]:
        """Settle the three on one plan, drain the stream, stop the followers; the group's plans, in order."""
        wait_until(lambda: settled(self.agent, self.key, self.every), 60, "the three on one plan again", 0.2)
        self.producer.stop()
        wait_until(
            lambda: not self.ledger.missing(self.producer.delivered), 60, "every message consumed", 0.2
        )
        for app in self.every:
            app.stop()
        return [r for r in plan_history(self.bootstrap, self.key, self.plans) if r is not None]

    def assert_one_reader_each(self, history: list[PlanRecord]) -> None:
        """No partition had two readers; every message was read where it was owned; none was lost."""
        ledger, producer = self.ledger, self.producer
        assert ledger.overlaps() == [], (
            f"no partition owned by two followers at once:\n{ledger.describe_overlaps()}"
        )
        assert ledger.consumed_outside_ownership() == 0
        assert producer.failed == 0 and ledger.missing(producer.delivered) == []
        gens = [r.generation for r in history]
        assert gens == sorted(set(gens)), "plan generations strictly increase"


def scene(target: Target, run_agent: RunAgent, name: str, c_clients: FollowerClients) -> Scene:
    """The three followers settled on a plan and the stream flowing; c's Kafka clients are ``c_clients``."""
    topic = target.create_topic(name, PARTITIONS, 3)
    agent = run_agent(target.agent_settings([], FOLLOWER_AGENT_SETTINGS), target.cluster)
    agent.wait_for(lambda r: r.ok)
    group, plans, ledger = target.name(name), target.control_topics["plan_topic"], Ledger()
    gate = gate_plans(agent, plans, f"consumer/{group}")
    settings = target.follower_settings({"assignor": "cooperative-sticky"})
    apps = {
        r: FollowerApp(
            target.bootstrap,
            group,
            f"{group}-{r}",
            f"az-{r}",
            [topic],
            ledger,
            settings,
            clients=c_clients if r == "c" else None,
        )
        for r in "abc"
    }
    producer = CountedProducer(target.bootstrap, topic, PARTITIONS, rate_per_s=200)
    s = Scene(agent, gate, target.bootstrap, group, plans, apps, ledger, producer)
    wait_until(lambda: settled(agent, s.key, s.every), 40, "three followers on a plan")
    assert apps["c"].follower.assignment(), "c reads some partitions"
    producer.start()
    wait_until(lambda: len(ledger.consumed) > 100, 20, "the stream to flow")
    return s


def test_a_late_plan_waits_for_the_holder_back_from_expiry(
    target: Target, run_agent: RunAgent, e2e_report: Any
) -> None:
    held = threading.Event()
    s = scene(
        target,
        run_agent,
        "late",
        FollowerClients(producer=lambda cfg: HeldProducer(kafka_producer(cfg), held)),
    )
    apps, gate, name = s.apps, s.gate, s.c_name
    c, takers = apps["c"].follower, [apps["a"].follower, apps["b"].follower]
    before = c.assignment()

    # 1. c's refreshes go unanswered: it fences itself; the agent expires it and decides a plan without it.
    fenced = c.stats["self_fenced"]
    gate.release(hold_next=lambda rec: name not in rec.body["assignment"])
    held.set()
    assert gate.wait_held(1, 30), "the agent decided a plan without c"
    assert c.stats["self_fenced"] == fenced + 1 and c.assignment() == [], (
        "c gave its partitions up at 2/3 of its TTL"
    )
    # 2. c is confirmed again; the plan without it is not published yet, so c takes its partitions back.
    held.clear()
    wait_until(lambda: c.assignment() == before, 30, "c to take its partitions back", 0.05)
    retaken, retaken_at = c.generation, time.monotonic()
    # 3. The plan without c arrives. c's application is busy for a moment, so a and b see it first; the
    #    agent's next plan waits until they have acted on this one.
    apps["c"].paused.set()
    wait_until(apps["c"].parked.is_set, 5, "c's application to stop polling")
    (late_generation,) = gate.held
    gate.release(hold_next=lambda rec: True)
    wait_until(lambda: all(f.generation == late_generation for f in takers), 30, "a and b to apply it")
    apps["c"].paused.clear()
    gate.release()
    wait_until(lambda: c.generation > retaken, 30, "c to apply the late plan")
    history = s.finish()

    (late,) = [r for r in history if r.generation == late_generation]
    late_owners = {tuple(tp): m for m, parts in late.body["assignment"].items() for tp in parts}
    given = {late_owners.get(tp, "nobody") for tp in before}  # who the late plan gave c's partitions to
    names = {app.name: app for app in s.every}
    waited = {m for m in given if m in names and names[m].follower.stats["takes_withheld"]}
    e2e_report(
        target=target.kind,
        produced=len(s.producer.delivered),
        duplicates=s.ledger.duplicates(),
        overlaps=len(s.ledger.overlaps()),
        late_generation=late.generation,
        takers=len(given),
        takers_that_waited=len(waited),
        generations=len(history),
    )
    s.assert_one_reader_each(history)
    # The scenario happened: the late plan gave c's partitions away, listing them as not yet released.
    assert given <= {f"{s.group}-a", f"{s.group}-b"}, (
        f"the late plan gives c's partitions to a and b: {given}"
    )
    assert late.handover is not None
    assert sorted(tuple(tp) for tp in late.handover["unreleased"][name]) == sorted(before)
    assert waited == given, "every taker of c's partitions waited for c's release"
    # The ledger's own view: c read each of them again, and nobody else read it until c let it go.
    for tp in before:
        ivs = [iv for iv in s.ledger.intervals if iv.tp == tp]
        (back,) = [iv for iv in ivs if iv.follower == name and iv.start <= retaken_at < math_inf(iv.end)]
        others = [iv.start for iv in ivs if iv.follower != name and iv.start > back.start]
        assert back.end is not None and all(back.end <= t for t in others), (tp, back, others)


def test_a_follower_back_from_its_fence_reads_to_the_end_before_it_takes(
    target: Target, run_agent: RunAgent, e2e_report: Any
) -> None:
    held, lagging = threading.Event(), threading.Event()
    slow = FollowerClients(
        producer=lambda config: HeldProducer(kafka_producer(config), held),
        tail=lambda config, topics, timeout_s: LaggingTail(kafka_tail(config, topics, timeout_s), lagging),
    )
    s = scene(target, run_agent, "lagging", slow)
    name, c, takers = s.c_name, s.apps["c"].follower, [s.apps["a"].follower, s.apps["b"].follower]

    # 1. c's refreshes go unanswered: it fences itself; from then on its incremental reads see nothing.
    held.set()
    wait_until(lambda: c._cycle.fenced_self, 30, "c to fence itself", 0.02)
    lagging.set()
    fenced_at = time.monotonic()
    # 2. The agent expires c and publishes a plan without it; a and b take c's partitions.
    wait_until(
        lambda: all(len(f.assignment()) == PARTITIONS // 2 for f in takers), 30, "a and b to take them"
    )
    without = takers[0].generation
    # Until the check below, the agent's plans naming c again wait: c may only follow the plan without it.
    s.gate.release(hold_next=lambda rec: name in rec.body["assignment"])
    # 3. c is confirmed again, and follows no plan before it has read the plan topic to its end: it finds
    #    the plan without it there, although its incremental reads still see nothing (the agent's next
    #    plan, which names c again, is held back meanwhile).
    #    Unfencing and following are two steps of c's cycle (the plan is applied after the fallback's
    #    timers), so both are awaited: a c that followed its cached plan instead stays at the older
    #    generation (the plan naming it again is held back) and times out here.
    held.clear()
    wait_until(
        lambda: not c._cycle.fenced_self and c.generation >= without,
        30,
        "c's refresh to be confirmed and c to follow the plan without it",
        0.02,
    )
    assert c.assignment() == [], "c follows the newest plan, not its cached one"
    unfenced_at = time.monotonic()
    lagging.clear()
    s.gate.release()
    history = s.finish()

    named_again = min(
        r.generation for r in history if r.generation > without and name in r.body["assignment"]
    )
    e2e_report(
        target=target.kind,
        produced=len(s.producer.delivered),
        duplicates=s.ledger.duplicates(),
        overlaps=len(s.ledger.overlaps()),
        plan_without_c=without,
        c_named_again=named_again,
        generations=len(history),
    )
    s.assert_one_reader_each(history)
    # The ledger's view: c read nothing from its fence until it followed the plan again.
    assert not [
        iv for iv in s.ledger.intervals if iv.follower == name and fenced_at < iv.start <= unfenced_at
    ]
