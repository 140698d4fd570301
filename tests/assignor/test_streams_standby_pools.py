"""Standby placement when clients have many spread values (each its own ``host`` tag, say).

The exact flow had one node per (task, value): 2,000 clients with their own
``zone`` and 4,000 tasks with two standbys built a graph of more than 3 GB and
ended in a MemoryError.  A value only one client takes needs no such node (one
copy per client is one copy per value), so above ``POOL_ABOVE`` values those
clients are reached through one pool per rack (``standby_flow._pooled``).
The pools are checked here where they matter: forced on small apps
(``POOL_ABOVE = 0``) against brute force and against networkx on the full task
x client graph, with values shared by some clients and not by others; the
graph's size and the baseline placement's work on a large app; the dealing's
repairs; and what happens past the graph's bound (``MAX_EDGES``).
"""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

from hypothesis import event, given, settings
from hypothesis import strategies as st

from rackplan.assignor.model import Cluster, RackAwareConfig, StreamsApp, StreamsClient, Subtopology
from rackplan.assignor.streams import plan_document, standby_fill, standby_flow
from rackplan.assignor.streams import standby as streams_standby
from rackplan.assignor.streams.standby import Values, assign_standbys, optimise_standbys
from rackplan.assignor.streams.tasks import State, TaskModel, build_model
from tests.assignor.test_streams_standby import (
    _baseline,
    _brute_force,
    _check_rules,
    _copy,
    _cross,
    _holders,
    _moved,
    _networkx_cost,
    _random_app,
    _random_baseline,
    _weights,
)


def _host_values(model: TaskModel, rng: random.Random, spread: int) -> Values:
    """One value per client drawn from ``spread`` values (so some shared, many single), a few without."""
    return [
        (None,) if rng.random() < 0.1 else (f"h{rng.randrange(spread)}",) for _ in range(model.num_clients)
    ]


@contextmanager
def _pools_forced() -> Iterator[list[int]]:
    """Pools above zero values; yields, per graph built, how many clients went into pools."""
    pooled: list[int] = []
    real = standby_flow._pooled

    def spy(p: standby_flow.StandbyProblem, expanded: frozenset[standby_flow.GroupKey] | None) -> list[bool]:
        out = real(p, expanded)
        pooled.append(sum(out))
        return out

    with mock.patch.object(standby_flow, "POOL_ABOVE", 0), mock.patch.object(standby_flow, "_pooled", spy):
        yield pooled


@st.composite
def _small_host_apps(draw: st.DrawFn) -> tuple[TaskModel, Values, State]:
    rng = draw(st.randoms(use_true_random=False))
    cluster, app = _random_app(
        rng,
        draw(st.sampled_from([2, 3, 3])),
        "none",
        (1, 2),
        (2, 3),
        (3, 6),
        (1, draw(st.sampled_from([1, 2]))),
    )
    model = build_model(cluster, app)
    values = _host_values(model, rng, draw(st.integers(2, 3 * model.num_clients)))
    make = _baseline if draw(st.booleans()) else _random_baseline
    return model, values, make(model, app, rng, values)


