"""Could a lower bound end the count-shift search early?  Measured on the small unequal groups (issue 29).

    .venv/bin/python -m bench.bench_search_bounds [--seeds 10]

On the small unequal cooperative-sticky groups (``bench_exact_candidate``'s 9 x 96 family and its
cliff family, 23 x 148 over seven racks, one member joining) rackplan's core is far above Kafka's
warm CPU, and ``bench_core_share`` says why: tens of count-shift flows per call, most of them
finding nothing.  A search may stop as soon as its plan reaches a lower bound on every balanced
assignment's cost; this measures how often the cheapest such bound would let it.

The bound: the run's own cost (``BIG * cross-rack + moves``, or the priced run's price) minimised
over every assignment of each partition to a subscriber whose member counts lie within ranges that
every balanced assignment respects.  ``lo``: a member subscribed to topics ``T`` holding ``c``
caps every holder of a ``T`` partition at ``c + 1``, so ``c >= (P(T) - |S(T)| + 1) / |S(T)|``
(``S(T)``: their subscribers); ``hi``: a member holding ``c`` of some topic ``t`` needs every
subscriber of ``t`` at ``c - 1`` or more, within what those subscribers can hold.  One min-cost flow
(networkx, as an independent solver; not the product's code) per general-path run, on the run's
final plan: a valid lower bound, so "bound = plan" proves the plan optimal over every balanced
assignment.

Per family: the general-path runs; those whose final plan meets the bound; the flows (``place``
calls) the runs made; and the flows after each run's last improving one: the most any stopping
rule can save, all runs (every flow that found nothing more) and the runs the bound proves (what
stopping at this bound would have saved, had the bound been checked after every improvement).
Not timed: counted.  Why ``lo`` and ``hi`` only: they are what the subscriptions alone give; a
bound that knows which member is at which topic's minimum is the exact program itself.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import networkx as nx

from bench.bench_exact_candidate import cliff, small_unequal
from rackplan.assignor.consumer.sticky import assign, general, general_flow, general_shift
from rackplan.assignor.consumer.sticky.general_state import GeneralState
from rackplan.assignor.model import Cluster, ConsumerGroup


def count_ranges(state: GeneralState) -> tuple[list[int], list[int]]:
    """Per member, the least and the most partitions any balanced assignment gives it (see the module
    docstring)."""
    off = state.prep.topic_offset
    size = [off[t + 1] - off[t] for t in range(state.n_topics)]
    total = state.n_parts
    lo = [0] * state.n
    for j in range(state.n):
        for group in [[t] for t in state.mt[j]] + [list(state.mt[j])]:
            subs = {i for t in group for i in state.tm[t]}
            if subs:
                lo[j] = max(lo[j], -(-(sum(size[t] for t in group) - len(subs) + 1) // len(subs)))
    hi = [0] * state.n
    for i in range(state.n):
        own = sum(size[t] for t in state.mt[i])
        for t in state.mt[i]:
            holders = state.tm[t]
            if not size[t]:
                continue
            reach = sum(size[u] for u in {u for j in holders for u in state.mt[j]})
            room = min(total - sum(lo[k] for k in range(state.n) if k not in holders), reach)
            c = hi[i]
            while c + 1 <= own and c + 1 + sum(max(lo[j], c) for j in holders if j != i) <= room:
                c += 1
            hi[i] = c
    return lo, hi


def bound(state: GeneralState, big: int) -> int:
    """The least ``big * cross-rack + moves`` over assignments within the count ranges (a lower bound on
    every balanced assignment's)."""
    lo, hi = count_ranges(state)
    graph = nx.DiGraph()
    graph.add_node("rest", demand=state.n_parts - sum(lo))
    for i in range(state.n):
        graph.add_node(("m", i), demand=lo[i])
        if hi[i] > lo[i]:
            graph.add_edge(("m", i), "rest", capacity=hi[i] - lo[i], weight=0)
    pools: dict[tuple[int, int, int], int] = {}
    for gp in range(state.n_parts):
        key = (state.owner[gp], state.ptopic[gp], state.masks[gp])
        pools[key] = pools.get(key, 0) + 1
    for (o, t, k), n in sorted(pools.items()):
        graph.add_node(("p", o, t, k), demand=-n)
        for i in state.tm[t]:
            cost = big * state.crossk[state.cls[i]][k] + (1 if 0 <= o != i else 0)
            graph.add_edge(("p", o, t, k), ("m", i), capacity=n, weight=cost)
    return int(nx.min_cost_flow_cost(graph))


def cost(state: GeneralState, big: int) -> int:
    crossk, cls, masks, owner = state.crossk, state.cls, state.masks, state.owner
    return sum(
        big * crossk[cls[h]][masks[gp]] + (1 if 0 <= owner[gp] != h else 0)
        for gp, h in enumerate(state.holder)
    )


class _Runs:
    """Every general-path run of one call: its state, its flows, and its last improving flow."""

    def __init__(self) -> None:
        self.states: dict[int, GeneralState] = {}
        self.flows: dict[int, int] = {}
        self.last_gain: dict[int, int] = {}

    def place(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def counted(state: GeneralState, *args: Any, **kw: Any) -> Any:
            key = id(state)
            self.states[key] = state
            self.flows[key] = self.flows.get(key, 0) + 1
            done = real(state, *args, **kw)
            if done is True:
                self.last_gain[key] = self.flows[key]
            return done

        return counted


def runs_of(cluster: Cluster, group: ConsumerGroup) -> _Runs:
    """The general-path runs of one cooperative-sticky call, counted through ``place`` (put back after)."""
    runs = _Runs()
    real = general_flow.place
    modules: tuple[ModuleType, ...] = (general, general_flow, general_shift)
    for module in modules:
        vars(module)["place"] = runs.place(real)
    try:
        assign(cluster, group)
    finally:
        for module in modules:
            vars(module)["place"] = real
    return runs


def measure(groups: Iterator[tuple[Cluster, ConsumerGroup]]) -> dict[str, int]:
    totals = dict.fromkeys(("groups", "runs", "proven", "flows", "after_all", "after_proven"), 0)
    for cluster, group in groups:
        runs = runs_of(cluster, group)
        totals["groups"] += 1
        for key, state in runs.states.items():
            big = state.prep.cross_price or state.n_parts + 1
            after = runs.flows[key] - runs.last_gain.get(key, 0)
            proven = bound(state, big) == cost(state, big)
            totals["runs"] += 1
            totals["flows"] += runs.flows[key]
            totals["after_all"] += after
            totals["proven"] += proven
            totals["after_proven"] += after if proven else 0
    return totals


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args(argv)
    print(
        "| family | groups | general-path runs | runs the bound proves | flows | "
        "flows after the last improvement: all runs | the same, runs the bound proves |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, groups in (
        ("9 x 96 family (3 shapes, one leaves)", small_unequal(args.seeds)),
        ("cliff family (23 x 148, one joins)", cliff(args.seeds)),
    ):
        t = measure(groups)
        print(
            f"| {name} | {t['groups']} | {t['runs']} | {t['proven']} | {t['flows']} | "
            f"{t['after_all']} | {t['after_proven']} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
