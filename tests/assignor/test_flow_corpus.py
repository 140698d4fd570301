"""Plans and flows byte for byte as they were before the min-cost flow was made faster (issue 29).

The solver's speed-ups (:mod:`rackplan.assignor.flow.mincost`: the residual graph built by
slices, the cut-off that stops a flow which cannot beat a known cost) must not change one
flow: the assignors read holders back from the flow itself, not only its cost, so a different
optimum of the same cost would change plans.  The digests in ``data/flow_corpus.json`` were
written by the solver before those changes (commit 555cff1) with this module's own generators:

    PYTHONPATH=. .venv/bin/python -m tests.assignor.test_flow_corpus   # rewrites the digests

Three corpora: random flow problems (both solvers, every edge's flow), the cooperative-sticky
and rack-optimal plans of seeded seven-rack groups with one member joining (issue 29's cliff
shape, smaller), and the plan document of every shared sample instance that is not ``bad-*``.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path
from typing import Any

from rackplan.assignor.cli import assign_document
from rackplan.assignor.consumer import run_assignor
from rackplan.assignor.flow import InfeasibleFlow, min_cost_flow, min_cost_flow_phases
from rackplan.assignor.record import replace
from tests.assignor.test_sticky_work import one_joins, seven_racks
from tests.conftest import SHARED

DATA = Path(__file__).parent / "data" / "flow_corpus.json"
#: (seed, members, partitions) of the seven-rack groups: small enough for the unit suite.
GROUPS = [(seed, 6 + seed % 12, 30 + (seed * 37) % 90) for seed in range(16)]


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def random_problem(seed: int) -> tuple[int, list[tuple[int, int, int, int]], list[int]]:
    """A random flow problem with many ties (costs 0-3), sometimes infeasible."""
    rng = random.Random(seed)
    n = rng.randint(3, 40)
    edges = [
        (u, v, rng.randint(0, 6), rng.randint(0, 3))
        for u, v in ((rng.randrange(n), rng.randrange(n)) for _ in range(rng.randint(n, 6 * n)))
        if u != v
    ]
    supply = [0] * n
    for _ in range(rng.randint(1, n)):
        a, b, k = rng.randrange(n), rng.randrange(n), rng.randint(1, 5)
        supply[a] += k
        supply[b] -= k
    return n, edges, supply


def flow_digests() -> dict[str, str]:
    out = {}
    for name, solver in (("paths", min_cost_flow), ("phases", min_cost_flow_phases)):
        results: list[Any] = []
        for seed in range(400):
            try:
                r = solver(*random_problem(seed))
                results.append([r.cost, r.flow])
            except InfeasibleFlow:
                results.append(None)
        out[name] = _digest(results)
    return out


def group_digests() -> dict[str, str]:
    out = {}
    for seed, n_members, n_parts in GROUPS:
        cluster, members = seven_racks(seed, n_members, n_parts)
        group = one_joins(cluster, members)
        for assignor in ("cooperative-sticky", "rack-optimal"):
            plan, _ = run_assignor(cluster, replace(group, assignor=assignor))
            out[f"{assignor}/{seed}"] = _digest([plan.assignment, sorted(plan.revoked.items())])
    return out


def sample_digests(shared: Path) -> dict[str, str]:
    out = {}
    for path in sorted((shared / "samples").glob("*.json")):
        if path.name.startswith("bad-"):
            continue
        doc = assign_document(json.loads(path.read_text()))
        doc["stats"].pop("elapsed_ms", None)
        out[path.name] = _digest(doc)
    return out


def _recorded(corpus: str) -> dict[str, str]:
    recorded: dict[str, str] = json.loads(DATA.read_text())[corpus]
    return recorded


def test_random_flows_are_unchanged() -> None:
    assert flow_digests() == _recorded("flows")


def test_seven_rack_plans_are_unchanged() -> None:
    got, want = group_digests(), _recorded("groups")
    assert [k for k in want if got.get(k) != want[k]] == []


def test_sample_plans_are_unchanged(shared_dir: Path) -> None:
    got, want = sample_digests(shared_dir), _recorded("samples")
    assert [k for k in want if got.get(k) != want[k]] == []
    assert want


if __name__ == "__main__":
    DATA.write_text(
        json.dumps(
            {"flows": flow_digests(), "groups": group_digests(), "samples": sample_digests(SHARED)}, indent=1
        )
        + "\n"
    )
    sys.exit(0)