@settings(max_examples=400, deadline=None)
@given(_small_host_apps(), st.sampled_from([(None, None), (1, 0), (3, 2), (10, 1), (1, 10)]))
def test_pools_reach_the_brute_force_optimum(
    inst: tuple[TaskModel, Values, State], weights: tuple[int | None, int | None]
) -> None:
    model, values, state = inst
    before = _copy(model, state)
    traffic, non_overlap = weights
    with _pools_forced() as pooled:
        if traffic is None:
            optimise_standbys(model, state, 10, 1, values, cross_first=True)
        else:
            assert non_overlap is not None
            optimise_standbys(model, state, traffic, non_overlap, values)
    event(f"rounds: {len(pooled)}, pooled in the first: {bool(pooled and pooled[0])}")
    _check_rules(model, state, before, values)
    base, got = _holders(before), _holders(state)
    a, b = _weights(base, traffic is None, traffic or 0, non_overlap or 0)
    best, _ = _brute_force(model, before, values, a, b)
    assert a * _cross(model, got) + b * _moved(got, base) == best


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 4), st.integers(3, 30), st.booleans(), st.randoms(use_true_random=False))
def test_pools_equal_networkx_on_the_full_graph(
    n_racks: int, spread: int, cross_first: bool, rng: random.Random
) -> None:
    cluster, app = _random_app(rng, n_racks, "none")
    model = build_model(cluster, app)
    values = _host_values(model, rng, spread)
    state = _baseline(model, app, rng, values)
    before = _copy(model, state)
    traffic, non_overlap = rng.randint(1, 10), rng.randint(0, 10)
    with _pools_forced() as pooled:
        optimise_standbys(model, state, traffic, non_overlap, values, cross_first=cross_first)
    event(f"rounds: {len(pooled)}, pooled in the first: {bool(pooled and pooled[0])}")
    _check_rules(model, state, before, values)
    base, got = _holders(before), _holders(state)
    a, b = _weights(base, cross_first, traffic, non_overlap)
    assert a * _cross(model, got) + b * _moved(got, base) == _networkx_cost(model, before, values, a, b)


@settings(max_examples=300, deadline=None)
@given(_small_host_apps())
def test_a_pool_that_cannot_deal_is_expanded_to_the_same_optimum(
    inst: tuple[TaskModel, Values, State],
) -> None:
    """Every pool's first dealing refused: its clients go back to their own groups, and the optimum is kept."""
    model, values, state = inst
    before = _copy(model, state)
    refused: list[int] = []
    real = standby_fill.fill_group

    def refuse_pools(
        arrivals: list[tuple[int, int]],
        quotas: list[tuple[int, int]],
        owner: list[int],
        holds: list[set[int]],
        banned: dict[int, int] | None = None,
    ) -> list[tuple[int, int]] | None:
        if banned is not None:  # only pools pass ``banned``
            refused.append(1)
            return None
        return real(arrivals, quotas, owner, holds)

    with _pools_forced() as pooled, mock.patch.object(standby_flow, "fill_group", refuse_pools):
        optimise_standbys(model, state, 10, 1, values, cross_first=True)
    event(f"pools refused: {len(refused)}")
    assert len(refused) <= len(set(model.group_of)) * bool(pooled and pooled[0])
    _check_rules(model, state, before, values)
    base, got = _holders(before), _holders(state)
    units = sum(len(cs) for cs in base.values())
    best, _ = _brute_force(model, before, values, units + 1, 1)
    assert (units + 1) * _cross(model, got) + _moved(got, base) == best


def _many_values_app(n_clients: int, n_tasks: int, standbys: int = 2) -> tuple[Cluster, StreamsApp]:
    """Three racks, every client its own ``zone``, one stateful sub-topology (the report's shape)."""
    rng = random.Random(3)
    racks = ["a", "b", "c"]
    brokers = {i: racks[i % 3] for i in range(6)}
    topics = {
        "in": tuple(tuple(rng.sample(range(6), 2)) for _ in range(n_tasks)),
        "cl": tuple(tuple(rng.sample(range(6), 2)) for _ in range(n_tasks)),
    }
    clients = tuple(StreamsClient(f"p{i:05d}", racks[i % 3], 1, {"zone": f"z{i}"}) for i in range(n_clients))
    app = StreamsApp(
        "vals",
        (Subtopology("0", ("in",), ("cl",), True),),
        clients,
        num_standby_replicas=standbys,
        rack_aware_assignment_tags=("zone",),
        rack_aware=RackAwareConfig("min_traffic"),
        partitions={"0": n_tasks},
    )
    return Cluster(broker_racks=brokers, topics=topics), app


def test_many_values_build_a_graph_linear_in_the_tasks() -> None:
    """300 clients, each its own zone, 600 tasks, two standbys: a few edges per task (was 900 per task)."""
    cluster, app = _many_values_app(300, 600)
    sizes: list[int] = []
    real = standby_flow._build

    def spy(
        p: standby_flow.StandbyProblem, a: int, b: int, expanded: frozenset[standby_flow.GroupKey] | None
    ) -> object:
        graph = real(p, a, b, expanded)
        sizes.append(len(graph.flow.edges))
        return graph

    with mock.patch.object(standby_flow, "_build", spy):
        doc = plan_document(cluster, app)
    assert sizes and max(sizes) < 20 * 600, sizes
    assert doc["stats"]["standby_cross_rack"] == 0  # every changelog has replicas on two of the three racks


