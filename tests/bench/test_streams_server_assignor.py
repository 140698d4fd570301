"""bench/bench_streams_server_assignor.py: the table says what the JVM's lines say, per shape and assignor."""

from __future__ import annotations

from typing import Any

from bench.bench_streams_server_assignor import table


def _row(
    assignor: str, tasks: int, fresh: float, join: float, cross: int, cross_bytes: float, moves: int
) -> Any:
    return {
        "assignor": assignor,
        "tasks": tasks,
        "members": 10,
        "fresh_ms": fresh,
        "join_ms": join,
        "cross_rack": cross,
        "cross_rack_bytes_per_s": cross_bytes,
        "bytes_per_s": 1000.0,
        "moves_on_join": moves,
    }


def test_each_shape_is_one_row_with_the_three_assignors_in_order() -> None:
    rows = [
        _row("rackplan+traffic", 100, 3.0, 3.5, 39, 126.0, 12),
        _row("sticky", 100, 1.0, 1.5, 97, 681.0, 9),
        _row("rackplan", 100, 2.0, 2.5, 36, 206.0, 10),
        _row("sticky", 1000, 7.0, 7.5, 1009, 654.0, 19),
        _row("rackplan", 1000, 8.0, 8.5, 417, 270.0, 19),
        _row("rackplan+traffic", 1000, 9.0, 9.5, 435, 105.0, 20),
    ]
    lines = table(rows).splitlines()
    assert len(lines) == 4
    assert lines[2] == (
        "| 100 | 10 | 1.00 / 2.00 / 3.00 | 1.50 / 2.50 / 3.50 | 97 / 36 / 39 | 68.1% / 20.6% / 12.6% | 9 / 10 / 12 |"
    )
    assert lines[3].startswith("| 1,000 | 10 | 7.00 / 8.00 / 9.00 |")
    assert lines[3].endswith("| 1,009 / 417 / 435 | 65.4% / 27.0% / 10.5% | 19 / 19 / 20 |")
