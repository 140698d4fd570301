"""Agent high availability: two agents (processes), one publishes; kill it and the other takes over.

The followers here are simulated by their registration records, so the test
decides when releases are confirmed: the leader is killed (SIGKILL, no
goodbye) in the middle of a two-phase handover, and the new leader must finish
that handover (no second revoking plan), from the generation the plan topic
says, with a higher leadership epoch.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from rackplan.agent.protocol.registrations import FollowerStatus, consumer_registration

from .conftest import Target
from .e2e import RACKPLAN, AgentProcess, Watcher, wait_until


def session_s(target: Target) -> float:
    """The agents' session timeout: short on the mock; brokers refuse less than 6 s by default."""
    return 2.0 if target.cluster is not None else 6.0


def takeover_budget(target: Target) -> float:
    """The session timeout, one rebalance (up to another session timeout while the group waits for its
    members to rejoin), the new leader's start-up (replays), and room for a busy machine."""
    return 2 * session_s(target) + 6.0


def agent_config(target: Target, *extra: dict[str, Any]) -> dict[str, Any]:
    return target.agent_doc(
        {
            "poll_interval_s": 0.3,
            "registrations": {"ttl_s": 120},
            "followers": {"release_timeout_s": 60},
            "ha": {"enabled": True, "session_timeout_s": session_s(target)},
            "http": {"port": 0},
            "io_timeout_s": 10,
            "metadata": {
                "request_timeout_s": 1.5,
                "max_attempts": 2,
                "backoff_initial_s": 0.05,
                "backoff_max_s": 0.1,
            },
            "log": {"format": "json", "level": "info"},
        },
        *extra,
    )


