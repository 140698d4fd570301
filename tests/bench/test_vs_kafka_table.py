"""bench/vs_kafka_table.py and the case list of bench/vs_kafka_cases.py: ratios, medians, repeats, the table.

Nothing is timed: rows are built from given figures and the text is checked exactly.
"""

from __future__ import annotations

import pytest

from bench.vs_kafka_cases import Case, cases, selected, shape
from bench.vs_kafka_table import HEADER, Row, Times, line, ratio, repeats_for, summary, warm_median


def _row(case: str, core_cpu: float, warm_cpu: float | None) -> Row:
    return Row(
        case=case,
        shape="3 x 12",
        core=Times(0.002, core_cpu),
        e2e=Times(0.060, 0.050),
        floor=Times(0.030, 0.025),
        warm=None if warm_cpu is None else Times(0.0011, warm_cpu),
        cold=None if warm_cpu is None else Times(0.030, 0.020),
        jvm=None if warm_cpu is None else Times(0.300, 0.400),
        note="" if warm_cpu is not None else "Kafka: no answer within 120 s",
    )


def test_the_ratio_is_kafka_over_ours_and_missing_without_either() -> None:
    assert ratio(0.5, 0.25) == 2.0
    assert ratio(None, 0.25) is None
    assert ratio(0.5, 0.0) is None


def test_the_warm_median_drops_the_first_half_where_the_jit_compiles() -> None:
    # nanoseconds: the slow first calls would make the median of all 0.5 ms
    assert warm_median([9_000_000, 8_000_000, 7_000_000, 1_000_000, 2_000_000, 1_500_000]) == 0.0015
    assert warm_median([3_000_000]) == 0.003
    with pytest.raises(ValueError):
        warm_median([])


def test_repeats_fill_the_budget_within_bounds_and_the_limit_wins() -> None:
    assert repeats_for(0.01, 1.0, 5, 500) == 100
    assert repeats_for(0.5, 1.0, 5, 500) == 5  # at least ``low``
    assert repeats_for(1e-6, 1.0, 5, 500) == 500  # at most ``high``
    assert repeats_for(0.0, 1.0, 5, 500) == 500
    assert (
        repeats_for(40.0, 3.0, 5, 2000, limit=60.0) == 1
    )  # a slow Kafka: one call, not five past the timeout
    assert repeats_for(10.0, 3.0, 5, 2000, limit=60.0) == 5
    assert repeats_for(100.0, 3.0, 5, 2000, limit=60.0) == 1  # never zero


def test_a_row_reads_cpu_over_wall_and_the_ratios_bold_where_rackplan_is_slower() -> None:
    fast = line(_row("range, equal, fresh", 0.0005, 0.001))
    assert fast == (
        "| range, equal, fresh | 3 x 12 | 0.50 / 2.00 | 50.0 / 60.0 | 25.0 | 2.00 | 1.00 / 1.10 | 2.00x "
        "| 20.0 / 30.0 | 400 / 300 | **0.40x** | 8.00x |"
    )
    slow = line(_row("cooperative-sticky, unequal", 0.2, 0.0008))
    assert "| **0.004x** |" in slow and "200 / 2.00" in slow  # 0.8 ms against 200: not rounded to 0
    assert len(fast.split("|")) == len(HEADER.splitlines()[0].split("|"))


def test_a_row_without_kafka_says_so_and_leaves_its_cells_empty() -> None:
    text = line(_row("streams HA", 0.01, None))
    assert text.startswith("| streams HA (Kafka: no answer within 120 s) | 3 x 12 | 10.0 / 2.00 |")
    assert text.endswith("| - | - | - | - | - | - |")


def test_the_summary_names_each_case_where_rackplan_is_above_kafkas_warm_cpu() -> None:
    rows = [_row("a", 0.001, 0.002), _row("b", 0.004, 0.001), _row("c", 0.001, None), _row("d", 0.2, 0.0006)]
    assert summary(rows) == [
        "rackplan's core below Kafka's warm CPU in 1 of 3 cases Kafka answered",
        "rackplan's core above Kafka's warm CPU: b 3 x 12 (Kafka / ours 0.25x)",
        "rackplan's core above Kafka's warm CPU: d 3 x 12 (Kafka / ours 0.003x)",  # not 0.00x
        "Kafka did not answer: c 3 x 12",
    ]


def test_every_assignor_has_small_cases_and_quick_keeps_small_and_medium() -> None:
    every = cases()
    for prefix in ("range", "cooperative-sticky", "streams"):
        mine = [c for c in every if c.name.startswith(prefix)]
        assert {"small", "medium", "large"} <= {c.size for c in mine}, prefix
    quick = selected(every, quick=True, huge=False, only="")
    assert {c.size for c in quick} == {"small", "medium"}
    assert {c.size for c in selected(every, quick=False, huge=True, only="")} == {
        "small",
        "medium",
        "large",
        "huge",
    }
    assert all("streams" in c.name for c in selected(every, quick=False, huge=False, only="streams"))


def test_the_small_cases_build_the_shapes_they_promise() -> None:
    small = {(c.name, shape(c.build())) for c in cases() if c.size == "small"}
    assert ("range, equal, fresh", "3 x 12") in small
    assert ("range, unequal, 7 racks", "23 x 148") in small
    assert ("cooperative-sticky, unequal, 7 racks, one joins (the cliff)", "23 x 148") in small
    assert ("streams HA, rack-aware", "12 tasks x 3 clients") in small


def test_a_case_builds_its_document_only_when_asked() -> None:
    built: list[str] = []

    def build() -> dict[str, object]:
        built.append("x")
        return {}

    assert selected([Case("x", "small", build)], quick=True, huge=False, only="y") == []
    assert built == []
