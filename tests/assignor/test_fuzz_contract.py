"""`rackplan assign` on adversarial input: a plan the shared checker accepts, or exit 2 with one line.

Issues 16 and 17 found inputs that crashed the command ("internal error") or
printed errors over several lines.  Every case they list is a regression test
here, and one property test generates those shapes for every consumer
assignor and every Streams assignor and rack strategy: ids from the whole
Unicode range (lone surrogates, digits ``int`` rejects, line separators),
integers at and beyond the int32 / int64 limits, and empty strings wherever a
string is accepted.  The oracle is ../shared/tools/check_plan.py, the
contract's own checker, imported and run on the decoded input and output.
"""

from __future__ import annotations

import importlib.util
import io
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rackplan.cli import main

ROOT = Path(__file__).resolve().parents[2]
CHECKER = ROOT.parent / "shared" / "tools" / "check_plan.py"
INT32, INT64 = 2**31, 2**63
#: integers at and just beyond the limits Kafka's types have
LIMIT_INTS = [
    0,
    1,
    -1,
    INT32 - 1,
    INT32,
    -INT32,
    -INT32 - 1,
    INT64 - 1,
    INT64,
    -INT64,
    -INT64 - 1,
    10**30,
]
#: the one line of a refusal: the field's path (object keys quoted as JSON, so they may hold spaces), a message
ERROR = re.compile(
    r'rackplan: error: (\(document\)|cluster|consumer_group|streams_app|INSTANCE)(?:\["(?:[^"\\]|\\.)*"\]|\S)*: \S'
)


