"""A traffic window that can never hold ``traffic.min_samples`` samples, one taken per poll.

Found by an adversarial hunt (session 29): ``traffic.window_s`` below ``poll_interval_s`` loaded, and
then nothing was ever measured, silently (two samples never fall in one window). Refused, naming both
keys, when the operator set the traffic key; with the traffic keys at their defaults (a long
``poll_interval_s`` alone, valid before) the meter says it in a warning instead.
"""

from __future__ import annotations

import pytest
import structlog
from pydantic import ValidationError

from rackplan.agent.settings.errors import describe_errors
from rackplan.agent.settings.sections import Settings
from rackplan.agent.testing import FakeAdmin
from tests.agent.traffic.test_sampler import Clock, meter


def problem(doc: dict[str, object]) -> str:
    with pytest.raises(ValidationError) as e:
        Settings.model_validate(doc)
    (line,) = describe_errors(e.value, Settings)
    return line


def test_a_window_shorter_than_the_polls_its_samples_need_is_refused_naming_both_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    line = problem({"poll_interval_s": 30, "traffic": {"window_s": 10}})
    assert line.startswith("traffic.window_s (10 s) is shorter than poll_interval_s (30 s): "), line
    assert "set traffic.window_s to at least 30 s, or traffic.enabled: false" in line
    line = problem({"poll_interval_s": 30, "traffic": {"window_s": 100, "min_samples": 5}})
    assert "poll_interval_s (30 s) x (traffic.min_samples - 1 = 4)" in line and "at least 120 s" in line
    monkeypatch.setenv("RACKPLAN_TRAFFIC__WINDOW_S", "5")  # from the environment, the same
    with pytest.raises(ValidationError, match=r"traffic\.window_s \(5 s\) is shorter than poll_interval_s"):
        Settings.load()
    monkeypatch.delenv("RACKPLAN_TRAFFIC__WINDOW_S")
    # what still loads: just enough, traffic off, and the defaults with a long poll (valid before)
    assert (
        Settings.model_validate({"poll_interval_s": 30, "traffic": {"window_s": 30}}).traffic.window_s == 30
    )
    assert not Settings.model_validate(
        {"poll_interval_s": 60, "traffic": {"window_s": 1, "enabled": False}}
    ).traffic.enabled
    assert Settings.model_validate({"poll_interval_s": 600}).traffic.window_s == 300


def test_samples_further_apart_than_the_window_are_said_once() -> None:
    """What the defaults with a long poll get: a warning at the second sample, at debug level after."""
    admin = FakeAdmin({"orders": [[1]]}, ends={("orders", 0): 5})
    clock = Clock()
    m = meter(admin, clock, window_s=300)
    with structlog.testing.capture_logs() as logs:
        for t in (0, 600, 1200):  # poll_interval_s: 600
            clock.now = float(t)
            assert m.sample({"orders": 1})
            assert m.traffic({"orders": 1}) == {}
    said = [
        (e["log_level"], e.get("gap_s")) for e in logs if e["event"].startswith("traffic samples further")
    ]
    assert said == [("warning", 600.0), ("debug", 600.0)]
