"""Cross-rack bytes/s in dollars per month: 2 x price per GB (10^9 bytes) x the bytes of an average month."""

from __future__ import annotations

import pytest

from rackplan.agent.traffic.pricing import dollars_per_month


def test_one_megabyte_per_second_at_aws_prices() -> None:
    """1 MB/s for 730 hours is 2,628 GB; at $0.01 each way, $52.56 a month."""
    assert dollars_per_month(1e6, 0.01) == pytest.approx(52.56)


def test_no_bytes_or_free_bytes_cost_nothing() -> None:
    assert dollars_per_month(0.0, 0.01) == 0.0
    assert dollars_per_month(5e6, 0.0) == 0.0