def _load_checker() -> ModuleType | None:
    if not CHECKER.exists():
        return None
    spec = importlib.util.spec_from_file_location("check_plan", CHECKER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check_plan = _load_checker()
#: the checker lives in ../shared: its absence fails these tests (shared_dir), never skips them
needs_checker = pytest.mark.usefixtures("shared_dir")


def run_assign(data: bytes) -> tuple[int, bytes, str]:
    """``rackplan assign -`` in process on these stdin bytes: exit code, stdout bytes, stderr text."""
    saved = sys.stdin, sys.stdout, sys.stderr
    out, err = io.BytesIO(), io.BytesIO()
    stdin = io.TextIOWrapper(io.BytesIO(data))
    stdout, stderr = io.TextIOWrapper(out, encoding="utf-8"), io.TextIOWrapper(err, encoding="utf-8")
    sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
    try:
        code = main(["assign", "-"])
        stdout.flush()
        stderr.flush()
        result = code, out.getvalue(), err.getvalue().decode("utf-8")
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved
    return result


def encode(doc: Any) -> bytes:
    """JSON bytes of a document; ``ensure_ascii`` writes lone surrogates as ``\\ud800`` escapes."""
    return json.dumps(doc, ensure_ascii=True).encode("ascii")


def without_elapsed(out: bytes) -> bytes:
    return re.sub(rb'"elapsed_ms":[0-9.e+-]+', b'"elapsed_ms":0', out)


def assert_plan_or_exit_2(doc: Any, data: bytes | None = None) -> tuple[int, Any, str]:
    """The contract's promise on any input; returns (code, plan or None, stderr)."""
    data = encode(doc) if data is None else data
    code, out, err = run_assign(data)
    assert code in (0, 2), f"exit {code}: {err}"
    if code == 2:
        assert out == b""
        assert len(err.splitlines()) == 1, err
        assert err.endswith("\n") and ERROR.match(err), err
        assert "Traceback" not in err and "internal error" not in err
        return code, None, err
    assert err == "", err
    plan = json.loads(out)
    assert check_plan is not None
    errors: list[str] = []
    if "consumer_group" in doc:
        check_plan.check_consumer(doc, plan, errors)
    else:
        check_plan.check_streams(doc, plan, errors)
    assert not errors, errors
    again = run_assign(data)
    assert again[0] == 0 and without_elapsed(again[1]) == without_elapsed(out)
    return code, plan, err


def consumer_doc(assignor: str = "cooperative-sticky", **member: Any) -> dict[str, Any]:
    """Two brokers on two racks, one topic of four partitions, two members."""
    return {
        "cluster": {
            "brokers": [{"id": 1, "rack": "az-a"}, {"id": 2, "rack": "az-b"}],
            "topics": {"orders": [[1], [2], [1, 2], [2]]},
        },
        "consumer_group": {
            "group_id": "g",
            "assignor": assignor,
            "members": [
                {"member_id": "m-1", "rack": "az-a", "topics": ["orders"], **member},
                {"member_id": "m-2", "rack": "az-b", "topics": ["orders"]},
            ],
        },
    }


def streams_doc(
    strategy: str = "min_traffic", assignor: str = "high-availability", **extra: Any
) -> dict[str, Any]:
    return {
        "cluster": {
            "brokers": [{"id": 1, "rack": "az-a"}, {"id": 2, "rack": "az-b"}, {"id": 3, "rack": "az-c"}],
            "topics": {
                "in": [[1], [2], [3], [1], [2], [3], [1], [2]],
                "log": [[2], [3], [1], [2], [3], [1], [2], [3]],
            },
        },
        "streams_app": {
            "application_id": "app",
            "subtopologies": [
                {"id": "0", "source_topics": ["in"], "changelog_topics": ["log"], "stateful": True}
            ],
            "clients": [
                {"process_id": f"p-{i}", "rack": r, "threads": 1}
                for i, r in enumerate(["az-a", "az-b", "az-c"])
            ],
            "num_standby_replicas": 1,
            "rack_aware": {"strategy": strategy},
            "assignor": assignor,
            **extra,
        },
    }


# ---- issue 16, one regression test per case -------------------------------------------------


@needs_checker
@pytest.mark.parametrize("assignor", ["high-availability", "sticky"])
@pytest.mark.parametrize("strategy", ["min_traffic", "balance_subtopology"])
@pytest.mark.parametrize("field", ["traffic_cost", "non_overlap_cost"])
def test_rack_aware_costs_beyond_int32_exit_2_and_at_int32_plan(
    assignor: str, strategy: str, field: str
) -> None:
    doc = streams_doc(strategy, assignor)
    doc["streams_app"]["rack_aware"][field] = 10**30
    code, _, err = assert_plan_or_exit_2(doc)
    assert code == 2 and f"streams_app.rack_aware.{field}:" in err
    # Kafka's largest weights (Java int) are a valid input and give a valid plan.
    doc["streams_app"]["rack_aware"].update(traffic_cost=INT32 - 1, non_overlap_cost=INT32 - 1)
    assert assert_plan_or_exit_2(doc)[0] == 0


@needs_checker
@pytest.mark.parametrize("sid", ["²", "١", "01", "9" * 5000, "-1", "1_2", "", str(2**31), "0" * 5000 + "7"])
@pytest.mark.parametrize("stateful", [False, True])
def test_subtopology_ids_int_rejects_still_plan(sid: str, stateful: bool) -> None:
    """Stateful too: its standbys' order asks whether the id is a Java int (a 5,000-digit one went
    through ``int()`` and exited 1 until 2026-12-01; found by a hunt)."""
    doc = streams_doc()
    sub = {"id": sid, "source_topics": ["in"], "stateful": stateful}
    doc["streams_app"]["subtopologies"].append({**sub, "changelog_topics": ["log"]} if stateful else sub)
    code, plan, _ = assert_plan_or_exit_2(doc)
    assert code == 0
    tasks = [t for a in plan["streams_app"]["assignment"].values() for t in a["active"]]
    assert sorted(tasks) == sorted([f"0_{p}" for p in range(8)] + [f"{sid}_{p}" for p in range(8)])


def test_task_order_is_numeric_for_ascii_digits_only() -> None:
    from rackplan.assignor.model import sorted_tasks

    tasks = ["10_0", "2_10", "2_9", "²_0", "01_0", "1_0", "a_0", "9" * 5000 + "_0"]
    assert sorted_tasks(tasks) == ["01_0", "1_0", "2_9", "2_10", "10_0", "9" * 5000 + "_0", "a_0", "²_0"]


def test_negative_subtopology_ids_sort_numerically() -> None:
    """A JSON integer id may be negative: "numerically" puts -10 before -1 before 0 (they came after
    every other number, in text order, before; found by an adversarial hunt)."""
    from rackplan.assignor.model import sorted_tasks

    tasks = ["0_0", "1_0", "-1_0", "-10_0", "-9_1", "-9_0", "-007_0", "2_0", "-x_0"]
    assert sorted_tasks(tasks) == ["-10_0", "-9_0", "-9_1", "-007_0", "-1_0", "0_0", "1_0", "2_0", "-x_0"]
    assert sorted_tasks([f"{n}_0" for n in range(-12, 13)]) == [f"{n}_0" for n in range(-12, 13)]


@pytest.mark.parametrize(
    ("where", "field"),
    [
        ("member", "consumer_group.members[0].member_id"),
        ("group", "consumer_group.group_id"),
        ("topic", 'cluster.topics["orders\\ud800"]'),
        ("rack", "consumer_group.members[0].rack"),
    ],
)
def test_lone_surrogates_exit_2_naming_the_field(where: str, field: str) -> None:
    doc = consumer_doc()
    if where == "member":
        doc["consumer_group"]["members"][0]["member_id"] = "m-\ud800"
    elif where == "group":
        doc["consumer_group"]["group_id"] = "\udfff"
    elif where == "topic":
        doc["cluster"]["topics"]["orders\ud800"] = [[1]]
    else:
        doc["consumer_group"]["members"][0]["rack"] = "az-\udc80"
    code, _, err = assert_plan_or_exit_2(doc)
    assert code == 2 and f"error: {field}:" in err, err


def test_lone_surrogate_process_id_exits_2() -> None:
    doc = streams_doc()
    doc["streams_app"]["clients"][0]["process_id"] = "\ud800"
    code, _, err = assert_plan_or_exit_2(doc)
    assert code == 2 and "streams_app.clients[0].process_id:" in err


def _with_integer(doc: dict[str, Any], path: str, digits: str) -> bytes:
    """The document's bytes with the value at ``path`` (a unique placeholder string) replaced by raw digits."""
    node: Any = doc
    *parents, last = path.split(".")
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[int(last) if isinstance(node, list) else last] = "@@INT@@"
    return encode(doc).replace(b'"@@INT@@"', digits.encode())


@pytest.mark.parametrize(
    ("path", "field"),
    [
        ("cluster.brokers.0.id", "cluster.brokers[0].id"),
        ("cluster.topics.orders.0.0", "cluster.topics.orders[0][0]"),
        ("consumer_group.members.0.generation", "consumer_group.members[0].generation"),
    ],
)
@pytest.mark.parametrize("digits", ["9" * 5000, "-" + "9" * 5000, str(INT32), str(INT64), str(-INT32 - 1)])
def test_integers_beyond_int32_exit_2_naming_the_field(path: str, field: str, digits: str) -> None:
    code, _, err = assert_plan_or_exit_2(consumer_doc(), _with_integer(consumer_doc(), path, digits))
    assert code == 2 and f"error: {field}:" in err, err


@needs_checker
def test_huge_integer_in_an_ignored_field_is_ignored() -> None:
    doc = consumer_doc()
    doc["note"] = 0
    assert assert_plan_or_exit_2(doc, _with_integer(doc, "note", "9" * 5000))[0] == 0


@needs_checker
def test_broker_ids_at_the_int32_limits_plan() -> None:
    doc = consumer_doc()
    doc["cluster"]["brokers"] = [{"id": INT32 - 1, "rack": "az-a"}, {"id": -INT32, "rack": "az-b"}]
    doc["cluster"]["topics"]["orders"] = [[INT32 - 1], [-INT32], [INT32 - 1, -INT32]]
    assert assert_plan_or_exit_2(doc)[0] == 0


@needs_checker
@pytest.mark.parametrize("assignor", ["range", "cooperative-sticky", "rack-optimal"])
def test_empty_racks_are_no_rack_for_members(assignor: str) -> None:
    """The issue's shape: "" on brokers and members; the checker recounts cross-rack partitions."""
    doc = {
        "cluster": {
            "brokers": [{"id": 1, "rack": ""}, {"id": 2, "rack": "az-a"}, {"id": 3, "rack": ""}],
            "topics": {"t": [[1], [2], [3], [1, 2], [2], [3]]},
        },
        "consumer_group": {
            "group_id": "g",
            "assignor": assignor,
            "members": [
                {"member_id": "a", "rack": "", "topics": ["t"]},
                {"member_id": "b", "rack": "az-a", "topics": ["t"]},
                {"member_id": "c", "rack": "", "topics": ["t"]},
            ],
        },
    }
    code, plan, _ = assert_plan_or_exit_2(doc)
    assert code == 0
    # Members with "" read nothing cross-rack; "b" is cross-rack exactly for partitions without az-a.
    local = {0: False, 1: True, 2: False, 3: True, 4: True, 5: False}
    b_parts = [p for _, p in plan["consumer_group"]["assignment"]["b"]]
    assert plan["stats"]["cross_rack"] == sum(1 for p in b_parts if not local[p])
    if assignor == "rack-optimal":
        assert all(local[p] for p in b_parts) and plan["stats"]["cross_rack"] == 0


@needs_checker
def test_empty_client_rack_is_no_rack_for_streams() -> None:
    doc = streams_doc()
    doc["streams_app"]["clients"][0]["rack"] = ""
    code, plan, _ = assert_plan_or_exit_2(doc)
    assert code == 0
    # Kafka switches rack awareness off when a client has no rack; the plan is still valid and
    # p-0's tasks count as never cross-rack (the checker recomputed active_cross_rack above).
    assert plan["stats"]["active_cross_rack"] >= 0


def test_agent_locality_judge_treats_empty_rack_as_none() -> None:
    from rackplan.agent.planning.planner import LocalityJudge
    from rackplan.assignor.model import Cluster

    cluster = Cluster(broker_racks={1: "az-a", 2: "az-b"}, topics={"t": ((1,), (2,))})
    judge = LocalityJudge(cluster, None, {1: "az-a", 2: "az-b"}, "nearest-replica")  # type: ignore[arg-type]
    assert judge.cross("", "t", 0) is False and judge.cross("", "t", 1) is False
    assert judge.cross("az-a", "t", 1) is True and judge.cross(None, "t", 1) is False


FOLLOW_UP_CASE = ROOT / "tests" / "data" / "issue16-follow-up.json"


def test_issue16_round_withholds_and_its_follow_up_withholds_nothing() -> None:
    """The issue's instance (a round after a previous one) and the round after it."""
    from rackplan.assignor.consumer.sticky import assign
    from rackplan.assignor.model import ConsumerGroup
    from rackplan.assignor.parse import parse_instance
    from tests.strategies import follow_up

    cluster, group = parse_instance(json.loads(FOLLOW_UP_CASE.read_text()))
    assert isinstance(group, ConsumerGroup)
    plan = assign(cluster, group)
    for _ in range(3):
        group = follow_up(group, plan)
        plan = assign(cluster, group)
        assert plan.revoked == {}


def test_contested_partition_follow_up_withholds_nothing() -> None:
    """Hypothesis' smallest case of the bug: a partition claimed twice was re-placed in the follow-up."""
    from rackplan.assignor.consumer.sticky import assign
    from rackplan.assignor.model import Cluster, ConsumerGroup, Member
    from tests.strategies import follow_up

    cluster = Cluster({1: "az-a"}, {"t0": ((1,),), "t1": tuple((1,) for _ in range(23)), "t2": ((1,),) * 3})
    subs = [("t0",)] * 6 + [("t1",)] * 3 + [("t2",)] * 2 + [("t0", "t1")] * 7
    members = [Member(f"m-{i:02d}", "az-a", s) for i, s in enumerate(subs)]
    members.append(Member("m-18", "az-a", ("t0", "t1", "t2"), owned=(("t2", 2),)))
    members.append(Member("m-19", "az-z", ("t0", "t1"), owned=(("t2", 2),)))
    group = ConsumerGroup("g", "cooperative-sticky", tuple(members))
    plan = assign(cluster, group)
    assert plan.revoked == {"m-18": [("t2", 2)], "m-19": [("t2", 2)]}
    assert assign(cluster, follow_up(group, plan)).revoked == {}


@st.composite
def random_previous_owners(draw: st.DrawFn) -> tuple[Any, Any]:
    """Any claims at all: several claimers per partition, mixed generations, unsubscribed topics."""
    from rackplan.assignor.record import replace
    from tests.strategies import clusters, consumer_groups

    cluster = draw(clusters(max_partitions=10))
    group = draw(consumer_groups(cluster, "cooperative-sticky", max_members=8, with_owned=False))
    tps = [(t, p) for t in sorted(cluster.topics) for p in range(len(cluster.topics[t]))]
    members = tuple(
        replace(
            m,
            owned=tuple(draw(st.lists(st.sampled_from(tps), max_size=len(tps)))),
            generation=draw(st.sampled_from([-1, 1, 2])),
        )
        for m in group.members
    )
    return cluster, replace(group, members=members)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_previous_owners())
