"""Cross-rack bytes/s in dollars per month: 2 x price per GB (10^9 bytes) x the bytes of an average month."""

from __future__ import annotations

import pytest

from rackplan.agent.traffic.pricing import dollars_per_month


def test_one_megabyte_per_second_at_aws_prices() -> None:
    """1 MB/s for 30.4375 days is 2,629.8 GB; at $0.01 each way, $52.596 a month."""
    assert dollars_per_month(1e6, 0.01) == pytest.approx(52.596)


def test_no_bytes_or_free_bytes_cost_nothing() -> None:
    assert dollars_per_month(0.0, 0.01) == 0.0
    assert dollars_per_month(5e6, 0.0) == 0.0


def test_whether_assignment_can_help() -> None:
    from rackplan.agent.cycle.traffic_step import verdict

    assert verdict(0.0, 0.0, 0.01)["assignment_can_help"] == "no cross-rack bytes"
    fixable = verdict(300.0, 100.0, 0.01)
    assert fixable["assignment_can_help"] == "fixable by assignment"
    assert (
        fixable["fixable_cross_rack_bytes_per_s"] == 200.0
        and fixable["unfixable_cross_rack_bytes_per_s"] == 100.0
    )
    stuck = verdict(1e6, 1e6, 0.01)
    assert stuck["assignment_can_help"] == "not fixable by assignment"
    assert stuck["unfixable_cross_rack_dollars_per_month"] == round(dollars_per_month(1e6, 0.01), 2)
