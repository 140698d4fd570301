"""``rackplan plans`` on the embedded cluster: the plans a real agent published, read back from the plan topic
with read access alone, a forged record reported and not trusted, ``explain`` and ``diff`` (the live
assignment injected: librdkafka's mock has no DescribeGroups), and exit codes."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from rackplan.agent.groups.membership import RealGroup, RealMember
from rackplan.agent.protocol.plans import PlanRecord
from rackplan.agent.runtime.plans_cli import cmd_plans
from rackplan.agent.runtime.plans_io import PlansProblem
from tests.embedded import embedded_cluster

SECRET = b"plans-secret"
#: a stateful Streams app with a standby: its actives read ``clicks`` and write the changelog
CLICKS = {
    "application_id": "clicks",
    "subtopologies": [
        {
            "id": "0",
            "source_topics": ["clicks"],
            "changelog_topics": ["clicks-store-changelog"],
            "stateful": True,
        }
    ],
    "clients": [{"process_id": "p-a", "rack": "az-a"}, {"process_id": "p-b", "rack": "az-b"}],
    "num_standby_replicas": 1,
}


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, PlanRecord, Any]]:
    """A 3-rack cluster where a real agent (one cycle, with a secret) published the plan of ``pay``;
    the settings file the commands are given, that plan, and the cluster."""
    from rackplan.agent.demo.run import topic_creator
    from rackplan.agent.runtime.loop import Agent
    from rackplan.agent.settings.sections import Settings

    tmp = tmp_path_factory.mktemp("plans")
    with embedded_cluster() as cluster:
        cluster.create_topic("orders", 6, 1)
        cluster.create_topic("clicks", 4, 1)
        cluster.create_topic("clicks-store-changelog", 4, 1)
        (tmp / "secret").write_bytes(SECRET)
        # no member in az-c: its partitions are read cross-rack whatever the plan; pay-d's rack has no broker
        members = [{"member_id": f"pay-{r}", "rack": f"az-{r}", "topics": ["orders"]} for r in "abd"]
        doc = {
            "kafka": {"bootstrap_servers": cluster.bootstrap_servers, "startup_timeout_s": 10},
            "consumer_groups": [{"group_id": "pay", "assignor": "range", "members": members}],
            "streams_apps": [CLICKS],
            "registrations": {"secret_file": str(tmp / "secret")},
            "metadata": {"request_timeout_s": 2},
            "io_timeout_s": 10,
            "log": {"format": "json", "level": "error"},
        }
        path = tmp / "rackplan.yaml"
        path.write_text(yaml.safe_dump(doc), encoding="utf-8")
        agent = Agent(Settings.load(path), create_missing_topics=topic_creator(cluster))
        try:
            agent._first_contact()
            agent.start()
            report = agent.run_once()
        finally:
            agent.close()
        (plan,) = [p for p in report.published if p.key == "consumer/pay"]
        assert [p.key for p in report.published if p.key == "streams/clicks"] == ["streams/clicks"]
        yield path, plan, cluster


def _replica_racks(cluster: Any, topic: str = "orders") -> list[set[str]]:
    """Each partition's replica racks, from the brokers' metadata (what the test checks explain against)."""
    from confluent_kafka.admin import AdminClient

    md = AdminClient({"bootstrap.servers": cluster.bootstrap_servers}).list_topics(topic, timeout=10)
    racks = cluster.broker_racks
    parts = md.topics[topic].partitions
    return [{racks[b] for b in parts[p].replicas} for p in sorted(parts)]


def outputs(path: Path, command: str, group: str = "", live: Any = None) -> tuple[int, str, str, str]:
    """The command in this process, with --json and without: its exit code (the same in both), the
    --json output, the text, and the --json run's stderr."""
    import contextlib
    import io

    docs = []
    for as_json in (True, False):
        out, err = io.StringIO(), io.StringIO()
        args = argparse.Namespace(config=str(path), json=as_json, group=group)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cmd_plans(args, command, live=live)
        docs.append((code, out.getvalue(), err.getvalue()))
    (code, text_json, stderr), (code_text, text, _) = docs
    assert code == code_text, "text and --json exit alike"
    return code, text_json, text, stderr


def run(path: Path, command: str, group: str = "", live: Any = None) -> tuple[int, dict[str, Any], str]:
    """The command in this process: exit code, its --json document, its text."""
    code, text_json, text, stderr = outputs(path, command, group, live)
    return code, (json.loads(text_json) if text_json else {"stderr": stderr}), text


