"""Benchmark of the Streams assignor (KIP-925) against a full-graph min-cost-flow reference.

    .venv/bin/python bench/bench_streams.py [--quick] [--repeat N]

Apps: 3 racks, 6 brokers (2 per rack), replication 2, sub-topologies of 100
tasks (2 source topics and, for 3 of 4 sub-topologies, 1 changelog), one
standby, ``balance_subtopology``, clients with 1-4 threads spread over the
racks.  Reports, as medians of N runs: the wall time of ``plan_document``
(model, assignment, stats; parse excluded), and end to end what
``rackplan assign`` does after start-up (JSON text -> parse -> plan ->
canonical JSON bytes); the peak traced memory; and, in the same run, the
time networkx needs to solve the *same* stateful-active flow (same baseline
loads, same caps) on the full task x client graph, plus the ratio of that
to our whole ``plan_document``.  The reference runs in a child process with
a timeout.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: make ``bench`` importable

from assignor.cli import assign_document, dumps
from assignor.parse import parse_instance
from assignor.streams import plan_document
from bench.common import in_child, peak_memory, timed

RACKS = ("az-a", "az-b", "az-c")


def make_instance(
    tasks: int, clients: int, seed: int = 1, strategy: str = "balance_subtopology"
) -> dict[str, Any]:
    rng = random.Random(seed)
    brokers = [{"id": b, "rack": RACKS[(b - 1) // 2]} for b in range(1, 7)]
    per_sub = 100 if tasks >= 100 else tasks
    n_subs = max(1, tasks // per_sub)
    topics: dict[str, list[list[int]]] = {}
    subs = []
    for s in range(n_subs):
        src = [f"s{s}-a", f"s{s}-b"]
        logs = [f"s{s}-changelog"] if s % 4 != 3 else []
        for t in src + logs:
            topics[t] = [rng.sample(range(1, 7), 2) for _ in range(per_sub)]
        subs.append({"id": str(s), "source_topics": src, "changelog_topics": logs, "stateful": bool(logs)})
    app_clients = [
        {"process_id": f"p-{i:05d}", "rack": RACKS[i % 3], "threads": rng.randint(1, 4)}
        for i in range(clients)
    ]
    return {
        "cluster": {"brokers": brokers, "topics": topics},
        "streams_app": {
            "application_id": "bench",
            "subtopologies": subs,
            "clients": app_clients,
            "num_standby_replicas": 1,
            "rack_aware": {"strategy": strategy},
        },
    }


def reference_flow(doc: dict[str, Any]) -> tuple[float, bool]:
    """Seconds networkx takes on the full task x client graph of the stateful-active optimisation.

    Also whether its optimal cost is the one our optimiser reaches from the same baseline.
    """
    import networkx as nx

    from assignor.streams_balance import balance
    from assignor.streams_rack import optimise_active, subtopology_caps
    from assignor.streams_tasks import State, build_model

    cluster, app = parse_instance(doc)
    model = build_model(cluster, app)  # type: ignore[arg-type]
    state = State(model)
    stateful = [t for t in range(model.num_tasks) if model.stateful[t]]
    for k, t in enumerate(stateful):
        state.active[k % model.num_clients].add(t)
    balance(state, "active")
    owner = state.active_owner()
    counts = [len(a) for a in state.active]
    caps = subtopology_caps(model, counts, stateful)

    def weight(t: int, c: int) -> int:
        return 10 * model.active_cross[t][model.group_of[c]] + (0 if owner[t] == c else 1)

    start = time.perf_counter()
    g = nx.DiGraph()
    for t in stateful:
        g.add_node(("t", t), demand=-1)
        for c in range(model.num_clients):
            cap = caps.get((c, model.sub_of[t]), 0)
            if cap:
                g.add_edge(("t", t), ("cj", c, model.sub_of[t]), capacity=1, weight=weight(t, c))
    for (c, j), cap in caps.items():
        g.add_edge(("cj", c, j), ("c", c), capacity=cap, weight=0)
    for c in range(model.num_clients):
        g.add_node(("c", c), demand=counts[c])
    ref_cost, _flow = nx.network_simplex(g)
    seconds = time.perf_counter() - start
    optimise_active(model, state, stateful, "balance_subtopology", 10, 1)
    new_owner = state.active_owner()
    return seconds, sum(weight(t, new_owner[t]) for t in stateful) == ref_cost


def reference_with_timeout(doc: dict[str, Any], timeout: float) -> tuple[float, bool] | None:
    """:func:`reference_flow` in a child process; None when it does not finish within ``timeout`` seconds."""
    result = in_child(reference_flow, (doc,), timeout)
    return None if result is None else (float(result[0]), bool(result[1]))


def measure(tasks: int, clients: int, repeat: int) -> dict[str, Any]:
    doc = make_instance(tasks, clients)
    text = json.dumps(doc)
    cluster, app = parse_instance(doc)
    plan = timed(partial(plan_document, cluster, app), repeat)  # type: ignore[arg-type]
    e2e = timed(lambda: dumps(assign_document(json.loads(text))), repeat)
    peak = peak_memory(partial(plan_document, cluster, app))  # type: ignore[arg-type]
    return {
        "tasks": tasks,
        "clients": clients,
        "median_s": round(plan.wall, 4),
        "e2e_s": round(e2e.wall, 4),
        "peak_mib": round(peak / 2**20, 1),
        "active_cross_rack": plan.result["stats"]["active_cross_rack"],
        "doc": doc,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--ref-timeout", type=float, default=120.0)
    ap.add_argument(
        "--ref-max-pairs", type=int, default=700_000, help="skip the reference above tasks x clients"
    )
    args = ap.parse_args(argv)
    sizes = [(100, 10), (250, 25), (500, 50), (1000, 100), (2500, 250), (5000, 500), (10000, 1000)]
    if args.quick:
        sizes = sizes[:4]
    print(
        "| tasks x clients | ours median s | end to end s | peak MiB | networkx full graph s | ratio "
        "| same optimum |"
    )
    print("|---|---|---|---|---|---|---|")
    for tasks, clients in sizes:
        r = measure(tasks, clients, args.repeat)
        row = f"| {tasks} x {clients} | {r['median_s']:.3f} | {r['e2e_s']:.3f} | {r['peak_mib']} |"
        if tasks * clients > args.ref_max_pairs:
            print(f"{row} not run (full graph too big) | - | - |", flush=True)
            continue
        ref = reference_with_timeout(r["doc"], args.ref_timeout)
        if ref is None:
            print(
                f"{row} > {args.ref_timeout:.0f} (timeout) | > {args.ref_timeout / r['median_s']:.0f}x | - |"
            )
            continue
        same = "yes" if ref[1] else "**NO**"
        print(f"{row} {ref[0]:.3f} | {ref[0] / r['median_s']:.0f}x | {same} |", flush=True)
    print(json.dumps({"python": sys.version.split()[0]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
