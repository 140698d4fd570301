"""``rackplan plans`` on hand-made plan topics (the tester's records): a malformed or schema-breaking record is
refused and reported under its key, never shown as planned, never a traceback; ``--json`` is JSON;
``explain`` and ``diff`` say why a key has no plan; ``explain``'s unfixable partitions count every
registered member's rack, as ``check`` (``best_locality``) does.

The commands run in-process on a :class:`PlansReader` whose topic reads are given (no Kafka) and whose
metadata comes from a :class:`FakeAdmin`: the settings, the registrations merge and the analysis are
the real ones."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, ClassVar

import pytest

import rackplan.agent.runtime.plans_io as plans_io
from rackplan.agent.groups.membership import RealGroup
from rackplan.agent.kafka.tail import RawRecord
from rackplan.agent.planning.fixable import best_locality
from rackplan.agent.protocol.plans import decode_record
from rackplan.agent.runtime.plans_io import PlansProblem, PlansReader
from rackplan.agent.settings.sections import Settings
from rackplan.agent.testing import FakeAdmin
from tests.agent.protocol.test_plan_shapes import CONSUMER_VALUE, STREAMS_VALUE
from tests.agent.runtime.test_plans_cli import outputs

TOPIC = "_rackplan.plans"
#: orders-p on broker p % 3 + 1: az-a holds 0, 3; az-b 1, 4; az-c 2, 5
ADMIN_TOPICS = {"orders": [[p % 3 + 1] for p in range(6)], "clicks": [[1]] * 4}
MEMBERS = [
    {"member_id": "pay-a", "rack": "az-a", "topics": ["orders"]},
    {"member_id": "pay-b", "rack": "az-b", "topics": ["orders"]},
]


class GivenReader(PlansReader):
    """A PlansReader whose topics are ``records`` (topic -> raw records); a topic not given is unreadable."""

    records: ClassVar[dict[str, list[RawRecord]]] = {}

    def _read(self, topic: str, what: str) -> list[RawRecord]:
        if topic not in self.records:
            raise PlansProblem(f"{what} {topic!r} is not given")
        return self.records[topic]


def no_group(group_id: str) -> RealGroup:
    raise PlansProblem(f"group {group_id!r} could not be described: not given")


def run(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    values: list[tuple[bytes, Any]],
    command: str,
    group: str = "",
) -> tuple[int, str, str, str]:
    """The command on a plan topic holding ``values`` (key, JSON value, raw bytes, or None: a tombstone): exit code, --json, text,
    stderr (both runs exit alike)."""
    path = tmp_path / "rackplan.yaml"
    settings = {
        "kafka": {"bootstrap_servers": "127.0.0.1:1"},
        "plan_topic": TOPIC,
        "consumer_groups": [{"group_id": "pay", "assignor": "range", "members": MEMBERS}],
        "log": {"format": "json", "level": "error"},
    }
    path.write_text(json.dumps(settings), encoding="utf-8")
    raw = [
        RawRecord(
            0,
            offset,
            key,
            v if v is None or isinstance(v, bytes) else json.dumps(v).encode(),
            1_800_000_000_000,
            TOPIC,
        )
        for offset, (key, v) in enumerate(values)
    ]
    GivenReader.records = {TOPIC: raw}
    monkeypatch.setattr(
        plans_io, "PlansReader", lambda s, live=None: GivenReader(s, admin=FakeAdmin(ADMIN_TOPICS), live=live)
    )
    code, as_json_out, text, err = outputs(path, command, group, live=no_group)
    assert "internal error" not in err and "Traceback" not in err, err
    return code, as_json_out, text, err


def strict_json(text: str) -> Any:
    """``text`` parsed as JSON proper: NaN and Infinity are no JSON."""

    def refuse(token: str) -> Any:
        raise ValueError(f"non-JSON token {token}")

    return json.loads(text, parse_constant=refuse)


# ---- item 1: the tester's Streams record -----------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        {"application_id": "clicks", "assignment": [{"active": ["0_0"], "standby": [], "warmup": []}]},
        {"application_id": "clicks"},
        {"application_id": "clicks", "assignment": {"p-a": ["0_0"]}},
    ],
    ids=["list", "missing", "not-tasks"],
)
def test_a_malformed_streams_record_is_listed_refused_under_its_key_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: dict[str, Any]
) -> None:
    values = [(b"consumer/pay", CONSUMER_VALUE), (b"streams/clicks", {**STREAMS_VALUE, "streams_app": body})]
    code, out, text, _ = run(tmp_path, monkeypatch, values, "list")
    doc = strict_json(out)
    assert code == 1 and not doc["ok"]
    (pay, clicks) = doc["keys"]
    assert pay["status"] == "planned" and pay["ok"]
    assert clicks["status"] == "no_valid_plan" and clicks["plan"] is None
    ((refused),) = clicks["refused"]
    assert (refused["partition"], refused["offset"], refused["reason"]) == (0, 1, "invalid")
    assert refused["detail"].startswith("streams/clicks: streams_app.assignment")
    assert "refused: partition 0 offset 1: invalid: streams/clicks: streams_app.assignment" in text
    code, out, text, _ = run(tmp_path, monkeypatch, values, "show", "streams/clicks")
    assert (
        code == 1 and strict_json(out)["status"] == "no_valid_plan" and "problem: 1 record(s) refused" in text
    )
    code, _, _, err = run(tmp_path, monkeypatch, values, "explain", "streams/clicks")
    assert (
        code == 1
        and "streams/clicks: no plan of record (the record at partition 0 offset 1 was refused" in err
    )


# ---- item 4: records that break the schema are refused; --json is JSON --------------------------------


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"schema": True, "stats": {"elapsed_ms": math.nan}}, "unsupported schema True"),
        ({"stats": {"elapsed_ms": math.nan}}, "stats.elapsed_ms is nan"),
        ({"stats": {"elapsed_ms": math.inf}}, "stats.elapsed_ms is inf"),
        ({"moved": None}, "moved must be an integer"),
        ({"cluster_fingerprint": 0}, "cluster_fingerprint must be a string"),
        ({"locality": {"fetch_mode": "follower"}}, "locality.fetch_mode must be nearest-replica or leader"),
    ],
)
def test_a_record_breaking_the_schema_is_refused_and_json_output_stays_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: dict[str, Any], said: str
) -> None:
    values = [(b"consumer/pay", {**CONSUMER_VALUE, **change})]
    code, out, text, _ = run(tmp_path, monkeypatch, values, "show", "pay")
    doc = strict_json(out)
    assert code == 1 and doc["status"] == "no_valid_plan" and not doc["ok"]
    assert said in doc["refused"][0]["detail"] and said in text
    assert "NaN" not in out and "Infinity" not in out


# ---- item 5: explain and diff say why there is no plan -----------------------------------------------


def test_explain_and_diff_name_the_refused_record_instead_of_none_on_the_topic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = [(b"consumer/pay", {**CONSUMER_VALUE, "schema": 2})]
    code, _, text, _ = run(tmp_path, monkeypatch, values, "show", "pay")
    assert code == 1 and "refused: partition 0 offset 0: schema: consumer/pay: unsupported schema 2" in text
    for command in ("explain", "diff"):
        code, _, _, err = run(tmp_path, monkeypatch, values, command, "pay")
        assert code == 1 and err == (
            "rackplan: error: consumer/pay: no plan of record (the record at partition 0 offset 0 was "
            "refused: schema: consumer/pay: unsupported schema 2)\n"
        ), err
    two = [*values, (b"consumer/pay", b"{not json")]
    code, _, _, err = run(tmp_path, monkeypatch, two, "explain", "pay")
    assert "no plan of record (2 records refused: partition 0 offset 0: schema: " in err
    assert "; partition 0 offset 1: not_json: " in err
    code, _, _, err = run(
        tmp_path, monkeypatch, [(b"consumer/pay", CONSUMER_VALUE), (b"consumer/pay", None)], "explain", "pay"
    )
    assert code == 1 and err == "rackplan: error: consumer/pay: no plan of record (tombstoned)\n"
    code, _, _, err = run(tmp_path, monkeypatch, [], "explain", "pay")
    assert code == 1 and err == "rackplan: error: consumer/pay: no plan of record (none on the plan topic)\n"


# ---- item 6: explain's unfixable partitions count every registered member's rack ---------------------


def test_explain_counts_the_racks_of_registered_members_the_plan_does_not_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan was made when only pay-a (az-a) was registered; the settings now register pay-b (az-b) too.
    No assignment can fix what no member's rack holds (orders-2, orders-5 in az-c), and ``check``'s floor
    (``best_locality`` of the registration the agent plans now) says the same."""
    only_a = {"group_id": "pay", "assignment": {"pay-a": [["orders", p] for p in range(6)]}, "revoked": {}}
    values = [(b"consumer/pay", {**CONSUMER_VALUE, "consumer_group": only_a})]
    code, out, text, _ = run(tmp_path, monkeypatch, values, "explain", "pay")
    doc = strict_json(out)
    assert code == 0
    assert doc["member_racks"] == ["az-a", "az-b"]
    assert [(u["topic"], u["partition"]) for u in doc["unfixable"]] == [("orders", 2), ("orders", 5)]
    assert "no assignment can fix 2: no replica in any member rack: orders-2, orders-5" in text
    assert doc["counts"]["cross_rack"] == 4  # the plan as it is: pay-a reads az-b's and az-c's partitions
    reader = GivenReader(Settings.load(tmp_path / "rackplan.yaml"), admin=FakeAdmin(ADMIN_TOPICS))
    reg = reader.registration("consumer/pay")
    rec = decode_record(b"consumer/pay", json.dumps(values[0][1]).encode())
    assert reg is not None and rec is not None
    snap, racks = reader.metadata()
    assert best_locality(snap, racks, reg, rec).cross_rack == len(doc["unfixable"])