def test_show_and_list_read_the_plan_of_record_the_agent_published(
    published: tuple[Path, PlanRecord, Any],
) -> None:
    path, plan, _ = published
    code, doc, text = run(path, "show", "pay")
    assert code == 0, doc
    assert doc["key"] == "consumer/pay" and doc["status"] == "planned" and doc["ok"]
    shown = doc["plan"]
    assert shown["generation"] == plan.generation and shown["reason"] == plan.reason
    assert shown["created_at"] == plan.created_at and shown["stats"] == dict(plan.document["stats"])
    assert shown["assignment"] == plan.body["assignment"] and shown["partitions"] == 6
    assert shown["locality"]["after"]["cross_rack"] == plan.locality_after.cross_rack
    assert text.startswith("consumer/pay: planned\n") and text.endswith("ok\n")
    assert f"  generation {plan.generation} (proposed)" in text
    code, doc, text = run(path, "list")
    assert code == 0 and doc["authenticated"]
    assert [k["key"] for k in doc["keys"]] == ["consumer/pay", "streams/clicks"]
    assert f"consumer/pay: generation {plan.generation}" in text


def test_explain_names_each_cross_rack_partition_and_agrees_with_the_agents_count(
    published: tuple[Path, PlanRecord, Any],
) -> None:
    path, plan, cluster = published

    def no_describe(group_id: str) -> RealGroup:
        raise PlansProblem(f"group {group_id!r} could not be described: the mock has no DescribeGroups")

    code, doc, text = run(path, "explain", "consumer/pay", live=no_describe)
    assert code == 0, doc
    assert (
        doc["counts"]["cross_rack"] == plan.locality_after.cross_rack
    )  # the agent's count when it published
    assert doc["counts"]["partitions"] == 6 and doc["counts"]["member_rack_unknown"] == 0
    assert doc["member_racks"] == ["az-a", "az-b", "az-d"]
    in_c = {("orders", p) for p, racks in enumerate(_replica_racks(cluster)) if racks == {"az-c"}}
    assert in_c and {(u["topic"], u["partition"]) for u in doc["unfixable"]} == in_c
    assert doc["counts"]["cross_rack"] >= len(in_c)
    for v in doc["cross_rack"]:
        assert v["member_rack"] not in v["replica_racks"] and v["why"] == "no_replica_in_member_rack"
    assert f"no assignment can fix {len(in_c)}: no replica in any member rack: " in text
    assert "note: group 'pay' could not be described" in text


def test_explain_judges_a_streams_apps_tasks_as_its_plan_counted_them(
    published: tuple[Path, PlanRecord, Any],
) -> None:
    """``explain streams/clicks``: every (client, task, role, topic partition) judged from the registration's
    sub-topologies and client racks; per role the cross-rack pairs are the published plan's own statistics."""
    path, _, cluster = published
    code, doc, text = run(path, "explain", "streams/clicks")
    assert code == 0, doc
    plan = next(k["plan"] for k in run(path, "list")[1]["keys"] if k["key"] == "streams/clicks")
    stats = run(path, "show", "streams/clicks")[1]["plan"]["stats"]
    assert doc["generation"] == plan["generation"]
    roles = doc["counts"]["by_role"]
    assert roles["active"] == {
        "pairs": 8,
        "cross_rack": stats["active_cross_rack"],
    }  # 4 tasks: source + changelog
    assert roles["standby"] == {"pairs": 4, "cross_rack": stats["standby_cross_rack"]}
    assert doc["member_racks"] == ["az-a", "az-b"]
    racks = {t: _replica_racks(cluster, t) for t in ("clicks", "clicks-store-changelog")}
    for v in doc["cross_rack"]:
        assert v["role"] in ("active", "standby") and v["member"] in ("p-a", "p-b")
        assert v["member_rack"] not in racks[v["topic"]][v["partition"]]
    assert text.startswith(
        f"streams/clicks generation {plan['generation']} (nearest-replica), client racks: az-a, az-b"
    )
    assert f"cross-rack by role: active {roles['active']['cross_rack']} of 8" in text


def test_diff_names_the_member_off_its_plan(published: tuple[Path, PlanRecord, Any]) -> None:
    path, plan, _ = published
    assignment = {m: sorted((t, p) for t, p in parts) for m, parts in plan.body["assignment"].items()}
    moved = assignment["pay-b"][0]
    live_parts = {
        **assignment,
        "pay-a": sorted([*assignment["pay-a"], moved]),
        "pay-b": assignment["pay-b"][1:],
    }

    def live(group_id: str, parts: dict[str, list[tuple[str, int]]] = live_parts) -> RealGroup:
        # Kafka's own member ids; the plan's ids are the static members' group.instance.id
        members = tuple(
            RealMember(f"k-{m}", "client", "10.0.0.1", m, tuple(ps)) for m, ps in sorted(parts.items())
        )
        return RealGroup(group_id, "STABLE", members)

    code, doc, text = run(path, "diff", "pay", live=live)
    assert code == 1 and not doc["in_step"]
    assert doc["members_differ"] == ["pay-a", "pay-b"]
    assert doc["wrong_member"] == [
        {"topic": moved[0], "partition": moved[1], "planned": "pay-b", "held_by": ["pay-a"]}
    ]
    assert doc["unowned"] == [] and doc["owned_twice"] == []
    assert f"{moved[0]}-{moved[1]}: planned for pay-b, held by pay-a" in text
    code, doc, text = run(path, "diff", "pay", live=lambda g: live(g, assignment))
    assert code == 0 and doc["in_step"] and text.endswith("in step with the plan\n")