def test_follow_up_round_withholds_nothing_after_any_previous_owners(case: tuple[Any, Any]) -> None:
    from rackplan.assignor.consumer.sticky import assign
    from tests.invariants import assert_balanced, assert_valid
    from tests.strategies import follow_up

    cluster, group = case
    plan = assign(cluster, group)
    assert_valid(cluster, group, plan)
    nxt = follow_up(group, plan)
    settled = assign(cluster, nxt)
    assert settled.revoked == {}
    assert_valid(cluster, nxt, settled)
    assert_balanced(nxt, settled)


def test_duplicate_group_instance_id_exits_2() -> None:
    doc = consumer_doc(group_instance_id="static-1")
    doc["consumer_group"]["members"][1]["group_instance_id"] = "static-1"
    code, _, err = assert_plan_or_exit_2(doc)
    assert code == 2 and "consumer_group.members[1].group_instance_id: duplicate" in err
    doc["consumer_group"]["members"][1]["group_instance_id"] = ""
    code, _, err = assert_plan_or_exit_2(doc)
    assert code == 2 and "consumer_group.members[1].group_instance_id:" in err


# ---- issue 17: one line, file vs stdin, nesting ---------------------------------------------

INJECT = "0_0\n\nrackplan: all good"


@pytest.mark.parametrize(
    "where",
    ["task_lags", "tags", "tag_value", "topic", "unknown_topic", "source_topic", "member_id"],
)
def test_errors_are_one_line_whatever_the_keys(where: str) -> None:
    if where in ("task_lags", "tags", "tag_value", "source_topic"):
        doc: dict[str, Any] = streams_doc()
        client = doc["streams_app"]["clients"][0]
        if where == "task_lags":
            client["task_lags"] = {INJECT: "lag"}
        elif where == "tags":
            client["tags"] = {INJECT: 3}
        elif where == "tag_value":
            client["tags"] = {"zone": 3, INJECT: "x"}
        else:
            doc["streams_app"]["subtopologies"][0]["source_topics"] = [INJECT]
    else:
        doc = consumer_doc()
        if where == "topic":
            doc["cluster"]["topics"][INJECT] = [[1, True]]
        elif where == "unknown_topic":
            doc["consumer_group"]["members"][0]["topics"] = [INJECT]
        else:
            doc["consumer_group"]["members"][1]["member_id"] = "m-1"
            doc["consumer_group"]["members"][0]["member_id"] = "m-1"
            doc["consumer_group"]["members"][0]["topics"] = [INJECT + "\u2028\x85"]
    code, _, err = assert_plan_or_exit_2(doc)
    assert code == 2
    assert "\nrackplan: all good" not in err and err.count("\n") == 1