def test_many_values_plan_in_little_memory() -> None:
    """600 clients, each its own zone, 1,200 tasks: the whole plan's traced peak stays small (was 400 MB)."""
    cluster, app = _many_values_app(600, 1_200)
    tracemalloc.start()
    try:
        doc = plan_document(cluster, app)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 40 * 2**20, f"{peak / 2**20:.0f} MiB"
    assert sum(len(c["standby"]) for c in doc["streams_app"]["assignment"].values()) == 2 * 1_200


def test_the_baseline_placement_does_not_visit_every_value_per_copy() -> None:
    """1,000 clients, each its own zone: a standby's client is found among a few classes, not all 1,000."""
    cluster, app = _many_values_app(1_000, 2_000)
    model = build_model(cluster, app)
    values = streams_standby.spread_values(model, app)
    state = State(model)
    for t in range(model.num_tasks):
        state.active[t % model.num_clients].add(t)
    calls = [0]
    real = streams_standby._top

    def counted(
        state: State, loads: list[float], heap: list[tuple[float, int]], t: int
    ) -> tuple[float, int] | None:
        calls[0] += 1
        return real(state, loads, heap, t)

    with mock.patch.object(streams_standby, "_top", counted):
        assign_standbys(model, state, 2, values, list(range(model.num_tasks)))
    assert sum(len(s) for s in state.standby) == 4_000
    assert calls[0] < 10 * 4_000, calls  # was about 4,000,000


def test_a_pool_repairs_its_dealing_by_a_swap() -> None:
    """Client 3 has the last unit and is task 1's active; task 0 on client 2 moves there, task 1 takes 2."""
    owner = [9, 3]
    holds: list[set[int]] = [set() for _ in range(4)]
    with mock.patch.object(standby_fill, "fill_exactly") as exact:
        fill = standby_fill.fill_group([(0, 1), (1, 1)], [(2, 1), (3, 1)], owner, holds, banned={})
    assert exact.call_count == 0
    assert sorted(fill or []) == [(0, 3), (1, 2)]
    # banned: task 1 may not take client 2 (its active's value) either: nothing deals it
    assert standby_fill.fill_group([(0, 1), (1, 1)], [(2, 1), (3, 1)], owner, holds, banned={1: 2}) is None


def test_a_group_beyond_the_pairs_bound_is_dealt_by_swaps() -> None:
    owner = [9, 3]
    holds: list[set[int]] = [set() for _ in range(4)]
    with (
        mock.patch.object(standby_fill, "MAX_PAIRS", 0),
        mock.patch.object(standby_fill, "fill_exactly") as exact,
    ):
        fill = standby_fill.fill_group([(0, 1), (1, 1)], [(2, 1), (3, 1)], owner, holds)
    assert exact.call_count == 0
    assert sorted(fill or []) == [(0, 3), (1, 2)]


@settings(max_examples=100, deadline=None)
@given(_small_host_apps())
def test_past_the_graph_bound_the_swaps_place_the_standbys(inst: tuple[TaskModel, Values, State]) -> None:
    """No exact flow past ``MAX_EDGES``: the pairwise swaps instead, which keep every rule and never cost more."""
    model, values, state = inst
    before = _copy(model, state)
    with (
        mock.patch.object(standby_flow, "MAX_EDGES", 0),
        mock.patch.object(streams_standby, "swap_standbys", wraps=streams_standby.swap_standbys) as swaps,
    ):
        optimise_standbys(model, state, 10, 1, values, cross_first=True)
    _check_rules(model, state, before, values)
    base, got = _holders(before), _holders(state)
    assert _cross(model, got) <= _cross(model, base)
    assert swaps.call_count <= 1
    event("swapped" if swaps.call_count else "flow skipped")
