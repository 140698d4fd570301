"""Log format: JSON unless on a TTY, overridable; librdkafka lines go through the same renderer."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator

import pytest

from agent.logging import configure, get_logger, kafka_logger, use_json


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