def test_agent_registration_errors_are_one_line() -> None:
    from rackplan.agent.settings.contract_checks import check_streams_app

    spec = streams_doc()["streams_app"]
    spec["clients"][0]["task_lags"] = {INJECT: "x"}
    with pytest.raises(ValueError) as e:
        check_streams_app(spec, "streams_apps[0]")
    assert "\n" not in str(e.value) and "streams_apps[0].clients[0].task_lags[" in str(e.value)


def _cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "rackplan", *args], input=stdin, capture_output=True, timeout=120, cwd=ROOT
    )


@pytest.mark.parametrize(
    "bad", [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xef\xbb\xbf"], ids=["ff", "cut", "surr", "bom"]
)
def test_file_and_stdin_agree_on_invalid_utf8(bad: bytes, tmp_path: Path) -> None:
    data = encode(consumer_doc()).replace(b'"az-a"', b'"az-' + bad + b'"', 1)
    if bad == b"\xef\xbb\xbf":
        data = bad + encode(consumer_doc())
    path = tmp_path / "in.json"
    path.write_bytes(data)
    by_file, by_stdin = _cli("assign", str(path)), _cli("assign", "-", stdin=data)
    assert by_file.returncode == by_stdin.returncode == 2
    assert by_file.stdout == by_stdin.stdout == b""
    assert by_file.stderr == by_stdin.stderr and by_file.stderr.count(b"\n") == 1


@needs_checker
@pytest.mark.parametrize("depth", [1_000, 20_000, 49_000])
def test_deeply_nested_ignored_fields_are_accepted(depth: int) -> None:
    """``depth`` object-array pairs: twice as many levels, up to 98,000 of the 100,000 accepted."""
    doc = consumer_doc()
    doc["ignored"] = 0
    data = encode(doc).replace(b'"ignored": 0', b'"ignored": ' + b'{"a": [' * depth + b"1" + b"]}" * depth)
    assert assert_plan_or_exit_2(doc, data)[0] == 0


def test_nesting_beyond_the_documented_bound_exits_2() -> None:
    from rackplan.assignor.cli import MAX_DEPTH

    doc = consumer_doc()
    doc["ignored"] = 0
    data = encode(doc).replace(
        b'"ignored": 0', b'"ignored": ' + b"[" * (MAX_DEPTH + 1000) + b"]" * (MAX_DEPTH + 1000)
    )
    code, _, err = assert_plan_or_exit_2(doc, data)
    assert code == 2 and f"nested deeper than {MAX_DEPTH}" in err


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity"])
def test_non_json_constants_exit_2(literal: bytes) -> None:
    doc = consumer_doc()
    doc["x"] = 0
    code, _, err = assert_plan_or_exit_2(doc, encode(doc).replace(b'"x": 0', b'"x": ' + literal))
    assert code == 2 and "(document)" in err


@needs_checker
@pytest.mark.parametrize("value", ["true", "1.0", "[1]", '"1"', "null"])
def test_replicas_that_equal_a_broker_id_but_are_not_integers_exit_2(value: str) -> None:
    """``true`` and ``1.0`` compare equal to broker 1: the fast replica check must still see them."""
    doc = consumer_doc()
    data = encode(doc).replace(b'"orders": [[1], [2]', b'"orders": [[1], [' + value.encode() + b"]", 1)
    code, _, err = assert_plan_or_exit_2(doc, data)
    assert code == 2 and "cluster.topics.orders[1][0]:" in err, err


# ---- the property: every assignor and strategy on these shapes ------------------------------

#: text from the whole Unicode range, lone surrogates included, and the empty string
weird_text = st.one_of(
    st.just(""),
    st.text(st.characters(exclude_categories=()), max_size=4),
    st.sampled_from(["²", "١", "0", "01", "9" * 40, "a\nb", "\u2028", "\x85", "\ud800", "_", "1_"]),
)
limit_ints = st.one_of(st.sampled_from(LIMIT_INTS), st.integers(-3, 3))


def mostly(normal: st.SearchStrategy[Any], weird: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``weird`` one draw in eight: most documents stay valid deep enough to reach the assignors."""
    return st.integers(0, 7).flatmap(lambda k: weird if k == 0 else normal)


def _surrogate(s: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in s)


@st.composite
def adversarial_documents(draw: st.DrawFn) -> dict[str, Any]:
    broker_ids = draw(st.lists(mostly(st.integers(1, 4), limit_ints), min_size=1, max_size=4, unique=True))
    racks = mostly(st.sampled_from([None, "az-a", "az-b", ""]), weird_text)
    brokers = [{"id": b, "rack": draw(racks)} for b in broker_ids]
    replica = (
        st.one_of(st.sampled_from(broker_ids), limit_ints)
        if draw(st.integers(0, 9)) == 0
        else st.sampled_from(broker_ids)
    )
    names = draw(
        st.lists(mostly(st.sampled_from(["t0", "t1", "t2"]), weird_text), min_size=1, max_size=3, unique=True)
    )
    topics = {
        n: [draw(st.lists(replica, min_size=1, max_size=2)) for _ in range(draw(st.integers(0, 5)))]
        for n in names
    }
    cluster = {"brokers": brokers, "topics": topics}
    if draw(st.booleans()):
        members = []
        for _ in range(draw(st.integers(1, 4))):
            subs = draw(st.lists(st.sampled_from(names), min_size=1, max_size=len(names), unique=True))
            tps = [[t, p] for t in names for p in range(len(topics[t]))]
            member: dict[str, Any] = {
                "member_id": draw(
                    mostly(st.sampled_from(["m-1", "m-2", "m-3", "m-4", "m-5", "m-6"]), weird_text)
                ),
                "rack": draw(racks),
                "topics": subs,
            }
            if len(tps) > 0 and draw(st.booleans()):
                member["owned"] = draw(st.lists(st.sampled_from(tps), max_size=4))
                member["generation"] = draw(mostly(st.sampled_from([-1, 1, 2]), limit_ints))
            if draw(st.integers(0, 3)) == 0:
                member["group_instance_id"] = draw(st.one_of(st.sampled_from(["s-1", "s-2"]), weird_text))
            members.append(member)
        group = {
            "group_id": draw(mostly(st.just("g"), weird_text)),
            "assignor": draw(st.sampled_from(["range", "cooperative-sticky", "rack-optimal"])),
            "members": members,
        }
        return {"cluster": cluster, "consumer_group": group}
    subs = []
    for _ in range(draw(st.integers(1, 2))):
        src = draw(st.sampled_from(names))
        stateful = draw(st.booleans())
        subs.append(
            {
                "id": draw(mostly(st.sampled_from(["0", "1", "10"]), weird_text)),
                "source_topics": [src],
                "changelog_topics": [draw(st.sampled_from(names))] if stateful else [],
                "stateful": stateful,
            }
        )
    tasks = [f"{s['id']}_{p}" for s in subs for p in range(len(topics[s["source_topics"][0]]))]
    task_names = st.one_of(st.sampled_from(tasks), weird_text) if tasks else weird_text
    clients = []
    for _ in range(draw(st.integers(1, 3))):
        clients.append(
            {
                "process_id": draw(
                    mostly(st.sampled_from(["p-1", "p-2", "p-3", "p-4", "p-5", "p-6"]), weird_text)
                ),
                "rack": draw(racks),
                "threads": draw(mostly(st.integers(1, 2), limit_ints)),
                "tags": draw(st.dictionaries(st.one_of(st.just("zone"), weird_text), weird_text, max_size=2)),
                "previous_active": draw(st.lists(task_names, max_size=2)),
                "task_lags": draw(st.dictionaries(task_names, limit_ints, max_size=2)),
            }
        )
    app = {
        "application_id": draw(mostly(st.just("app"), weird_text)),
        "subtopologies": subs,
        "clients": clients,
        "num_standby_replicas": draw(mostly(st.integers(0, 2), limit_ints)),
        "acceptable_recovery_lag": draw(mostly(st.integers(0, 100), limit_ints)),
        "rack_aware_assignment_tags": draw(st.lists(st.one_of(st.just("zone"), weird_text), max_size=1)),
        "rack_aware": {
            "strategy": draw(st.sampled_from(["none", "min_traffic", "balance_subtopology"])),
            "traffic_cost": draw(mostly(st.integers(0, 10), limit_ints)),
            "non_overlap_cost": draw(mostly(st.integers(0, 10), limit_ints)),
        },
        "assignor": draw(st.sampled_from(["high-availability", "sticky"])),
    }
    return {"cluster": cluster, "streams_app": app}


def _used_ids(doc: dict[str, Any]) -> list[str]:
    if "consumer_group" in doc:
        return [
            doc["consumer_group"]["group_id"],
            *(m["member_id"] for m in doc["consumer_group"]["members"]),
        ]
    return [doc["streams_app"]["application_id"], *(c["process_id"] for c in doc["streams_app"]["clients"])]


@needs_checker
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(adversarial_documents())
def test_any_adversarial_document_plans_validly_or_exits_2(doc: dict[str, Any]) -> None:
    code, _, _ = assert_plan_or_exit_2(doc)
    if any(_surrogate(s) for s in _used_ids(doc)):
        assert code == 2  # such an id could never be written out
