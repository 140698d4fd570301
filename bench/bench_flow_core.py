"""The min-cost flow solver per flow, compiled core against the Python phases, on the cliff's own graphs.

    .venv/bin/python -m bench.bench_flow_core               # the bench_settle_work groups 0-7
    .venv/bin/python -m bench.bench_flow_core --groups 60

Every flow the joining round of ``bench_settle_work``'s groups asks for (cut-off or not) is captured
as it is solved, then each is solved again by both solvers, one after the other: CPU per flow, and
whether the two agree on every answer (cost, every edge's flow, None under a cut-off, the error).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

from rackplan.assignor.consumer.sticky import assign
from rackplan.assignor.flow import FlowResult, InfeasibleFlow, mincost
from tests.assignor.test_sticky_work import one_joins, seven_racks

Flow = tuple[mincost._Problem, int | None]
Answer = FlowResult | str | None


def captured(groups: int) -> list[Flow]:
    """The flows the joining rounds solve, in order (not those of the rounds before; the memo answers the
    repeated ones itself)."""
    flows: list[Flow] = []
    solve = mincost._phases

    def capture(problem: mincost._Problem, cutoff: int | None) -> FlowResult | None:
        flows.append((mincost._Problem(problem.num_nodes, list(problem.edges), list(problem.supply)), cutoff))
        return solve(problem, cutoff)

    for seed in range(groups):
        cluster, members = seven_racks(seed, 23, 148)
        group = one_joins(cluster, members)
        mincost._phases = capture
        try:
            assign(cluster, group)
        finally:
            mincost._phases = solve
    return flows


def timed(
    flows: list[Flow], solve: Callable[[mincost._Problem, int | None], FlowResult | None]
) -> tuple[float, list[Answer]]:
    answers: list[Answer] = []
    start = time.process_time()
    for problem, cutoff in flows:
        try:
            answers.append(solve(problem, cutoff))
        except InfeasibleFlow as e:
            answers.append(str(e))
    return time.process_time() - start, answers


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--groups", type=int, default=8)
    args = parser.parse_args(argv)
    if not mincost.COMPILED:
        print("the compiled flow core is not installed (make .venv/.installed with a C compiler)")
        return 1
    flows = captured(args.groups)
    python, want = timed(flows, lambda p, c: mincost._phases_in_python(mincost._Residual(*p), c))
    compiled, got = timed(flows, mincost._phases)
    n = len(flows)
    print(
        f"{n:,} flows of groups 0-{args.groups - 1}: "
        f"median {statistics.median(p.num_nodes for p, _ in flows):.0f} nodes, "
        f"{statistics.median(len(p.edges) for p, _ in flows):.0f} edges"
    )
    print("| solver | all flows, CPU s | per flow |")
    print("|---|---|---|")
    print(f"| Python phases | {python:.3f} | {1000 * python / n:.3f} ms |")
    print(f"| compiled core | {compiled:.3f} | {1000 * compiled / n:.3f} ms |")
    print(f"{python / compiled:.1f}x; the same answers on all {n:,}: {got == want}")
    return 0 if got == want else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
