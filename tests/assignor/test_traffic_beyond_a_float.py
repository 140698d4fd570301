"""Traffic whose values are each finite but whose weights or counted sums pass the largest float.

Found by an adversarial hunt (session 29): each raised ``OverflowError`` out of the assignor, an
"internal error" (exit 1). Now the input is refused naming ``cluster.traffic`` (exit 2) where a figure
of the output would be more than a float holds, and planned where only an internal bound would be.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from rackplan.assignor.traffic import scaled_down
from tests.assignor.cli_run import assign_document

BIG = sys.float_info.max


def refused_naming_traffic(code: int, out: str, err: str) -> None:
    assert code == 2 and out == "", err
    assert len(err.strip().splitlines()) == 1 and "error: cluster.traffic: " in err, err
    assert "more bytes/s than a float holds" in err, err


def two_racks(topics: dict[str, Any], traffic: dict[str, Any]) -> dict[str, Any]:
    brokers = [{"id": 1, "rack": "a"}, {"id": 2, "rack": "b"}, {"id": 3, "rack": "c"}]
    return {"brokers": brokers, "topics": topics, "traffic": traffic}


def test_balance_bytes_with_unknown_traffic_at_a_huge_mean_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The known ``1e308`` is a float; the unknown partition weighs the mean, and the two are not: the
    default floor (1% of the weights' mean) raised in ``fsum``. The parse check now sums the weights
    as used, not the known values alone."""
    doc = {
        "cluster": two_racks({"known": [[1]], "unknown": [[2]]}, {"known": [1e308]}),
        "consumer_group": {
            "group_id": "g",
            "assignor": "rack-optimal",
            "balance": "bytes",
            "members": [
                {"member_id": "m1", "rack": "a", "topics": ["known", "unknown"]},
                {"member_id": "m2", "rack": "b", "topics": ["known", "unknown"]},
            ],
        },
    }
    refused_naming_traffic(*assign_document(doc, tmp_path, capsys))


def test_objective_bytes_bound_beyond_a_float_is_the_largest_float(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Unequal subscriptions, two known partitions (1.35e308 in all: a float) and three unknown ones at
    their mean: the unproven plan's bound, in those weights, is beyond a float and the division raised.
    Every figure of the output is a float, so the plan is given, its bound the largest float (not above
    the exact bound)."""
    doc = {
        "cluster": two_racks({"t0": [[1], [1]], "t1": [[1], [3]], "t2": [[3]]}, {"t0": [5e307, 8.5e307]}),
        "consumer_group": {
            "group_id": "g",
            "assignor": "rack-optimal",
            "objective": "bytes",
            "members": [
                {"member_id": "m0", "rack": "b", "topics": ["t1"]},
                {"member_id": "m1", "rack": "c", "topics": ["t2", "t0", "t1"]},
                {"member_id": "m2", "rack": "c", "topics": ["t1"]},
                {"member_id": "m3", "rack": "b", "topics": ["t2", "t1"]},
            ],
        },
    }
    code, out, err = assign_document(doc, tmp_path, capsys)
    assert code == 0, err
    stats = json.loads(out)["stats"]
    assert stats["optimal"] is False and stats["cross_rack_bytes_lower_bound"] == BIG
    assert stats["cross_rack_bytes_per_s"] == 1.35e308 and stats["partitions_without_traffic"] == 3


def test_a_scaled_bound_beyond_a_float_is_the_largest_float() -> None:
    assert scaled_down(1 << 1024, 0) == BIG
    assert scaled_down(3 << 1100, 77) == BIG
    assert scaled_down((1 << 1024) - 1, 0) == BIG  # rounds up to 2**1024 in a division: one step down


def streams(subtopologies: list[dict[str, Any]], clients: int, standbys: int = 0) -> dict[str, Any]:
    return {
        "application_id": "app",
        "subtopologies": subtopologies,
        "clients": [{"process_id": f"p{i}", "rack": "b", "threads": 1} for i in range(clients)],
        "num_standby_replicas": standbys,
    }


@pytest.mark.parametrize(
    ("cluster", "app"),
    [
        pytest.param(  # one 1e308 partition, a source and its own changelog: counted twice per task
            two_racks({"x": [[1]]}, {"x": [1e308]}),
            streams([{"id": "0", "source_topics": ["x"], "changelog_topics": ["x"], "stateful": True}], 1),
            id="source-is-changelog",
        ),
        pytest.param(  # one source read by two sub-topologies: counted once per task of each
            two_racks({"x": [[1]], "cl": [[1]]}, {"x": [1e308], "cl": [1.5e307]}),
            streams(
                [
                    {"id": "0", "source_topics": ["x"], "changelog_topics": ["cl"], "stateful": True},
                    {"id": "1", "source_topics": ["x"], "changelog_topics": ["cl"], "stateful": True},
                ],
                1,
            ),
            id="shared-source",
        ),
        pytest.param(  # actives 1e308 in all, but two standbys of the changelog: 2e308 on standbys
            two_racks({"x": [[1]], "cl": [[1]]}, {"x": [0.0], "cl": [1e308]}),
            streams(
                [{"id": "0", "source_topics": ["x"], "changelog_topics": ["cl"], "stateful": True}], 3, 2
            ),
            id="standby-copies",
        ),
    ],
)
def test_a_streams_apps_counted_traffic_beyond_a_float_exits_2(
    cluster: dict[str, Any], app: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The cluster's total is a float, but the stats count a partition once per (task, topic partition)
    pair (and a standby's once per standby), and ``fsum`` raised on the app's sum, with or without
    ``weigh_by_traffic``."""
    for rack_aware in ({"strategy": "none"}, {"strategy": "min_traffic", "weigh_by_traffic": True}):
        code, out, err = assign_document(
            {"cluster": cluster, "streams_app": {**app, "rack_aware": rack_aware}}, tmp_path, capsys
        )
        refused_naming_traffic(code, out, err)
