"""Log format: JSON unless on a TTY, overridable; librdkafka lines go through the same renderer."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator

import pytest

from rackplan.agent.core.logging import configure, get_logger, kafka_logger, use_json


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    yield
    configure("json", "warning", stream=sys.__stderr__)


def test_auto_means_console_on_a_tty_only() -> None:
    assert use_json("auto", io.StringIO()) is True
    assert use_json("auto", Tty()) is False
    assert use_json("json", Tty()) is True
    assert use_json("console", io.StringIO()) is False


def test_json_lines_with_level_and_timestamp() -> None:
    buf = io.StringIO()
    configure("json", "info", stream=buf)
    get_logger("t").info("plan published", key="consumer/g", generation=2)
    get_logger("t").debug("hidden")
    kafka_logger().warning("FAIL %s", "broker down")
    lines = [json.loads(line) for line in buf.getvalue().splitlines()]
    assert [ln["event"] for ln in lines] == ["plan published", "FAIL broker down"]
    assert lines[0]["generation"] == 2 and lines[0]["level"] == "info" and lines[0]["timestamp"].endswith("Z")
    assert lines[1]["logger"] == "rackplan.librdkafka" and lines[1]["level"] == "warning"


def test_console_format() -> None:
    buf = Tty()
    configure("auto", "info", stream=buf)
    get_logger("t").info("plan published", generation=2)
    out = buf.getvalue()
    assert "plan published" in out and "generation=2" in out and not out.startswith("{")


def test_librdkafka_lines_become_structured_events() -> None:
    from rackplan.agent.core.logging import log_librdkafka, syslog_level, with_kafka_logger

    buf = io.StringIO()
    configure("json", "info", stream=buf)
    # exactly how confluent-kafka forwards a line to the ``logger`` of a client config
    kafka_logger().log(
        40, "%s [%s] %s", "FAIL", "rdkafka#producer-3", "[thrd:b:9092/1]: b:9092/1: Connection refused"
    )
    log_librdkafka(4, "MOCK", "embedded-cluster", "[thrd:mock]: Broker 3 decommissioned")
    log_librdkafka(7, "MOCK", "embedded-cluster", "debug line, filtered at info")
    first, second = (json.loads(line) for line in buf.getvalue().splitlines())
    assert first == {
        "event": "b:9092/1: Connection refused", "facility": "FAIL", "client": "rdkafka#producer-3",
        "thread": "b:9092/1", "level": "error", "logger": "rackplan.librdkafka", "timestamp": first["timestamp"],
    }  # fmt: skip
    assert (
        second["level"] == "warning" and second["client"] == "embedded-cluster" and second["thread"] == "mock"
    )
    assert [syslog_level(n) for n in range(8)] == [50, 50, 50, 40, 30, 20, 20, 10]
    assert with_kafka_logger({"a": 1})["logger"] is kafka_logger()


def test_console_keeps_librdkafka_fields_readable() -> None:
    from rackplan.agent.core.logging import log_librdkafka

    buf = Tty()
    configure("auto", "info", stream=buf)
    log_librdkafka(3, "FAIL", "rdkafka#consumer-1", "[thrd:x]: boom")
    out = buf.getvalue()
    assert "boom" in out and "facility=FAIL" in out and "[thrd:" not in out
