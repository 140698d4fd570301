"""The agent beside a group the broker assigns (issue 27 §4), on the real 4.4 cluster.

Six confluent-kafka consumers with ``group.protocol=consumer`` and ``group.remote.assignor=uniform`` (Kafka's
own, rack-blind) form a KIP-848 group; the group is registered in the agent's settings (members discovered,
racks by ``rack_mapping``).  The agent must publish no plan for it (its members ignore plans), say in
``/v1/plans`` that it is on the ``kip848-broker`` path with assignor ``uniform``, and judge the coordinator's
live assignment against the plan it would have published: live cross-rack partitions > achievable, in the
metrics and, past ``worsen_delta``, a firing alert.  Then the roll-out of docs/java.md: the consumers restarted
one by one with ``group.remote.assignor=rackplan``; the agent follows (assignor ``rackplan``), the live
assignment reaches 0 cross-rack partitions and the alert resolves; from then on the group is fed plans (that
broker assignor reads them).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest

from integration.kafka.cluster import CLIENTS_JAR
from rackplan.agent.state.term import CycleReport

from .conftest import RunningAgent, Target
from .e2e import Ledger, plan_history
from .test_kafka_java_followers import live_assignment as coordinator_view
from .test_kafka_operations import create, settings_doc
from .test_kafka_server_assignor import REPLICAS, Member, cross_rack, settled

pytestmark = pytest.mark.skipif(not CLIENTS_JAR.exists(), reason=f"{CLIENTS_JAR} missing: run `make clients`")

RunAgent = Callable[..., RunningAgent]


def test_a_kip848_group_gets_no_plan_and_the_agent_judges_the_brokers_assignment(
    real: Target, run_agent: RunAgent, e2e_report: Any
) -> None:
    topic = create(real, "bg-orders", REPLICAS)
    racks = {f"bg-{r}{i}": f"az-{r}" for r in "abc" for i in (1, 2)}
    group = real.name("bg-uniform")
    members = [
        Member(real.bootstrap, group, n, rack, topic, "uniform", Ledger()) for n, rack in racks.items()
    ]
    try:
        live_assignment = settled(real.bootstrap, group, len(racks))  # waits on conditions, batching included
        settings = real.agent_settings(
            [{"group_id": group, "members": [], "topics": [topic]}],
            settings_doc(rack_mapping=[{"client_id": f"bg-{r}*", "rack": f"az-{r}"} for r in "abc"]),
        )
        key = f"consumer/{group}"
        agent = run_agent(settings)
        # A cycle that described the whole group (a coordinator moving only delays it: the describe is
        # retried next cycle) with the judgement made against the achievable plan.
        agent.wait_for(lambda r: key in r.live and r.live[key].total == len(REPLICAS), timeout=60)
        shown = agent.agent.status().plans_json()[key]
        labels = {"kind": "consumer", "group": group}
        m = agent.agent.metrics
        live_x = m.get("rackplan_live_cross_rack_partitions", labels)
        achievable_x = m.get("rackplan_achievable_cross_rack_partitions", labels)
        fired = [ev for r in agent.history for ev in r.alerts if ev.key == key and ev.status == "firing"]
        e2e_report(
            target="kafka",
            protocol="consumer(KIP-848)",
            assignor="uniform",
            path=shown["path"],
            live_cross_rack=live_x,
            achievable_cross_rack=achievable_x,
            expected_live_cross_rack=cross_rack(live_assignment, racks),
            alert=bool(fired),
        )
        assert shown["path"] == "kip848-broker" and shown["assignor"] == "uniform", shown
        assert shown["plan_published"] is False and "generation" not in shown, shown
        assert shown["live"]["cross_rack"] == live_x and shown["achievable"]["cross_rack"] == achievable_x
        assert agent.agent.status().status_json()["groups"][key]["path"] == "kip848-broker"
        # uniform ignores racks: the agent's count of the coordinator's assignment, and its own plan's
        assert live_x == cross_rack(live_assignment, racks), (shown, live_assignment)
        assert live_x > achievable_x, shown
        worse = (live_x - achievable_x) / len(REPLICAS) >= settings.alerts.worsen_delta
        assert bool(fired) == worse, (fired, shown)
        assert all(key not in {p.key for p in r.published} for r in agent.history)
        assert agent.agent.term.book.latest(key) is None
        assert plan_history(real.bootstrap, key, settings.plan_topic) == [], "nothing on the plan topic"

        # The roll-out docs/java.md gives: the consumers restarted one by one with group.remote.assignor=rackplan
        # (the brokers load RackplanServerAssignor). The agent follows the switch and its alert resolves.
        for i, (name, rack) in enumerate(racks.items()):
            members[i].stop()
            members[i] = Member(real.bootstrap, group, name, rack, topic, "rackplan", Ledger())

        def rolled(r: CycleReport) -> bool:
            live = r.live.get(key)
            path = agent.agent.status().status_json()["groups"][key]
            return path["assignor"] == "rackplan" and live is not None and live.total == len(REPLICAS)

        # 120 s: six members restarted, each joining and the coordinator's batched assignments reconciling
        # heartbeats apart (5 s); one CI run of two did not see 0 within 60 s: the last state is printed
        try:
            after = agent.wait_for(lambda r: rolled(r) and r.live[key].cross_rack == 0, timeout=120)
        except AssertionError:
            last = agent.history[-1] if agent.history else None
            state = agent.agent.status().status_json()["groups"].get(key)
            raise AssertionError(
                f"not rolled out to 0 cross-rack: group {state}, last live "
                f"{None if last is None else last.live.get(key)}, coordinator {coordinator_view(real.bootstrap, group)}"
            ) from None
        resolved = [ev for r in agent.history for ev in r.alerts if ev.key == key and ev.status == "resolved"]
        e2e_report(
            rolled_out_to="rackplan",
            live_cross_rack_after=after.live[key].cross_rack,
            resolved=bool(resolved),
        )
        assert bool(resolved) == worse, resolved
        # RackplanServerAssignor reads plans: from the switch on, the group is fed them (it applies one only when
        # every member's group.instance.id matches, which these members lack: it assigns on its own).
        shown = agent.agent.status().plans_json()[key]
        assert (shown["path"], shown["assignor"]) == ("kip848-broker", "rackplan"), shown
        assert shown.get("generation") is not None and "plan_published" not in shown, shown
        agent.stop()
    finally:
        for member in members:
            with contextlib.suppress(Exception):
                member.stop()
