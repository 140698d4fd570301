"""Benchmark of the Streams assignor (KIP-925) against a full-graph min-cost-flow reference.

    .venv/bin/python bench/bench_streams.py [--quick] [--repeat N] [--standby-apps N]

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

Standby placement, before and after (same run, same apps): "before" is the
pairwise-swap step the high-availability assignor used until the exact flow
(still in the package as ``swap_standbys``, for several tag keys), "after"
the exact flow.  On random apps (2-4 racks, changelogs of replication 1-2,
1-2 standbys, spread over racks or over a zone tag, 6-60 clients, 20-400
tasks; also with two tag keys, zone and cell) and on this file's bench apps, it reports the total standby
cross-rack partitions of both, how many apps each wins, any spread
violation (a standby in its active's value while another value is free),
and how many flows each exact solve took (more than one when groups had to
be expanded);
then ``plan_document`` time of both at 1,000 x 100 and 10,000 x 1,000, for the
bench app with one and two standbys and with the sticky assignor.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: make ``bench`` importable

from bench.common import in_child, peak_memory, timed
from rackplan.assignor.cli import assign_document, dumps
from rackplan.assignor.parse import parse_instance
from rackplan.assignor.streams import ha as streams_ha
from rackplan.assignor.streams import plan_document, run
from rackplan.assignor.streams import standby as streams_standby
from rackplan.assignor.streams import standby_flow as streams_standby_flow
from rackplan.assignor.streams import standby_milp as streams_standby_milp
from rackplan.assignor.streams import sticky as streams_sticky
from rackplan.assignor.streams.standby import Values, spread_values, swap_standbys
from rackplan.assignor.streams.tasks import State, TaskModel

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

    from rackplan.assignor.streams.balance import balance
    from rackplan.assignor.streams.rack import optimise_active, subtopology_caps
    from rackplan.assignor.streams.tasks import State, build_model

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


def random_standby_app(seed: int, two_keys: bool = False) -> dict[str, Any]:
    """A random app for the standby comparison (see the module docstring); ``two_keys``: zone and cell tags."""
    rng = random.Random(seed)
    racks = [*RACKS, "az-d"][: rng.randint(2, 4)]
    ids = [b + 1 for b in range(2 * len(racks))]
    brokers = [{"id": i, "rack": racks[(i - 1) % len(racks)]} for i in ids]
    topics: dict[str, list[list[int]]] = {}
    subs = []
    budget = rng.randint(20, 400)
    s = 0
    while budget > 0:
        n = min(budget, rng.randint(10, 100))
        budget -= n
        topics[f"s{s}-in"] = [rng.sample(ids, 2) for _ in range(n)]
        logs = [f"s{s}-log{j}" for j in range(rng.randint(1, 2))]
        for log in logs:
            rf = rng.randint(1, 2)
            topics[log] = [rng.sample(ids, rf) for _ in range(n)]
        subs.append({"id": str(s), "source_topics": [f"s{s}-in"], "changelog_topics": logs, "stateful": True})
        s += 1
    tags = two_keys or rng.random() < 0.5
    clients = []
    for i in range(rng.randint(6, 60)):
        client: dict[str, Any] = {
            "process_id": f"p-{i:03d}",
            "rack": rng.choice(racks),
            "threads": rng.randint(1, 4),
        }
        if tags:
            client["tags"] = {"zone": rng.choice(["z1", "z2", "z3"])}
            if two_keys:
                client["tags"]["cell"] = rng.choice(["c1", "c2"])
        clients.append(client)
    app: dict[str, Any] = {
        "application_id": "standby-bench",
        "subtopologies": subs,
        "clients": clients,
        "num_standby_replicas": rng.randint(1, 2),
        "rack_aware": {"strategy": rng.choice(["min_traffic", "balance_subtopology"])},
    }
    if tags:
        app["rack_aware_assignment_tags"] = ["zone", "cell"] if two_keys else ["zone"]
    return {"cluster": {"brokers": brokers, "topics": topics}, "streams_app": app}


def _swaps(
    model: TaskModel, state: State, traffic: int, non_overlap: int, values: Values, cross_first: bool = False
) -> int:
    """The standby step before the exact flow: pairwise swaps (``cross_first`` did not exist then)."""
    return swap_standbys(model, state, traffic, non_overlap, values)


def standby_run(doc: dict[str, Any], exact: bool, rounds: list[int] | None = None) -> tuple[int, int]:
    """(standby cross-rack partitions, spread violations) of the HA assignor with or without the exact flow.

    ``rounds``, when given, receives the number of flows each exact solve took.
    """
    cluster, app = parse_instance(doc)
    if not exact:
        with mock.patch.object(streams_ha, "optimise_standbys", _swaps):
            model, state, _ = run(cluster, app)  # type: ignore[arg-type]
    else:
        built = mock.patch.object(streams_standby_flow, "_build", wraps=streams_standby_flow._build)
        with built as counter:
            original = streams_standby_flow.solve

            def counted(p: Any, a: int, b: int) -> dict[int, list[int]]:
                before = counter.call_count
                out = original(p, a, b)
                if rounds is not None:
                    rounds.append(counter.call_count - before)
                return out

            with mock.patch.object(streams_standby, "solve", counted):
                model, state, _ = run(cluster, app)  # type: ignore[arg-type]
    cross = sum(
        model.standby_cross[t][model.group_of[c]] for c in range(model.num_clients) for t in state.standby[c]
    )
    return cross, spread_violations(model, state, spread_values(model, app))  # type: ignore[arg-type]


def spread_violations(model: TaskModel, state: State, values: Values) -> int:
    """Tasks whose standbys cover fewer values other than the active's than they could (one key)."""
    if not values or len(values[0]) != 1:
        return 0
    val = [v[0] for v in values]
    owner = state.active_owner()
    holders: dict[int, list[int]] = {}
    for c in range(model.num_clients):
        for t in state.standby[c]:
            holders.setdefault(t, []).append(c)
    distinct = {v for v in val if v is not None}
    bad = 0
    for t, cs in holders.items():
        mine = val[owner[t]]
        need = min(len(cs), len(distinct - {mine}))
        if len({val[c] for c in cs} - {None, mine}) < need:
            bad += 1
    return bad


