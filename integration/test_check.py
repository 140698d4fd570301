"""``rackplan check`` in a subprocess against the embedded cluster: what it lists, what it leaves alone, its exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from rackplan.agent.kafka.embedded import EmbeddedCluster
from rackplan.agent.protocol.registrations import consumer_registration


def group(gid: str, topics: list[str], racks: tuple[str, ...] = ("az-a", "az-b", "az-c")) -> dict[str, Any]:
    members = [{"member_id": f"{gid}-{r}", "rack": r, "topics": topics} for r in racks]
    return {"group_id": gid, "assignor": "range", "members": members}


def check(
    tmp_path: Path, c: EmbeddedCluster, groups: list[dict[str, Any]], *flags: str
) -> subprocess.CompletedProcess[str]:
    doc = {
        "kafka": {"bootstrap_servers": c.bootstrap_servers, "startup_timeout_s": 10},
        "consumer_groups": groups,
        "metadata": {"request_timeout_s": 1.5},
        "io_timeout_s": 5,
    }
    path = tmp_path / "rackplan.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    cmd = [sys.executable, "-m", "rackplan.cli", "check", "--config", str(path), *flags]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def topics(c: EmbeddedCluster) -> set[str]:
    return set(AdminClient({"bootstrap.servers": c.bootstrap_servers}).list_topics(timeout=10).topics)


def test_a_healthy_cluster_is_listed_with_the_plans_it_would_get_and_nothing_is_created(
    make_cluster: Callable[..., EmbeddedCluster], tmp_path: Path
) -> None:
    c = make_cluster()
    c.create_topic("payments", 6, 2)
    before = topics(c)
    r = check(tmp_path, c, [group("pay", ["payments"])])
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "brokers: 6, racks: az-a, az-b, az-c" in out and "broker 6: rack az-c" in out
    assert "consumer/pay (file): generation 1, cross-rack partitions 0 of 6 (initial plan)" in out
    assert "plans: _rackplan.plans: missing" in out and "would publish: consumer/pay" in out
    assert "traffic: _rackplan.traffic: missing" in out
    assert out.endswith("ok\n")
    assert topics(c) == before  # no agent topic created
    doc = json.loads(check(tmp_path, c, [group("pay", ["payments"])], "--json").stdout)
    assert doc["ok"] and doc["racks"] == ["az-a", "az-b", "az-c"] and doc["would_publish"] == ["consumer/pay"]
    (g,) = doc["groups"]
    assert g["plan"]["cross_rack_after"] == 0 and g["plan"]["partitions"] == 6
    assert topics(c) == before


def test_registrations_on_the_topic_are_read_and_left_there_and_problems_exit_1(
    make_cluster: Callable[..., EmbeddedCluster], tmp_path: Path
) -> None:
    c = make_cluster()
    c.create_topic("orders", 4, 2)
    c.create_topic("_rackplan.registrations", 1, 3)
    p = Producer({"bootstrap.servers": c.bootstrap_servers})
    for member, rack in (("o-1", "az-a"), ("o-2", "rack-b")):  # rack-b: a typo of no broker's rack
        key, value = consumer_registration(
            "orders-app", member, rack=rack, topics=["orders"], timestamp_ms=int(time.time() * 1000)
        )
        p.produce("_rackplan.registrations", key=key.encode(), value=value)
    assert p.flush(10) == 0
    del p
    before = topics(c)
    r = check(tmp_path, c, [group("pay", ["payments"])], "--json")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    by_key = {g["key"]: g for g in doc["groups"]}
    assert by_key["consumer/orders-app"]["source"] == "topic"
    assert by_key["consumer/orders-app"]["plan"]["partitions"] == 4
    assert doc["problems"] == [
        "consumer/orders-app: member 'o-2' has rack 'rack-b', which no broker has (nearest: az-b, az-a, az-c)",
        "consumer/pay: no plan: registration consumer/pay: no subscribed topic exists ('payments')",
        "consumer/pay: member 'pay-az-a' subscribes to 'payments', which the cluster does not have",
        "consumer/pay: member 'pay-az-b' subscribes to 'payments', which the cluster does not have",
        "consumer/pay: member 'pay-az-c' subscribes to 'payments', which the cluster does not have",
    ]
    assert topics(c) == before
    text = check(tmp_path, c, [group("pay", ["payments"])])
    # o-2's rack is no broker's: its partitions read cross-rack, an alert once that holds for alerts.for_s
    assert [(a["key"], a["status"]) for a in doc["alerts"]] == [("consumer/orders-app", "pending")]
    assert text.returncode == 1 and text.stdout.endswith("5 problem(s), 1 alert(s) pending\n")


def test_bad_settings_exit_2_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "rackplan.yaml"
    path.write_text("kafka:\n  bootstrap_servers: 127.0.0.1:1\npoll_intervall_s: 3\n", encoding="utf-8")
    r = subprocess.run(
        [sys.executable, "-m", "rackplan.cli", "check", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("rackplan: error: settings: ") and "poll_intervall_s" in r.stderr
    assert "did you mean poll_interval_s?" in r.stderr  # as `agent run` says it
    assert "Traceback" not in r.stderr


def test_unreachable_brokers_exit_2_naming_them_within_the_startup_timeout(tmp_path: Path) -> None:
    path = tmp_path / "rackplan.yaml"
    path.write_text("kafka:\n  bootstrap_servers: 127.0.0.1:1\n  startup_timeout_s: 2\n", encoding="utf-8")
    r = subprocess.run(
        [sys.executable, "-m", "rackplan.cli", "check", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("rackplan: error: ") and "127.0.0.1:1" in r.stderr
    assert "Traceback" not in r.stderr
