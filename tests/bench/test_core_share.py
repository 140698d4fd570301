"""``bench/bench_core_share.py``: the compiled core's calls are timed inside the call, and put back after."""

from __future__ import annotations

import sys

import pytest

from bench.bench_core_share import measure
from bench.bench_vs_kafka import assignor_call
from bench.vs_kafka_cases import _joins
from rackplan.assignor.flow import compiled


def test_the_cliff_spends_part_of_its_call_in_the_compiled_core_and_the_core_is_restored() -> None:
    if compiled.CORE is None:
        pytest.skip("no compiled flow core in this install")
    core = compiled.CORE
    whole, inside, calls, solves = measure(assignor_call(_joins(False, 0)), 2)
    assert 0 < inside < whole and 0 < solves < calls
    refs = [
        (m.__name__, a)
        for m in list(sys.modules.values())
        if getattr(m, "__name__", "").startswith("rackplan")
        for a in ("CORE", "_core")
        if a in vars(m)
    ]
    assert refs and all(vars(sys.modules[name])[a] is core for name, a in refs), refs