def test_a_forged_record_is_reported_and_not_trusted(
    published: tuple[Path, PlanRecord, Any], tmp_path: Path
) -> None:
    from confluent_kafka import Producer

    path, plan, cluster = published
    forged = dict(json.loads(json.dumps(plan.value())))
    forged["generation"] = plan.generation + 100
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    p.produce("_rackplan.plans", key=b"consumer/pay", value=json.dumps(forged).encode())
    assert p.flush(10) == 0
    code, doc, text = run(path, "show", "pay")
    assert code == 1 and doc["plan"]["generation"] == plan.generation  # the agent's, not the forger's
    (refused,) = doc["refused"]
    assert refused["reason"] == "unsigned"
    assert "refused: partition" in text and "problem: 1 record(s) refused" in text
    # Without the secret the same record would be taken: the command says the records are unauthenticated.
    settings = yaml.safe_load(path.read_text())
    del settings["registrations"]
    open_path = tmp_path / "open.yaml"
    open_path.write_text(yaml.safe_dump(settings))
    code, doc, text = run(open_path, "list")
    assert code == 0 and not doc["authenticated"] and "records unauthenticated" in text
    assert doc["keys"][0]["plan"]["generation"] == plan.generation + 100


def test_bad_input_exits_2_naming_it_and_a_missing_plan_exits_1(
    published: tuple[Path, PlanRecord, Any], tmp_path: Path
) -> None:
    path, _, _ = published
    code, doc, _ = run(path, "show", "kafka/x")
    assert code == 2 and doc["stderr"].startswith("rackplan: error: GROUP: bad plan key 'kafka/x'")
    code, doc, _ = run(path, "diff", "streams/clicks")
    assert code == 2 and "Streams app: diff takes a consumer group" in doc["stderr"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("kafka:\n  bootstrap_servers: 127.0.0.1:1\nplan_topik: x\n")
    code, doc, _ = run(bad, "list")
    assert (
        code == 2
        and doc["stderr"].startswith("rackplan: error: settings: ")
        and "plan_topik" in doc["stderr"]
    )
    refused = tmp_path / "refused.yaml"
    refused.write_text("kafka:\n  bootstrap_servers: 127.0.0.1:1\n  config:\n    no.such.property: 1\n")
    code, doc, _ = run(refused, "list")
    assert code == 2 and doc["stderr"].startswith(
        "rackplan: error: settings: kafka.config: librdkafka refuses it"
    )
    code, doc, text = run(path, "show", "nobody")
    assert code == 1 and doc["status"] == "no_valid_plan" and "problem: no plan of record" in text
    code, doc, _ = run(path, "diff", "nobody")
    assert code == 1 and "consumer/nobody: no plan of record" in doc["stderr"]


@pytest.mark.parametrize("command", ["show", "explain", "diff"])
@pytest.mark.parametrize(
    ("group", "said"),
    [
        ("", "GROUP: empty: expected consumer/<group>, streams/<app> or a bare consumer group id"),
        ("consumer/", "GROUP: bad plan key 'consumer/': expected consumer/<group> or streams/<app>"),
        ("kafka/x", "GROUP: bad plan key 'kafka/x': expected consumer/<group> or streams/<app>"),
    ],
)
def test_a_bad_group_argument_exits_2_naming_it_before_any_broker_is_asked(
    tmp_path: Path, command: str, group: str, said: str
) -> None:
    # `plans show ''` asked the brokers first (15 s against unreachable ones, then their error, not the
    # argument's), and with brokers read the whole plan topic to say "bad plan key 'consumer/'".
    path = tmp_path / "r.yaml"
    path.write_text("kafka:\n  bootstrap_servers: 127.0.0.1:1\n  startup_timeout_s: 5\n")
    code, doc, _ = run(path, command, group)
    assert code == 2 and doc["stderr"] == f"rackplan: error: {said}\n"


def test_unreachable_brokers_exit_2_naming_them(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("kafka:\n  bootstrap_servers: 127.0.0.1:1\n  startup_timeout_s: 1\n")
    code, doc, _ = run(path, "list")
    assert code == 2 and "127.0.0.1:1" in doc["stderr"] and "Traceback" not in doc["stderr"]


def test_shell_completion_knows_the_plans_commands() -> None:
    import shtab

    from rackplan.parser import build_parser

    script = shtab.complete(build_parser(), shell="bash")
    for word in ("plans", "explain", "diff", "--json"):
        assert word in script