def standby_comparison(n_apps: int) -> None:
    """Standby cross-rack before (swaps) and after (exact flow) on random apps and on the bench apps."""
    families = [
        ("random apps", [random_standby_app(seed) for seed in range(n_apps)]),
        (
            "random apps, two tag keys",
            [random_standby_app(seed, True) for seed in range(max(1, n_apps // 4))],
        ),
        (
            "bench apps 1,000 x 100",
            [make_instance(1000, 100, seed) for seed in range(1, 1 + max(1, n_apps // 20))],
        ),
    ]
    print(
        "| apps | standby cross-rack before | after | apps better after | apps worse after | largest saving "
        "| spread violations before / after | exact solves taking 1 / 2 / 3+ flows |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for label, docs in families:
        before_total = after_total = better = worse = bad_before = bad_after = 0
        savings = []
        rounds: list[int] = []
        for doc in docs:
            b, vb = standby_run(doc, exact=False)
            a, va = standby_run(doc, exact=True, rounds=rounds)
            before_total += b
            after_total += a
            better += a < b
            worse += a > b
            bad_before += vb
            bad_after += va
            if b:
                savings.append((b - a) / b)
        largest = max(savings, default=0.0)
        # the rule the column checks has one key; with two, "no key loses a value" is tested instead
        spread = "-" if "two tag keys" in label else f"{bad_before} / {bad_after}"
        print(
            f"| {label} ({len(docs)}) | {before_total} | {after_total} | {better} | {worse} | "
            f"{100 * largest:.1f}% | {spread} | {rounds.count(1)} / {rounds.count(2)} / "
            f"{sum(1 for r in rounds if r >= 3)} |",
            flush=True,
        )


def two_key_program(n_apps: int) -> None:
    """Two tag keys: the flow and swaps alone against them followed by the integer program, same apps.

    Standby cross-rack is the plan's ``stats.standby_cross_rack``; CPU is
    ``assign_document``'s process time per app (median and largest), and the
    program's own CPU and whether HiGHS proved it optimal are read around
    :func:`standby_milp.place`.
    """
    runs: list[tuple[float, bool]] = []
    real_place = streams_standby_milp.place

    def timed_place(*args: Any) -> streams_standby_milp.Placement:
        t0 = time.process_time()
        out = real_place(*args)
        runs.append((time.process_time() - t0, out.optimal))
        return out

    def skipped(*args: Any) -> streams_standby_milp.Placement:
        return streams_standby_milp.Placement([set(s) for s in args[3]], False)

    totals = {"without": 0, "with": 0}
    cpu: dict[str, list[float]] = {"without": [], "with": []}
    better = worse = 0
    for seed in range(n_apps):
        doc = random_standby_app(seed, True)
        got = {}
        for label, place in (("without", skipped), ("with", timed_place)):
            with mock.patch.object(streams_standby_milp, "place", place):
                t0 = time.process_time()
                out = assign_document(json.loads(json.dumps(doc)))
                cpu[label].append(time.process_time() - t0)
            got[label] = int(out["stats"]["standby_cross_rack"])
            totals[label] += got[label]
        better += got["with"] < got["without"]
        worse += got["with"] > got["without"]
    print(
        "| two tag keys, random apps | standby cross-rack, flow + swaps | with the program | apps better | "
        "apps worse | programs run / proven optimal | CPU per app, median / largest: without | with "
        "| program CPU, largest |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    print(
        f"| {n_apps} | {totals['without']} | {totals['with']} | {better} | {worse} | "
        f"{len(runs)} / {sum(ok for _, ok in runs)} | {statistics.median(cpu['without']):.3f} / "
        f"{max(cpu['without']):.3f} s | {statistics.median(cpu['with']):.3f} / {max(cpu['with']):.3f} s | "
        f"{max((t for t, _ in runs), default=0.0):.3f} s |",
        flush=True,
    )


def standby_timing(repeat: int, sizes: list[tuple[int, int]]) -> None:
    """``plan_document`` CPU and wall seconds with the old swaps and with the exact flow, same run.

    Each size runs the bench app as is (high-availability, one standby), with
    two standbys, and with the sticky assignor.
    """
    print(
        "| tasks x clients | variant | before: CPU s | wall s | standby cross-rack "
        "| after: CPU s | wall s | standby cross-rack |"
    )
    print("|---|---|---|---|---|---|---|---|")
    variants = [("HA, 1 standby", "high-availability", 1), ("HA, 2 standbys", "high-availability", 2)]
    variants.append(("sticky, 1 standby", "sticky", 1))
    for tasks, clients in sizes:
        for label, assignor, standbys in variants:
            doc = make_instance(tasks, clients)
            doc["streams_app"]["assignor"] = assignor
            doc["streams_app"]["num_standby_replicas"] = standbys
            cluster, app = parse_instance(doc)
            with (
                mock.patch.object(streams_ha, "optimise_standbys", _swaps),
                mock.patch.object(streams_sticky, "optimise_standbys", _swaps),
            ):
                before = timed(partial(plan_document, cluster, app), repeat)  # type: ignore[arg-type]
            after = timed(partial(plan_document, cluster, app), repeat)  # type: ignore[arg-type]
            print(
                f"| {tasks} x {clients} | {label} | {before.cpu:.3f} | {before.wall:.3f} | "
                f"{before.result['stats']['standby_cross_rack']} | {after.cpu:.3f} | {after.wall:.3f} | "
                f"{after.result['stats']['standby_cross_rack']} |",
                flush=True,
            )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--ref-timeout", type=float, default=120.0)
    ap.add_argument(
        "--ref-max-pairs", type=int, default=700_000, help="skip the reference above tasks x clients"
    )
    ap.add_argument("--standby-apps", type=int, default=200, help="random apps in the standby comparison")
    ap.add_argument("--standby-only", action="store_true", help="only the standby before/after tables")
    args = ap.parse_args(argv)
    standby_comparison(args.standby_apps if not args.quick else 20)
    two_key_program(max(1, (args.standby_apps if not args.quick else 20) // 4))
    standby_timing(args.repeat, [(1000, 100)] if args.quick else [(1000, 100), (10000, 1000)])
    if args.standby_only:
        return 0
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
