"""``bench/bench_revisions.py``: two sides compared on one instance file (here both this tree's interpreter)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.bench_revisions import Row, Side, compare, line, plan_bytes
from bench.installed import ROOT
from bench.vs_kafka_cases import _fresh

HERE = Side(sys.executable, str(ROOT))


def _instance(tmp_path: Path) -> Path:
    path = tmp_path / "instance.json"
    path.write_text(json.dumps(_fresh("cooperative-sticky", 3, 2, 6, 2, even=True)))
    return path


def test_a_plan_read_twice_is_the_same_bytes_its_timing_field_aside(tmp_path: Path) -> None:
    path = _instance(tmp_path)
    first = plan_bytes(HERE, path)
    assert first == plan_bytes(HERE, path)
    doc = json.loads(first)
    assert "elapsed_ms" not in doc["stats"] and doc["consumer_group"]["assignment"]


def test_one_side_against_itself_gives_the_same_plans_and_a_row(tmp_path: Path) -> None:
    same, core_base, core_new, ratio, e2e_base, e2e_new = compare(HERE, HERE, _instance(tmp_path), 2, 1, 2)
    assert same
    assert 0 < core_base < 0.1 and 0 < core_new < 0.1 and ratio > 0  # a 3 x 12 call: well under 100 ms
    assert e2e_base > 0 and e2e_new > 0
    row = line(Row("case", "3 x 12", same, core_base, core_new, ratio, e2e_base, e2e_new))
    assert row.startswith("| case | 3 x 12 | yes |") and row.count("|") == 10
