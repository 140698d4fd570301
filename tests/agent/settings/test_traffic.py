"""The ``traffic:`` and ``prices:`` sections: defaults that load again, bounds, per-topic record sizes."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rackplan.agent.settings.sections import Settings


def test_the_defaults_dumped_load_again() -> None:
    """Every default passes its own checks (a byte rate named ``*_s`` was once taken for a duration)."""
    s = Settings()
    again = Settings.model_validate(s.model_dump(mode="json"))
    assert again.traffic == s.traffic and again.prices == s.prices
    assert s.traffic.replan_min_bytes_per_second == 1_000_000 and s.prices.cross_az_per_gb == 0.01


def test_record_sizes_per_topic_and_bounds() -> None:
    s = Settings.model_validate({"traffic": {"record_bytes": 300, "topic_record_bytes": {"orders": 50}}})
    assert s.traffic.bytes_per_record("orders") == 50 and s.traffic.bytes_per_record("other") == 300
    for bad in ({"min_samples": 1}, {"window_s": 0}, {"replan_min_fraction": 1.5}, {"unknown": 1}):
        with pytest.raises(ValidationError):
            Settings.model_validate({"traffic": bad})
    with pytest.raises(ValidationError):
        Settings.model_validate({"prices": {"cross_az_per_gb": -0.01}})
