"""Many racks (every broker its own rack): the class flows stay O(partitions x RF + groups x racks) arcs.

rack-optimal's stage A (:func:`_optimal_face`) and cooperative-sticky's :func:`fewest_cross` once had
one arc per (partition class, rack class), partitions x racks when every partition has its own
replica-rack mask.  These tests count the arcs of the graphs they solve, not wall time.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from rackplan.assignor.consumer.rack_optimal import class_flow, milp
from rackplan.assignor.consumer.sticky import common, constrained
from rackplan.assignor.flow import mincost
from rackplan.assignor.flow.prices import residual_potentials
from rackplan.assignor.parse import parse_cluster, parse_consumer_group

RACKS, PARTITIONS, MEMBERS, RF = 300, 600, 120, 3


def _instance(assignor: str, seed: int = 1, racks: int = RACKS) -> dict[str, Any]:
    rng = random.Random(seed)
    topics = {f"t{k}": [rng.sample(range(racks), RF) for _ in range(PARTITIONS // 6)] for k in range(6)}
    members = [
        {
            "member_id": f"m{i:03d}",
            "rack": f"r{rng.randrange(racks)}" if i % 10 else None,
            "topics": list(topics),
        }
        for i in range(MEMBERS)
    ]
    return {
        "cluster": {"brokers": [{"id": b, "rack": f"r{b}"} for b in range(racks)], "topics": topics},
        "consumer_group": {"group_id": "g", "assignor": assignor, "members": members},
    }


def _parsed(doc: dict[str, Any]) -> tuple[Any, Any]:
    cluster = parse_cluster(doc["cluster"])
    return cluster, parse_consumer_group(doc["consumer_group"], cluster)


@pytest.fixture
def arcs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of arcs of every flow graph solved while the test runs."""
    seen: list[int] = []
    solve = mincost.FlowGraph.solve

    def counting(graph: mincost.FlowGraph) -> mincost.FlowResult:
        seen.append(len(graph.edges))
        return solve(graph)

    monkeypatch.setattr(mincost.FlowGraph, "solve", counting)
    return seen


def test_rack_optimal_stage_a_has_few_arcs_per_partition_class(arcs: list[int]) -> None:
    c = class_flow.classify(*_parsed(_instance("rack-optimal")))
    assert len(c.k_keys) > 500 and len(c.gr_keys) > 80  # many masks, many rack classes
    class_flow._optimal_face(c)
    bound = (RF + 2) * len(c.k_keys) + 3 * len(c.gr_keys) + 3 * len(c.q_keys)
    assert arcs and arcs[0] <= bound, (arcs, bound)


def test_fewest_cross_has_few_arcs_per_mask(arcs: list[int]) -> None:
    prep = common.prepare(*_parsed(_instance("cooperative-sticky")))
    masks = len(set(prep.part_mask))
    assert masks > 500 and len(prep.classes) > 80
    constrained.fewest_cross(prep)
    bound = (RF + 2) * masks + 3 * len(prep.classes)
    assert arcs and arcs[0] <= bound, (arcs, bound)


def _full_face(c: class_flow.Classes) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The face read from the graph with one arc per (partition class, group-rack node): the reference."""
    graph = mincost.FlowGraph(c.x_node + 1)
    kg = {}
    for k, (g, mask) in enumerate(c.k_keys):
        for rc in range(len(c.rc_keys)):
            j = c.gr_index.get((g, rc))
            if j is not None:
                kg[(k, j)] = graph.add_edge(k, c.gr_base + j, len(c.k_parts[k]) + 1, c.cross(rc, mask))
    q_of = {key: q for q, key in enumerate(c.q_keys)}
    gq = {}
    for j, (grp, rc) in enumerate(c.gr_keys):
        for s in c.group_subs[grp]:
            q = q_of.get((rc, s))
            if q is not None:
                gq[(j, q)] = graph.add_edge(c.gr_base + j, c.q_base + q, c.group_sizes[grp] + 1, 0)
    for q, (_, s) in enumerate(c.q_keys):
        if c.extra[s]:
            graph.add_edge(c.q_base + q, c.x_node, len(c.q_members[q]), (c.total + 1) * (2 * c.low[s] + 1))
    for k, parts in enumerate(c.k_parts):
        graph.supply[k] = len(parts)
    for q, (_, s) in enumerate(c.q_keys):
        graph.supply[c.q_base + q] = -len(c.q_members[q]) * c.low[s]
    graph.supply[c.x_node] = -c.total - sum(graph.supply[c.q_base : c.x_node])
    edges = graph.edges
    pot = residual_potentials(graph.num_nodes, edges, graph.solve().flow)

    def zero(arcs: dict[tuple[int, int], int]) -> list[tuple[int, int]]:
        return sorted(
            key for key, e in arcs.items() if edges[e][3] + pot[edges[e][0]] - pot[edges[e][1]] == 0
        )

    return zero(kg), zero(gq)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("racks", [4, 40])
def test_hub_face_is_the_full_graphs_face(seed: int, racks: int) -> None:
    c = class_flow.classify(*_parsed(_instance("rack-optimal", seed, racks)))
    face = class_flow._optimal_face(c)
    assert (face.kg, face.gq) == _full_face(c)


def test_a_program_known_too_large_is_not_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """rack-optimal's program over ``MAX_NONZEROS`` is refused before it is built, the start unchanged.

    Where every broker is its own rack each partition is its own class, so a component's program has
    members x partitions columns: it was built (seconds and gigabytes on 2,000 racks, unequal
    subscriptions) only to be found over the limit and not run.
    """

    def refused() -> Any:
        raise AssertionError("a program over the limit was built")

    monkeypatch.setattr(milp, "_program", refused)
    classes = milp.MAX_NONZEROS  # one partition per class, two members: each x column is in two rows
    comp = milp.Component(
        class_size=[1] * classes,
        class_group=[0] * classes,
        group_members=[[0, 1]],
        cross=[{k: k % 2 for k in range(classes)}, {k: 1 - k % 2 for k in range(classes)}],
        owned=[{}, {}],
    )
    start = [{k: 1 for k in range(0, classes, 2)}, {k: 1 for k in range(1, classes, 2)}]
    found = milp.solve(comp, start)
    assert (found.ran, found.optimal, found.counts) == (False, False, start)