# ---- text from the topics reaches a terminal: no control character in it -----------------------------------


def test_control_characters_from_the_topic_are_escaped_in_the_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keys, reasons, member ids and refusals come from the plan topic, which any writer with access fills; the
    text printed them as they were, so an escape sequence in a forged record reached the operator's terminal
    (``\\x1b]0;...\\x07`` retitles it, ``\\x1b[2J`` clears it, a newline forges a line).  Now every character
    a terminal would act on is printed escaped, as Python writes it (``\\x1b``).  Found by a hunt."""
    esc = "\x1b[2J\x1b]0;owned\x07"
    body = {**CONSUMER_VALUE["consumer_group"], "assignment": {f"pay-a{esc}": [["orders", 0]]}}
    values = [
        (
            b"consumer/pay",
            {**CONSUMER_VALUE, "reason": f"initial plan{esc}\nproblem: none", "consumer_group": body},
        ),
        (f"consumer/x{esc}".encode(), {"schema": 1}),
    ]
    for command, group in (("list", ""), ("show", "pay"), ("show", f"consumer/x{esc}"), ("explain", "pay")):
        _, out, text, err = run(tmp_path, monkeypatch, values, command, group)
        for shown in (text, err):
            assert not any(ch in shown for ch in "\x1b\x07"), (command, shown)
            assert "\nproblem: none" not in shown
        assert "\\x1b[2J" in text + err, (command, text, err)
        assert "\\u001b[2J" in out  # --json keeps the data as it is, JSON-escaped
