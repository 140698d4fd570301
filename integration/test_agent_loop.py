"""The whole loop on the embedded cluster: detect, republish, alert, restart, survive outages."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from rackplan.agent.core.logging import get_logger
from rackplan.agent.kafka.embedded import EmbeddedCluster
from rackplan.agent.kafka.read_back import read_back
from rackplan.agent.planning.planner import instance_document

from .conftest import POLL_S, RunningAgent, agent_settings, range_group

RunAgent = Callable[..., RunningAgent]


def cluster_with_topics(make_cluster: Callable[..., EmbeddedCluster]) -> EmbeddedCluster:
    c: EmbeddedCluster = make_cluster()
    c.create_topic("orders", 12, 2)
    c.create_topic("payments", 6, 1)
    c.create_topic("quiet", 4, 1)
    return c


def plans_on_topic(c: EmbeddedCluster, topic: str = "_rackplan.plans") -> list[tuple[str, Any]]:
    return [
        (k, r) for k, r in read_back({"bootstrap.servers": c.bootstrap_servers}, topic, 10, get_logger("t"))
    ]


def test_change_detected_and_plans_republished(
    make_cluster: Callable[..., EmbeddedCluster], run_agent: RunAgent
) -> None:
    c = cluster_with_topics(make_cluster)
    groups = [range_group("payments", ["orders", "payments"]), range_group("idle", ["quiet"], racks="a")]
    agent = run_agent(agent_settings(c.bootstrap_servers, groups), c)
    first = agent.wait_for(lambda r: r.ok)
    assert sorted((p.key, p.generation, p.reason) for p in first.published) == [
        ("consumer/idle", 1, "initial plan"),
        ("consumer/payments", 1, "initial plan"),
    ]
    # quiet polls publish nothing
    for _ in range(3):
        assert agent.wait_for(lambda r: True).published == []

    t0 = time.monotonic()
    c.decommission(3)
    seen = agent.wait_for(lambda r: r.change is not None)
    assert not seen.confirmed and seen.pending_polls == 1 and seen.published == []
    confirmed = agent.wait_for(lambda r: r.confirmed)
    elapsed = time.monotonic() - t0
    assert elapsed <= 2 * POLL_S + 1.0, f"change confirmed only after {elapsed:.2f}s"
    assert confirmed.change is not None and confirmed.change.counts()["replica_racks"] > 0
    keys = {p.key: p for p in confirmed.published}
    # 'quiet' (rf 1) was reassigned too; whether its rack set changed decides if 'idle' is republished
    assert "consumer/payments" in keys
    pay = keys["consumer/payments"]
    assert pay.generation == 2 and pay.reason.startswith("replica racks changed: ")
    assert pay.locality_before is not None
    assert pay.locality_after.cross_rack <= pay.locality_before.cross_rack
    assert agent.stop() == 0

    on_topic = plans_on_topic(c)
    gens = [r.generation for k, r in on_topic if k == "consumer/payments"]
    assert gens == [1, 2]
    last = on_topic[-1][1]
    assert last is not None and last.value()["schema"] == 1 and last.state == "proposed"


def test_alert_raised_and_resolved(make_cluster: Callable[..., EmbeddedCluster], run_agent: RunAgent) -> None:
    from rackplan.agent.demo.run import WebhookReceiver

    c = make_cluster()
    c.create_topic("payments", 6, 1)  # rf 1: decommissioning moves whole partitions between racks
    receiver = WebhookReceiver()
    webhook = {"url": receiver.url, "timeout_s": 2, "backoff_initial_s": 0.05}
    settings = agent_settings(c.bootstrap_servers, [range_group("payments", ["payments"])], webhook=webhook)
    agent = run_agent(settings, c)
    first = agent.wait_for(lambda r: r.ok)
    assert first.published[0].locality_after.cross_rack == 0
    c.decommission(3)
    confirmed = agent.wait_for(lambda r: r.confirmed)
    firing = [a for a in confirmed.alerts if a.status == "firing"]
    assert [a.key for a in firing] == ["consumer/payments"]
    assert firing[0].current > firing[0].previous
    resolved = agent.wait_for(lambda r: bool(r.alerts))
    assert [(a.key, a.status) for a in resolved.alerts] == [("consumer/payments", "resolved")]
    agent.stop()  # delivers what the webhook still has queued
    alerts = _read_alerts(c)
    assert [a["status"] for a in alerts] == ["firing", "resolved"]
    # Alertmanager's view: the same alert (same labels) first active, then ended.
    assert receiver.statuses() == [("firing", "consumer/payments"), ("resolved", "consumer/payments")]
    receiver.close()


def _read_alerts(c: EmbeddedCluster) -> list[dict[str, Any]]:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer(
        {"bootstrap.servers": c.bootstrap_servers, "group.id": "t", "enable.partition.eof": True}
    )
    consumer.assign([TopicPartition("_rackplan.alerts", 0, OFFSET_BEGINNING)])
    out = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is None:
            continue
        if m.error():
            break
        out.append(json.loads(m.value() or b"null"))
    consumer.close()
    return out


def test_restart_resumes_generations(
    make_cluster: Callable[..., EmbeddedCluster], run_agent: RunAgent
) -> None:
    c = cluster_with_topics(make_cluster)
    groups = [range_group("payments", ["orders"]), range_group("gone", ["payments"])]
    a1 = run_agent(agent_settings(c.bootstrap_servers, groups), c)
    assert len(a1.wait_for(lambda r: r.ok).published) == 2
    assert a1.stop() == 0

    # Same registrations, same cluster: nothing to republish.
    a2 = run_agent(agent_settings(c.bootstrap_servers, groups), c)
    assert a2.wait_for(lambda r: r.ok).published == []
    assert a2.agent.term.book.latest("consumer/payments").generation == 1  # type: ignore[union-attr]
    a2.stop()

    # 'gone' unregistered, 'payments' re-registered with another member set: tombstone and generation 2.
    changed = [range_group("payments", ["orders"], racks="ab")]
    a3 = run_agent(agent_settings(c.bootstrap_servers, changed), c)
    r = a3.wait_for(lambda r: r.ok)
    assert r.tombstoned == ["consumer/gone"]
    assert [(p.key, p.generation, p.reason) for p in r.published] == [
        ("consumer/payments", 2, "registration changed")
    ]
    c.decommission(5)
    assert [p.generation for p in a3.wait_for(lambda r: r.confirmed).published] == [3]
    a3.stop()

    on_topic = plans_on_topic(c)
    assert [(k, None if v is None else v.generation) for k, v in on_topic] == [
        ("consumer/gone", 1),
        ("consumer/payments", 1),
        ("consumer/gone", None),
        ("consumer/payments", 2),
        ("consumer/payments", 3),
    ]


def test_broker_outage_keeps_last_snapshot_and_loses_no_plan(
    make_cluster: Callable[..., EmbeddedCluster], run_agent: RunAgent
) -> None:
    c = cluster_with_topics(make_cluster)
    agent = run_agent(agent_settings(c.bootstrap_servers, [range_group("payments", ["orders"])]), c)
    assert agent.wait_for(lambda r: r.ok).published[0].generation == 1
    good = agent.agent.term.last_good
    c.set_down(-1)
    # A cycle under the outage may wait out the lease's confirmation and the committed offsets' read
    # (10 s each) before it reports: CI-like run ci4 of session 19 saw two slow cycles in 20 s.
    failed = agent.wait_for(lambda r: not r.ok, timeout=60)
    assert failed.error and failed.published == []
    assert agent.agent.term.last_good is good
    c.set_up(-1)
    back = agent.wait_for(lambda r: r.ok, timeout=60)
    assert back.published == []  # nothing changed: no plan regressed or republished
    c.decommission(3)
    assert [p.generation for p in agent.wait_for(lambda r: r.confirmed, timeout=60).published] == [2]
    assert agent.stop() == 0


def test_missing_topics_are_named_with_the_command(
    make_cluster: Callable[..., EmbeddedCluster],
) -> None:
    import io

    from rackplan.agent.core.logging import configure
    from rackplan.agent.kafka.topics import ensure_topics
    from rackplan.agent.runtime.loop import topic_specs

    c = make_cluster()
    settings = agent_settings(c.bootstrap_servers, [])
    buf = io.StringIO()
    configure("json", "info", stream=buf)
    admin = AdminClient({"bootstrap.servers": c.bootstrap_servers})
    missing = ensure_topics(admin, topic_specs(settings), 5, get_logger("t"))
    assert [m.name for m in missing] == [
        "_rackplan.plans",
        "_rackplan.alerts",
        "_rackplan.registrations",
        "_rackplan.lease",
        "_rackplan.traffic",
    ]
    out = buf.getvalue()
    assert "--topic _rackplan.plans --partitions 1 --config cleanup.policy=compact" in out
    assert '"broker_lacks_create_topics": true' in out


def test_agent_refuses_to_run_without_a_plan_topic(
    make_cluster: Callable[..., EmbeddedCluster], run_agent: RunAgent
) -> None:
    c = make_cluster()
    agent = run_agent(agent_settings(c.bootstrap_servers, []))  # no embedded fallback
    agent.thread.join(20)
    assert agent.error is not None and "plan topic '_rackplan.plans' does not exist" in str(agent.error)


def test_a_failing_assignor_does_not_stop_other_groups(
    make_cluster: Callable[..., EmbeddedCluster], run_agent: RunAgent, monkeypatch: Any
) -> None:
    from rackplan.agent.cycle import plan_step
    from rackplan.agent.planning import planner

    real = planner.plan_for

    def flaky(snapshot: Any, racks: Any, reg: Any, last: Any, **options: Any) -> Any:
        if reg.key == "consumer/bad":
            raise RuntimeError("assignor bug")
        return real(snapshot, racks, reg, last, **options)

    monkeypatch.setattr(plan_step, "plan_for", flaky)
    c = cluster_with_topics(make_cluster)
    groups = [range_group("bad", ["orders"]), range_group("good", ["orders"])]
    a = run_agent(agent_settings(c.bootstrap_servers, groups), c)
    r = a.wait_for(lambda r: r.ok)
    assert [p.key for p in r.published] == ["consumer/good"]
    assert "assignor bug" in r.skipped["consumer/bad"]
    again = a.wait_for(lambda r: True)  # retried, still failing, agent alive
    assert "consumer/bad" in again.skipped and again.published == []
    assert a.stop() == 0


CHECKER = Path(__file__).resolve().parents[2] / "shared" / "tools" / "check_plan.py"


def test_published_plans_pass_the_contract_checker(
    make_cluster: Callable[..., EmbeddedCluster], run_agent: RunAgent, tmp_path: Path
) -> None:
    if not CHECKER.exists():  # the contract's checker: its absence must fail, not pass by skipping
        pytest.fail(f"contract checker not found at {CHECKER}", pytrace=False)
    c = cluster_with_topics(make_cluster)
    groups = [range_group("payments", ["orders", "payments"])]
    if importlib.util.find_spec("rackplan.assignor.consumer.rack_optimal") is not None:
        groups.append({**range_group("optimal", ["orders", "payments"]), "assignor": "rack-optimal"})
    a = run_agent(agent_settings(c.bootstrap_servers, groups), c)
    first = a.wait_for(lambda r: r.ok)
    previous = {p.key: p for p in first.published}
    c.decommission(3)
    confirmed = a.wait_for(lambda r: r.confirmed)
    assert confirmed.published
    snap, racks = a.agent.term.acted  # type: ignore[misc]
    regs = {r.key: r for r in a.agent.term.regs}
    for i, rec in enumerate([*first.published, *confirmed.published]):
        last = None if rec.generation == 1 else previous[rec.key]
        basis = first.snapshot if rec.generation == 1 else snap
        basis_racks = basis.resolve_racks(a.agent.term.known) if basis is not None else racks
        assert basis is not None
        inst = tmp_path / f"inst{i}.json"
        plan = tmp_path / f"plan{i}.json"
        inst.write_text(json.dumps(instance_document(basis, basis_racks, regs[rec.key], last)))
        plan.write_text(json.dumps(rec.value()))
        p = subprocess.run(
            [sys.executable, str(CHECKER), str(inst), str(plan)], capture_output=True, text=True
        )
        assert p.returncode == 0, (rec.key, rec.generation, p.stdout, p.stderr)
    a.stop()


def test_archives_a_snapshot_at_start_and_at_every_confirmed_change(
    make_cluster: Callable[..., EmbeddedCluster], run_agent: RunAgent, tmp_path: Path
) -> None:
    from rackplan.agent.cluster.archive import parse_snapshot, read_documents

    c = cluster_with_topics(make_cluster)
    settings = agent_settings(
        c.bootstrap_servers,
        [range_group("payments", ["orders", "payments"])],
        archive_dir=str(tmp_path),
        cluster_name="embedded-1",
        # no traffic: its first measured window adds a line of its own (tests/agent/cycle/test_run_archive.py)
        traffic={"enabled": False},
    )
    agent = run_agent(settings, c)
    agent.wait_for(lambda r: r.ok)
    c.decommission(3)
    agent.wait_for(lambda r: r.confirmed)
    assert agent.stop() == 0
    # one file per cluster, named by Kafka's cluster id (the mock's own); cluster_name is the label
    (archived,) = tmp_path.glob("*.jsonl")
    docs = read_documents([archived])
    assert len(docs) == 2
    before, after = (parse_snapshot(d) for d in docs)
    assert before.cluster_id == after.cluster_id and before.cluster_id not in (None, "embedded-1")
    assert archived.stem == before.cluster_id and before.cluster_name == after.cluster_name == "embedded-1"
    assert [g["group_id"] for g in after.consumer_groups] == ["payments"]
    # The archived replica lists are the cluster's: broker 3 holds replicas before, none after.
    held = [3 in replicas for parts in before.state.topics.values() for replicas in parts]
    assert any(held)
    assert not any(3 in replicas for parts in after.state.topics.values() for replicas in parts)
