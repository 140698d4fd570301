"""Issue 11 C: the ACLs docs/security.md tells operators to set, on real Kafka with an authorizer.

One secured node (:mod:`integration.kafka.secured`: SASL/PLAIN, the StandardAuthorizer, no ACL = no
right) runs for the module.  The ACLs are created by running the ``kafka-acls.sh`` commands of
docs/security.md themselves (Kafka's ``AclCommand``), with the docs' principals mapped to this
cluster's users: the docs are what is tested.

* ``agent`` has exactly the agent's ACLs of the docs; it must start, create its topics and publish.
* ``follower`` has the docs' follower ACLs *without* Write on the registrations topic (read-only).
* ``intruder`` has the docs' follower ACLs in full (a registering application): it may write
  registrations, never plans.
* ``stranger`` has only its application's ACLs (data topic, consumer group): no control topic at all.

Every user but the agent also gets what any consumer application needs, which is not rackplan's
business: Read on its data topic and on its consumer group.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from integration.kafka import secured
from rackplan.agent.runtime.loop import Agent
from rackplan.agent.settings.sections import Settings

from .conftest import FOLLOWER_SETTINGS, RunningAgent, agent_settings
from .e2e import FollowerApp, Ledger, member_assignment, wait_until

DOCS = Path(__file__).resolve().parents[1] / "docs" / "security.md"
GROUP, TOPIC, PARTITIONS = "payments", "orders", 6
KEY = f"consumer/{GROUP}"
PLANS, REGS = "_rackplan.plans", "_rackplan.registrations"
#: the docs' principals -> this cluster's users
AGENT_PRINCIPAL, APP_PRINCIPAL = "User:rackplan", "User:payments"


def documented_acl_commands() -> list[list[str]]:
    """Every ``kafka-acls.sh $B ...`` command of the docs' ACL section, as arguments after ``$B``."""
    text = DOCS.read_text()
    section = text.split("## ACLs an operator sets", 1)[1].split("\n## ", 1)[0]
    block = re.findall(r"```sh\n(.*?)```", section, re.S)[0]
    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if words[:2] == ["kafka-acls.sh", "$B"]:
            commands.append(words[2:])
    return commands


def with_users(cmd: list[str], users: dict[str, list[str]]) -> list[str]:
    """``cmd`` granting to this cluster's users: each docs principal replaced by its users (maybe none)."""
    out: list[str] = []
    words = iter(cmd)
    for w in words:
        if w == "--allow-principal":
            for user in users.get(next(words), []):
                out += ["--allow-principal", f"User:{user}"]
        else:
            out.append(w)
    return out if "--allow-principal" in out else []


def grants_write_on(cmd: list[str], topic: str) -> bool:
    ops = [cmd[i + 1] for i, w in enumerate(cmd) if w == "--operation"]
    topics = [cmd[i + 1] for i, w in enumerate(cmd) if w == "--topic"]
    return topic in topics and any(op in ("Write", "All") for op in ops)


