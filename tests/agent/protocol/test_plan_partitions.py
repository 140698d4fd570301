"""Partitions in a plan: Kafka's int32 numbers, each owned once.

A plan naming partition 2**31 decoded, and then every PlanFollower.poll() raised OverflowError from
confluent-kafka's TopicPartition; a plan giving one partition to two members decoded and both followers
read it.  Both are refused at decode, naming the partition; the handover forms (a partition revoked from
its old holder and assigned to its new one, or listed unreleased) are not.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings

from rackplan.agent.planning.handover import revoking_record, split, with_unreleased
from rackplan.agent.protocol.plans import (
    MAX_PARTITION,
    PlanDecodeError,
    PlanRecord,
    decode_record,
    encode_value,
)
from rackplan.agent.protocol.records import REASONS
from tests.agent.planning.test_handover import Scenario, scenarios

KEY = "consumer/g"
SCHEMA = json.loads((Path(__file__).resolve().parents[3] / "docs" / "plan-schema.json").read_text("utf-8"))


def value(
    assignment: dict[str, list[Any]], revoked: dict[str, list[Any]] | None = None, **more: Any
) -> bytes:
    return json.dumps(
        {
            "schema": 1,
            "generation": 2,
            "consumer_group": {"group_id": "g", "assignment": assignment, "revoked": revoked or {}},
            "stats": {},
            **more,
        }
    ).encode()


def refusal(v: bytes) -> PlanDecodeError:
    with pytest.raises(PlanDecodeError) as e:
        decode_record(KEY, v)
    assert e.value.reason in REASONS
    return e.value


@pytest.mark.parametrize("p", [2**31, 2**63, 10**30])
def test_a_partition_beyond_kafkas_int32_is_refused_wherever_it_is(p: int) -> None:
    target = {
        "consumer_group": {"group_id": "g", "assignment": {"m1": [["t", p]]}, "revoked": {}},
        "stats": {},
    }
    for v in (
        value({"m1": [["t", 0], ["t", p]]}),
        value({"m1": [["t", 0]]}, {"m2": [["t", p]]}),
        value({"m1": []}, state="revoking", handover={"awaiting": ["m2"], "target": target}),
        value({"m1": []}, handover={"from_generation": 2, "timed_out": [], "unreleased": {"m2": [["t", p]]}}),
    ):
        assert f"{p}] is beyond Kafka's largest partition number, 2147483647" in str(refusal(v))
        assert not jsonschema.Draft202012Validator(SCHEMA).is_valid(json.loads(v))
    rec = decode_record(KEY, value({"m1": [["t", MAX_PARTITION]]}))
    assert rec is not None and MAX_PARTITION == 2**31 - 1


def test_a_partition_assigned_to_two_members_is_refused_naming_it() -> None:
    e = refusal(value({"m1": [["t", 0], ["t", 1]], "m2": [["t", 2], ["t", 1]]}))
    assert "partition ['t', 1] is assigned to both 'm1' and 'm2'" in str(e)
    target = {
        "consumer_group": {
            "group_id": "g",
            "assignment": {"m1": [["t", 0]], "m2": [["t", 0]]},
            "revoked": {},
        },
        "stats": {},
    }
    e = refusal(value({"m1": []}, state="revoking", handover={"awaiting": ["m2"], "target": target}))
    assert "handover.target.consumer_group.assignment: partition ['t', 0]" in str(e)
    # The contract's forms stay plans: a partition revoked from its old holder while assigned to another
    # (an assignee wins over a revoker), listed unreleased for a departed holder, or twice in one list.
    for v in (
        value({"m1": [["t", 0]]}, {"m2": [["t", 0]]}),
        value(
            {"m1": [["t", 0]]},
            handover={"from_generation": 2, "timed_out": [], "unreleased": {"m2": [["t", 0]]}},
        ),
        value({"m1": [["t", 0], ["t", 0]]}),
        value({"m1": [["t", 0]], "m2": [["u", 0]]}),
    ):
        assert decode_record(KEY, v) is not None


def _record(assignment: dict[str, list[tuple[str, int]]]) -> PlanRecord:
    rec = decode_record(KEY, value({m: [[t, p] for t, p in v] for m, v in assignment.items()}))
    assert rec is not None
    return rec


@settings(max_examples=200, deadline=None)
@given(scenarios())
def test_the_agents_handover_plans_decode_and_a_doubled_owner_never_does(case: Scenario) -> None:
    """Every plan the agent's handover makes (revoking phase, target, unreleased lists) decodes; the same
    plan with one assigned partition given to a second member does not."""
    target, last, followers, lingering = case
    rec = _record(target)
    records = [rec, with_unreleased(rec, lingering)]
    s = split(target, last, followers, lingering)
    if s is not None:
        records += [revoking_record(rec, s, 30.0), with_unreleased(revoking_record(rec, s, 30.0), lingering)]
    for r in records:
        assert decode_record(KEY, encode_value(r)) is not None
    owned = [(m, tp) for m, parts in sorted(target.items()) for tp in parts]
    others = [m for m in ("a", "b", "c", "d", "e") if owned and m != owned[0][0]]
    if owned:
        doubled = {m: list(v) for m, v in target.items()}
        doubled.setdefault(others[0], []).append(owned[0][1])
        with pytest.raises(PlanDecodeError, match="is assigned to both"):
            decode_record(KEY, value({m: [[t, p] for t, p in v] for m, v in doubled.items()}))