def register(target: Target, group: str, topic: str, members: dict[str, str], released: int) -> None:
    """Records of simulated plan followers: member id -> rack."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": target.bootstrap})
    for mid, rack in members.items():
        key, value = consumer_registration(
            group,
            mid,
            rack=rack,
            topics=[topic],
            timestamp_ms=int(time.time() * 1000),
            assignor="range",
            follower=FollowerStatus(released_generation=released, mode="plan"),
        )
        p.produce(target.control_topics["registrations_topic"], key=key.encode(), value=value)
    assert p.flush(10) == 0


def test_leader_killed_mid_handover_the_standby_finishes_it(
    target: Target, tmp_path: Path, e2e_report: Any
) -> None:
    orders = target.create_topic("orders", 6, 2)
    target.create_agent_topics()
    group = target.name("pay")
    key = f"consumer/{group}"
    config = agent_config(target)
    agents = {name: AgentProcess(config, tmp_path, name) for name in ("agent-1", "agent-2")}
    watcher: Watcher | None = None

    def plans() -> list[Any]:
        assert watcher is not None
        return watcher.refresh().history(key)

    def beats() -> list[Any]:
        assert watcher is not None
        return watcher.refresh().beats

    try:
        agents["agent-1"].start()
        wait_until(lambda: target.control_topics["lease_topic"] in _topics(target), 60, "the agents' topics")
        watcher = Watcher(
            target.bootstrap, target.control_topics["plan_topic"], target.control_topics["lease_topic"]
        )
        wait_until(lambda: any(h.agent_id == "agent-1" for h in beats()), 30, "agent-1 to lead")
        agents["agent-2"].start()
        wait_until(
            lambda: any(e["event"].startswith("standby") for e in agents["agent-2"].events()),
            30,
            "agent-2 to stand by",
        )
        register(target, group, orders, {"m1": "az-a", "m2": "az-b"}, released=0)
        wait_until(lambda: len(plans()) == 1, 20, "the first plan")
        register(target, group, orders, {"m3": "az-c"}, released=0)  # m3 takes partitions: a handover
        wait_until(lambda: len(plans()) == 2, 20, "the revoking plan")
        first, revoking = plans()
        assert (first.generation, first.state) == (1, "proposed")
        assert (revoking.generation, revoking.state) == (2, "revoking")
        awaiting = revoking.handover["awaiting"]
        assert awaiting and set(awaiting) <= {"m1", "m2"}
        # Only the leader publishes: the agent that wrote the heartbeats wrote the plans.
        leader = revoking.publisher["agent_id"]
        assert {h.agent_id for h in beats()} == {leader} == {first.publisher["agent_id"]}
        old_epoch = revoking.publisher["epoch"]
        standby = next(n for n in agents if n != leader)

        t_kill = time.monotonic()
        agents[leader].kill()
        wait_until(
            lambda: any(h.agent_id == standby for h in beats()),
            takeover_budget(target) + 5,
            "the standby's first heartbeat",
            step=0.1,
        )
        takeover_s = time.monotonic() - t_kill
        wait_until(
            lambda: any(e["event"] == "resuming handover" for e in agents[standby].events()),
            10,
            "the new leader to resume the handover",
        )
        time.sleep(1.0)  # several cycles of the new leader: it must not start a handover of its own
        assert [(r.generation, r.state) for r in plans()] == [(1, "proposed"), (2, "revoking")]

        register(target, group, orders, {"m1": "az-a", "m2": "az-b"}, released=2)
        wait_until(lambda: len(plans()) == 3, 20, "the handover's target")
        final = plans()[2]
        assert (final.generation, final.state) == (3, "proposed")
        assert final.handover == {"from_generation": 2, "timed_out": []}
        assert final.body["assignment"] == revoking.handover["target"]["consumer_group"]["assignment"]
        assert final.publisher["agent_id"] == standby and final.publisher["epoch"] > old_epoch

        agents[leader].start()  # back, as the standby now
        wait_until(
            lambda: sum(e["event"].startswith("standby") for e in agents[leader].events()) >= 2,
            30,
            "the restarted agent to stand by",
        )
        time.sleep(1.0)
        history = plans()
        all_beats = beats()
    finally:
        codes = {n: a.stop() for n, a in agents.items()}
        if watcher is not None:
            watcher.close()

    gens = [r.generation for r in history]
    epochs = [r.publisher["epoch"] for r in history]
    by_epoch: dict[int, set[str]] = {}
    for h in all_beats:
        by_epoch.setdefault(h.epoch, set()).add(h.agent_id)
    e2e_report(
        target=target.kind,
        takeover_s=round(takeover_s, 2),
        session_timeout_s=session_s(target),
        generations=gens,
        epochs=sorted(by_epoch),
    )
    assert gens == [1, 2, 3], "no regression, no duplicate handover, nothing republished by the standby"
    assert epochs == sorted(epochs)
    assert all(len(ids) == 1 for ids in by_epoch.values()), "one agent per leadership epoch"
    assert takeover_s <= takeover_budget(target)
    assert codes[standby] == 0


def _topics(target: Target) -> set[str]:
    from confluent_kafka.admin import AdminClient

    return set(AdminClient({"bootstrap.servers": target.bootstrap}).list_topics(timeout=10).topics)


def test_two_agents_of_default_settings_one_publishes_the_other_stands_by(
    target: Target, run_agent: Any, e2e_report: Any
) -> None:
    """``ha.enabled`` is on by default: a second agent started with the same settings (which say nothing
    of HA) joins the lease group and stands by; only the first publishes.  When the first stops, the
    second leads and, finding the plan of record current, republishes nothing."""
    from .conftest import range_group

    orders = target.create_topic("orders", 6, 2)
    key = f"consumer/{target.name('pay')}"
    settings = target.agent_settings([range_group(target.name("pay"), [orders])])
    assert settings.ha.enabled, "the default"
    first = run_agent(settings, target.cluster)
    first.wait_for(lambda r: any(p.key == key for p in r.published), timeout=60)
    second = run_agent(settings, target.cluster)
    time.sleep(3)  # ten of the settings' poll intervals: a publishing agent would have cycled
    assert first.agent.leader and not second.agent.leader
    assert second.reports.empty(), "the standby runs no cycle"
    t0 = time.monotonic()
    first.stop()
    stop_s = time.monotonic() - t0
    second.wait_for(lambda r: r.ok, timeout=60)
    takeover_s = time.monotonic() - t0
    assert second.agent.leader
    second.wait_for(lambda r: r.ok, timeout=30)
    assert not [p for r in second.history for p in r.published], "the plan of record was current"
    e2e_report(
        target=target.kind,
        standby_cycles_while_first_led=0,
        stop_s=round(stop_s, 2),
        takeover_after_stop_s=round(takeover_s, 2),
    )


def _get(port: int, path: str) -> tuple[int, Any]:
    import json
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_the_standby_says_who_leads_and_where_the_plans_are(target: Target, run_agent: Any) -> None:
    """Issue 28: the standby's /v1/plans answered ``{}``.  Over HTTP, it names the leader (agent id, epoch,
    a fresh heartbeat) read from the lease topic and points to the plan topic; the leader's answers are
    its plans of record, as before.  When the leader stops, the standby leads and answers with plans."""
    from rackplan.agent.demo.run import topic_creator
    from rackplan.agent.runtime.loop import Agent

    from .conftest import RunningAgent, range_group

    orders = target.create_topic("orders", 6, 2)
    key = f"consumer/{target.name('pay')}"
    groups = [range_group(target.name("pay"), [orders])]
    creator = None if target.cluster is None else topic_creator(target.cluster)

    def start(agent_id: str) -> RunningAgent:
        settings = target.agent_settings(groups, {"ha": {"agent_id": agent_id}, "http": {"port": 0}})
        return RunningAgent(Agent(settings, create_missing_topics=creator, serve_http=True))

    first = start("agent-one")
    second: RunningAgent | None = None
    try:
        first.wait_for(lambda r: any(p.key == key for p in r.published), timeout=60)
        second = start("agent-two")
        s = second
        wait_until(lambda: s.agent.http is not None and s.agent.leader_watch is not None, 30, "the standby")
        assert s.agent.http is not None and first.agent.http is not None
        port = s.agent.http.port
        wait_until(lambda: _get(port, "/v1/plans")[1].get("leader") is not None, 30, "the leader named")
        code, plans = _get(port, "/v1/plans")
        assert code == 200 and key not in plans and plans["role"] == "standby"
        assert plans["agent_id"] == "agent-two"
        assert plans["leader"]["agent_id"] == "agent-one"
        assert plans["leader"]["epoch"] == first.agent.epoch
        assert plans["leader"]["live"] and 0 <= plans["leader"]["heartbeat_age_s"] < 10
        assert plans["plan_topic"] == target.control_topics["plan_topic"]
        code, status = _get(port, "/v1/status")
        assert code == 200 and status["role"] == "standby" and status["ready"] is False
        assert status["leader"]["agent_id"] == "agent-one"
        code, leader_plans = _get(first.agent.http.port, "/v1/plans")
        assert code == 200 and set(leader_plans) == {key}  # the leader's answer: its plans of record only
        code, leader_status = _get(first.agent.http.port, "/v1/status")
        assert leader_status["role"] == "leader" and leader_status["agent_id"] == "agent-one"
        assert leader_status["epoch"] == first.agent.epoch
        first.stop()
        s.wait_for(lambda r: r.ok, timeout=60)
        code, plans = _get(port, "/v1/plans")
        assert code == 200 and key in plans and "role" not in plans
        assert _get(port, "/v1/status")[1]["role"] == "leader"
    finally:
        for r in (first, second):
            if r is not None and r.thread.is_alive():
                r.stop()


def test_two_deployments_in_one_agents_group_each_lead_and_the_second_names_the_first(
    real: Target, tmp_path: Path, e2e_report: Any
) -> None:
    """Two deployments (their own topics) in one ``ha.group_id``, as the demo's ``agent run`` once was:
    each leads on its own lease, and the one that leads second warns, naming the first one's lease topic
    and the setting (agent/ha/shared_group.py); the first, alone in the group at its start, says nothing.
    On the embedded cluster nothing is said: it answers no DescribeGroups."""
    real.create_agent_topics()
    other = {k: real.name(f"_team-b.{k.split('_')[0]}") for k in real.control_topics}
    ha = {"lease_topic": other["lease_topic"]}  # the group stays this target's rackplan-agents
    b_topics = {k: v for k, v in other.items() if k != "lease_topic"}
    agents = {
        "team-a": AgentProcess(agent_config(real), tmp_path, "team-a"),
        "team-b": AgentProcess(agent_config(real, b_topics, {"ha": ha}), tmp_path, "team-b"),
    }
    warning = "another deployment's agents share this agents' group"
    try:
        agents["team-a"].start()
        wait_until(
            lambda: any(e["event"] == "leading" for e in agents["team-a"].events()), 60, "team-a to lead"
        )
        t0 = time.monotonic()
        agents["team-b"].start()
        wait_until(
            lambda: any(e["event"] == "leading" for e in agents["team-b"].events()), 60, "team-b to lead"
        )
        lead_s = time.monotonic() - t0
        wait_until(
            lambda: any(e["event"].startswith(warning) for e in agents["team-b"].events()),
            30,
            "team-b's warning",
        )
        (said,) = [e for e in agents["team-b"].events() if e["event"].startswith(warning)]
        assert said["level"] == "warning" and "ha.group_id" in said["event"]
        assert said["other_lease_topics"] == [real.control_topics["lease_topic"]]
        assert said["lease_topic"] == other["lease_topic"] and said["group"] == real.name("rackplan-agents")
        assert not [e for e in agents["team-a"].events() if e["event"].startswith(warning)]
    finally:
        codes = {n: a.stop() for n, a in agents.items()}
    assert codes == {"team-a": 0, "team-b": 0}, codes
    e2e_report(target="kafka", second_deployment_led_after_s=round(lead_s, 1))


def test_a_session_timeout_the_brokers_refuse_exits_2_naming_the_setting(
    target: Target, tmp_path: Path
) -> None:
    """Brokers refuse a session below their ``group.min.session.timeout.ms`` (6 s by default) at every join:
    the agent stood by for good, with no leader and one error line that named no setting (found by a hunt).
    The mock cluster accepts any session timeout, so this runs on real Kafka only."""
    if target.cluster is not None:
        pytest.skip("librdkafka's mock cluster accepts any session timeout")
    doc = agent_config(target, {"ha": {"session_timeout_s": 2.0}})
    path = tmp_path / "agent.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    t0 = time.monotonic()
    p = subprocess.run(
        [*RACKPLAN, "agent", "run", "--no-supervisor", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    errors = [line for line in p.stderr.splitlines() if line.startswith("rackplan: error:")]
    assert p.returncode == 2, p.stderr[-3000:]
    assert len(errors) == 1 and "ha.session_timeout_s 2 is refused by the brokers" in errors[0], errors
    assert time.monotonic() - t0 < 60
