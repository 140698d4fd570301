"""Settings that become librdkafka properties, group ids and topics are refused at start when Kafka cannot use them.

An adversarial hunt found each of these accepted by the settings and then failing at run time: an empty
``ha.group_id`` aborted the agent inside confluent-kafka (the supervisor restarted it forever, blaming a
librdkafka bug); ``ha.session_timeout_s`` above an hour and ``ha.max_cycle_s`` above a day ended in
"internal error: KafkaException ... outside allowed range"; a lease topic that was the plan topic made an
agent tombstone another lease group's plan.  Each is now one line naming the setting, exit 2.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from confluent_kafka import KafkaException
from pydantic import ValidationError

from rackplan.agent.core.logging import get_logger
from rackplan.agent.ha.lease import Lease
from rackplan.agent.kafka.timeouts import operation_timeout_s
from rackplan.agent.settings.errors import describe_errors
from rackplan.agent.settings.ha import MAX_CYCLE_S, MAX_SESSION_TIMEOUT_S, HaSettings
from rackplan.agent.settings.section_base import MAX_ADMIN_REQUEST_S, TOPIC_KEYS
from rackplan.agent.settings.sections import Settings
from tests.agent.runtime.test_startup import refused, run


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in list(os.environ):
        if k.startswith("RACKPLAN_"):
            monkeypatch.delenv(k)


def error_lines(doc: dict[str, Any]) -> list[str]:
    with pytest.raises(ValidationError) as e:
        Settings.model_validate(doc)
    return describe_errors(e.value, Settings)


def nested(key: str, value: Any) -> dict[str, Any]:
    section, _, field = key.rpartition(".")
    return {section: {field: value}} if section else {key: value}


# ---- the agents' consumer group ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("group_id", "why"),
    [
        ("", "empty"),
        (" ", "empty"),  # librdkafka strips it: as empty, an abort
        ("\t", "empty"),
        ("agents ", "leading or trailing whitespace"),  # librdkafka would join group "agents"
        ("a\x00b", "a control character"),  # librdkafka would join group "a"
    ],
)
def test_a_group_id_librdkafka_cannot_join_as_given_is_refused_naming_ha_group_id(
    group_id: str, why: str
) -> None:
    (line,) = error_lines({"ha": {"group_id": group_id}})
    assert line.startswith(f"ha.group_id: {why}"), line
    for fine in ("rackplan-agents", "agents of prod", "é"):  # taken, and librdkafka makes a member of it
        ha = Settings.model_validate({"ha": {"group_id": fine}}).ha
        Lease({"bootstrap.servers": "127.0.0.1:1"}, ha, "agent-x", get_logger("t")).close()


def test_an_empty_group_id_from_the_environment_is_refused_naming_the_variable() -> None:
    p = run("agent", "run", "--no-supervisor", env={"RACKPLAN_HA__GROUP_ID": ""}, timeout=60)
    assert refused(p) == (
        "rackplan: error: settings: ha.group_id: empty: the agents' consumer group needs a name "
        "(environment variable RACKPLAN_HA__GROUP_ID)"
    )


@pytest.mark.parametrize("key", ["consumer_groups", "streams_apps"])
def test_a_planned_group_or_app_needs_an_id_its_plan_can_be_keyed_by(key: str) -> None:
    # The contract's parser takes an empty id; the agent then failed every cycle on plan key "consumer/".
    entry: dict[str, Any] = (
        {"group_id": "", "assignor": "range", "members": [{"member_id": "m", "rack": "a", "topics": ["t"]}]}
        if key == "consumer_groups"
        else {"application_id": "", "subtopologies": [], "clients": []}
    )
    id_key = "group_id" if key == "consumer_groups" else "application_id"
    kind = key.split("_")[0]
    assert error_lines({key: [entry]}) == [f"{key}[0].{id_key}: empty: a plan's key is {kind}/<{id_key}>"]


# ---- durations that become librdkafka properties ----------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "limit", "prop"),
    [
        ("ha.session_timeout_s", MAX_SESSION_TIMEOUT_S, "session.timeout.ms"),
        ("ha.max_cycle_s", MAX_CYCLE_S, "max.poll.interval.ms"),
    ],
)
def test_lease_durations_are_bounded_by_what_librdkafka_accepts(key: str, limit: float, prop: str) -> None:
    (line,) = error_lines(nested(key, limit + 1))
    assert line.startswith(f"{key}: at most {limit:g} seconds (librdkafka's {prop}"), line
    # At the bound the lease's consumer is made; just past it librdkafka refuses it (what the settings spare).
    field = key.split(".")[1]
    at_bound = Settings.model_validate(nested(key, limit)).ha
    Lease({"bootstrap.servers": "127.0.0.1:1"}, at_bound, "agent-x", get_logger("t")).close()
    past = HaSettings.model_construct(**{**at_bound.model_dump(), field: limit + 1})
    with pytest.raises(KafkaException, match="outside allowed range"):
        Lease({"bootstrap.servers": "127.0.0.1:1"}, past, "agent-x", get_logger("t"))


@pytest.mark.parametrize("key", ["metadata.request_timeout_s", "traffic.request_timeout_s"])
def test_admin_request_timeouts_are_bounded_by_what_librdkafka_accepts(key: str) -> None:
    import importlib

    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    latest: Any = importlib.import_module(
        "confluent_kafka.admin"
    ).OffsetSpec.latest()  # as agent/kafka/offsets.py

    (line,) = error_lines(nested(key, MAX_ADMIN_REQUEST_S + 1))
    assert line.startswith(f"{key}: at most {MAX_ADMIN_REQUEST_S:g} seconds (librdkafka's admin request"), (
        line
    )
    section, field = key.split(".")
    at_bound = getattr(getattr(Settings.model_validate(nested(key, MAX_ADMIN_REQUEST_S)), section), field)
    admin = AdminClient({"bootstrap.servers": "127.0.0.1:1"})
    offsets = {TopicPartition("t", 0): latest}
    admin.list_offsets(offsets, request_timeout=operation_timeout_s(at_bound))  # what the agent asks: taken
    with pytest.raises(ValueError, match="request_timeout"):
        admin.list_offsets(offsets, request_timeout=operation_timeout_s(at_bound + 1))


def test_ha_bounds_from_a_file_stop_agent_run_with_one_line(tmp_path: Any) -> None:
    config = tmp_path / "rackplan.yaml"
    config.write_text("ha: {session_timeout_s: 4000}\n", encoding="utf-8")
    assert refused(run("agent", "run", "--no-supervisor", config=str(config))) == (
        "rackplan: error: settings: ha.session_timeout_s: at most 3600 seconds "
        "(librdkafka's session.timeout.ms is at most an hour)"
    )


# ---- one topic per kind of record -------------------------------------------------------------------------


PAIRS = [(a, b) for i, a in enumerate(TOPIC_KEYS) for b in TOPIC_KEYS[i + 1 :]]


@pytest.mark.parametrize(("first", "second"), PAIRS)
def test_two_topic_settings_naming_one_topic_are_refused_naming_both(first: str, second: str) -> None:
    doc = nested(first, "shared")
    for k, v in nested(second, "shared").items():
        doc[k] = {**doc.get(k, {}), **v} if isinstance(v, dict) else v
    (line,) = error_lines(doc)
    assert line.startswith(f"{second}: must be a topic of its own, not {first}'s ('shared')"), line
    assert Settings.model_validate({**nested(first, "one"), **nested(second, "two")}) is not None