class Secured:
    """The module's secured node, the documented ACLs applied, and the agent running as ``agent``."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.bootstrap: str = cluster.bootstrap
        self.agent: RunningAgent | None = None
        self.acl_seconds = 0.0
        self.acl_commands = 0

    def config(self, user: str) -> dict[str, Any]:
        return {**secured.client_config(user), "bootstrap.servers": self.bootstrap}

    def follower(self, user: str, instance: str, ledger: Ledger, **settings: Any) -> FollowerApp:
        fs = {**FOLLOWER_SETTINGS, **settings}
        return FollowerApp(self.bootstrap, GROUP, instance, "az-a", [TOPIC], ledger, fs, self.config(user))


@pytest.fixture(scope="module")
def sec() -> Iterator[Secured]:
    docs = documented_acl_commands()
    assert docs, "docs/security.md lists no kafka-acls command"
    cluster = secured.SecuredCluster()
    try:
        report = cluster.start()
        print(report.line())
        s = Secured(cluster)
        commands = []
        for cmd in docs:
            # the read-only follower gets every line of the docs' follower but the Write one
            apps = ["intruder"] if grants_write_on(cmd, REGS) else ["follower", "intruder"]
            if mapped := with_users(cmd, {AGENT_PRINCIPAL: ["agent"], APP_PRINCIPAL: apps}):
                commands.append(mapped)
        # what any consumer application needs for its own data, whatever rackplan does
        app = ["--allow-principal", "User:follower", "--allow-principal", "User:intruder"]
        app += ["--allow-principal", "User:stranger", "--operation", "Read", "--operation", "Describe"]
        commands.append(["--add", *app, "--topic", TOPIC, "--group", GROUP])
        t0 = time.monotonic()
        with ThreadPoolExecutor(3) as pool:  # one JVM each: their start-up, not the broker, is the cost
            list(pool.map(lambda cmd: s.cluster.kafka_acls("--force", *cmd), commands))
        s.acl_commands, s.acl_seconds = len(commands), time.monotonic() - t0
        print(f"{s.acl_commands} kafka-acls commands in {s.acl_seconds:.1f} s")
        admin = AdminClient(s.config("admin"))
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(timeout=30)
        yield s
        if s.agent is not None and s.agent.thread.is_alive():
            s.agent.stop()
    finally:
        cluster.close()


def settings_group(*members: str) -> dict[str, Any]:
    return {
        "group_id": GROUP,
        "assignor": "range",
        "members": [{"member_id": m, "rack": "az-a", "topics": [TOPIC]} for m in members],
    }


def agent_settings_for(sec: Secured) -> Settings:
    return agent_settings(
        sec.bootstrap,
        [settings_group("payments-a", "payments-b")],
        kafka={"bootstrap_servers": sec.bootstrap, "config": secured.client_config("agent")},
        registrations={"ttl_s": FOLLOWER_SETTINGS["registration_ttl_s"]},
        followers={"release_timeout_s": 15.0},
        metadata={"request_timeout_s": 10.0, "max_attempts": 3},
    )


def running_agent(sec: Secured) -> RunningAgent:
    if sec.agent is None:
        sec.agent = RunningAgent(Agent(agent_settings_for(sec)))
    return sec.agent


def test_the_agent_with_only_the_documented_acls_starts_and_publishes(sec: Secured, e2e_report: Any) -> None:
    t0 = time.monotonic()
    agent = running_agent(sec)
    r = agent.wait_for(lambda r: r.ok and any(p.key == KEY for p in r.published), timeout=60)
    first_plan_s = time.monotonic() - t0
    topics = AdminClient(sec.config("admin")).list_topics(timeout=10).topics
    assert {PLANS, REGS, "_rackplan.lease", "_rackplan.alerts", "_rackplan.traffic"} <= set(topics), (
        "its five topics"
    )
    rec = agent.agent.term.book.latest(KEY)
    assert rec is not None and [p.key for p in r.published] == [KEY]
    plan = member_assignment(rec)
    assert sorted(plan) == ["payments-a", "payments-b"]
    assert sum(len(v) for v in plan.values()) == PARTITIONS
    agent.wait_for(lambda r: r.ok, timeout=30)  # and keeps cycling
    print(f"agent: first plan {first_plan_s:.1f} s after start, {len(agent.history)} cycles")
    e2e_report(first_plan_s=round(first_plan_s, 2), acl_commands=sec.acl_commands)


def test_a_follower_without_write_on_registrations_still_follows_the_plan(
    sec: Secured, e2e_report: Any
) -> None:
    agent = running_agent(sec)
    agent.wait_for(lambda r: r.ok, timeout=60)
    ledger = Ledger()
    apps = [sec.follower("follower", f"payments-{m}", ledger) for m in "ab"]
    try:
        rec = agent.agent.term.book.latest(KEY)
        assert rec is not None
        generation, plan = rec.generation, member_assignment(rec)

        def following() -> bool:
            return all(a.follower.assignment() == sorted(plan[a.name]) for a in apps)

        wait_until(following, 30, "both read-only followers to apply the agent's plan")
        # Hold for well beyond the registration TTL: the refused registration must not stop them.
        ttl = float(FOLLOWER_SETTINGS["registration_ttl_s"])
        held_from = time.monotonic()
        while time.monotonic() - held_from < 3 * ttl:
            assert following(), f"a follower stopped following after {time.monotonic() - held_from:.1f} s"
            for a in apps:
                assert a.error is None and a.thread.is_alive()
            time.sleep(0.2)
        failed = {a.name: a.follower.stats["registrations_failed"] for a in apps}
        refused = {a.name: a.follower.stats["registrations_refused"] for a in apps}
        fenced = sum(a.follower.stats["self_fenced"] for a in apps)
        modes = {a.name: a.follower.mode for a in apps}
    finally:
        for a in apps:
            a.stop()
    print(
        f"read-only followers: followed {3 * ttl:.0f} s (registration TTL {ttl:.0f} s), "
        f"registrations failed {failed}, refused {refused}, self-fenced {fenced}, modes {modes}"
    )
    assert all(n > 0 for n in refused.values()), "the refused registrations are counted"
    assert fenced == 0 and set(modes.values()) == {"plan"}
    # The agent never saw them (nothing landed) and kept cycling on the plan of its settings file.
    agent.wait_for(lambda r: r.ok, timeout=30)
    assert agent.agent.term.book.latest(KEY).generation == generation  # type: ignore[union-attr]
    e2e_report(registrations_refused=sum(refused.values()), held_s=3 * ttl)


def test_a_principal_without_write_on_the_plan_topic_cannot_forge_a_plan(
    sec: Secured, e2e_report: Any
) -> None:
    agent = running_agent(sec)
    agent.wait_for(lambda r: r.ok, timeout=60)
    rec = agent.agent.term.book.latest(KEY)
    assert rec is not None
    forged = json.dumps(
        {"schema": 1, "generation": rec.generation + 1000, "group_id": GROUP, "assignment": {}}
    ).encode()
    errors: dict[str, str] = {}
    for user in ("follower", "intruder"):
        p = Producer({**sec.config(user), "linger.ms": 0, "message.timeout.ms": 10000})
        got: list[Any] = []

        def delivered(e: Any, _m: Any, got: list[Any] = got) -> None:
            got.append(e)

        try:
            p.produce(PLANS, key=KEY.encode(), value=forged, on_delivery=delivered)
            p.flush(15)
        except KafkaException as e:
            got.append(e.args[0])
        errors[user] = got[0].name() if got and got[0] is not None else "delivered"
    print(f"forged plans: {errors}")
    assert agent.agent.term.book.latest(KEY) == rec, "nothing forged reached the agent either"
    assert errors == {
        "follower": "TOPIC_AUTHORIZATION_FAILED",
        "intruder": "TOPIC_AUTHORIZATION_FAILED",
    }
    ledger = Ledger()
    apps = [sec.follower("intruder", f"payments-{m}", ledger) for m in "ab"]
    try:
        plan = member_assignment(rec)
        wait_until(
            lambda: all(a.follower.assignment() == sorted(plan[a.name]) for a in apps),
            30,
            "followers to keep the agent's plan",
        )
        assert {a.follower.generation for a in apps} == {rec.generation}
        # The docs' follower rights (Write and Describe on the registrations topic) suffice to register.
        wait_until(lambda: all(a.follower.stats["registrations_failed"] == 0 for a in apps), 5, "no failure")
    finally:
        for a in apps:
            a.stop()
    e2e_report(forgeries_refused=len(errors))


def test_a_follower_that_cannot_read_the_plan_topic_falls_back(sec: Secured, e2e_report: Any) -> None:
    running_agent(sec).wait_for(lambda r: r.ok, timeout=60)
    ledger = Ledger()
    plan_timeout_s = 3.0
    t0 = time.monotonic()
    app = sec.follower("stranger", "payments-a", ledger, plan_timeout_s=plan_timeout_s, fallback_grace_s=0.5)
    try:
        wait_until(lambda: app.follower.mode == "subscription", 30, "the follower to fall back")
        fallback_s = time.monotonic() - t0
        wait_until(lambda: len(app.follower.assignment()) == PARTITIONS, 30, "the group to assign it")
        unavailable = app.follower.stats["control_unavailable"]
    finally:
        app.stop()
    print(f"no Read on the plan topic: fell back after {fallback_s:.1f} s (plan_timeout_s {plan_timeout_s})")
    assert unavailable > 0
    # Before: the unreadable topic was waited on for io_timeout_s twice at start (10.6 s with timeout 3 s).
    assert fallback_s < plan_timeout_s + 0.5 + 3.0
    e2e_report(fallback_s=round(fallback_s, 2), control_unavailable=unavailable)
