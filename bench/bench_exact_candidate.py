"""What the cooperative-sticky exact candidate costs and gives on small unequal groups (issue 29).

    .venv/bin/python -m bench.bench_exact_candidate              # 40 seeds per shape
    .venv/bin/python -m bench.bench_exact_candidate --seeds 10
    .venv/bin/python -m bench.bench_exact_candidate --full-root   # HiGHS as before its light root

The general path's round may build an exact candidate (``general_exact.exact_candidate``: the
balance program of a small component), solved first by the enumeration of ``small_exact`` within its
work budget and, when that runs out, by HiGHS.  ``bench_vs_kafka``'s worst row (9 x 96, unequal, one
member leaving: 195 ms against Kafka's 0.66 ms) spent most of its CPU there until the size limit
(``EXACT_NONZEROS`` down to 350, session 21: ``bench_highs_gate``).  For each family of
groups this counts the candidates: not run (the start at the per-partition floor, the program too
large, or the round's budget spent), answered by the enumeration or by HiGHS, and whether the answer
was a better plan than the search's; with the CPU of each and of the whole ``assign`` calls.
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from bench.bench_sticky import changed, converged, make_cluster, make_group, one_leaves, random_unequal
from rackplan.assignor.consumer.sticky import assign, general_exact, general_settle
from rackplan.assignor.model import Cluster, ConsumerGroup
from rackplan.assignor.record import replace
from tests.assignor.test_sticky_work import one_joins, seven_racks

#: the small unequal shapes: (members, topics, partitions per topic, topics per member)
SMALL_SHAPES = ((10, 8, 12, (1, 5)), (12, 6, 10, (1, 4)), (8, 10, 8, (2, 6)))


def small_unequal(seeds: int) -> Iterator[tuple[Cluster, ConsumerGroup]]:
    """bench_vs_kafka's 9 x 96 family: converged by rackplan's rounds, then one member leaves (rf 2)."""
    for seed in range(seeds):
        for n, topics, per, subs in SMALL_SHAPES:
            cluster = make_cluster(topics, per, 2, seed=seed)
            group = make_group(n, sorted(cluster.topics), seed + 1, subs=subs)
            yield cluster, one_leaves(converged(cluster, replace(group, assignor="cooperative-sticky")))


def cliff(seeds: int) -> Iterator[tuple[Cluster, ConsumerGroup]]:
    """bench_settle_work's groups: 23 x 148 over seven racks, the last member joining."""
    for seed in range(seeds):
        cluster, members = seven_racks(seed, 23, 148)
        yield cluster, one_joins(cluster, members)


def study(seeds: int) -> Iterator[tuple[Cluster, ConsumerGroup]]:
    """bench_sticky's settling-study groups (10-40 members, 120-400 partitions), converged by rackplan."""
    rng = random.Random(10)
    for _ in range(seeds):
        cluster, group = random_unequal(rng)
        _kind, cluster, group = changed(rng, cluster, converged(cluster, group))
        yield cluster, group


class Tally:
    """The candidates' outcomes and CPU, filled by :meth:`watch` around the real functions."""

    def __init__(self) -> None:
        self.outcomes: Counter[str] = Counter()
        self.cpu: defaultdict[str, float] = defaultdict(float)
        #: HiGHS's answers proven optimal
        self.proven = 0
        self._solver = ""

    def watch(self) -> Callable[[], None]:
        """Wraps the candidate and its two solvers; returns what undoes it."""
        real_small, real_exact = vars(general_exact)["solve_small"], vars(general_settle)["exact_candidate"]
        real_solve = vars(general_exact)["solve"]

        def solve(*args: Any, **options: Any) -> Any:
            got = real_solve(*args, **options)
            self.proven += got.optimal
            return got

        def small(*args: Any) -> Any:
            got = real_small(*args)
            self._solver = "enumeration" if got is not None else "HiGHS"
            return got

        def exact(*args: Any) -> Any:
            self._solver = ""
            start = time.process_time()
            got = real_exact(*args)
            kind = self._solver or "not run"
            self.cpu[kind] += time.process_time() - start
            self.outcomes[
                kind + (": better" if got is not None else "" if kind == "not run" else ": not better")
            ] += 1
            return got

        # patched by name: the modules import these, they do not export them
        setattr(general_exact, "solve_small", small)  # noqa: B010
        setattr(general_exact, "solve", solve)  # noqa: B010
        setattr(general_settle, "exact_candidate", exact)  # noqa: B010

        def undo() -> None:
            setattr(general_exact, "solve_small", real_small)  # noqa: B010
            setattr(general_exact, "solve", real_solve)  # noqa: B010
            setattr(general_settle, "exact_candidate", real_exact)  # noqa: B010

        return undo


def full_root() -> Callable[[], None]:
    """The exact candidate's HiGHS with its sub-MIP heuristics and restart, as before its light root, for every
    call from here on (the groups' convergence too, so both ways measure the same groups); returns the undo."""
    real = vars(general_exact)["solve"]

    def solve(*args: Any, light_root: bool = False) -> Any:
        return real(*args)

    setattr(general_exact, "solve", solve)  # noqa: B010
    return lambda: setattr(general_exact, "solve", real)


def measure(groups: Sequence[tuple[Cluster, ConsumerGroup]]) -> tuple[Tally, float]:
    """The tally over one ``assign`` of each group, and the CPU of those calls."""
    tally = Tally()
    undo = tally.watch()
    try:
        start = time.process_time()
        for cluster, group in groups:
            assign(cluster, group)
        return tally, time.process_time() - start
    finally:
        undo()


def row(name: str, n_groups: int, tally: Tally, total: float) -> str:
    o, c = tally.outcomes, tally.cpu
    return (
        f"| {name} | {n_groups} | {o['not run']} | {o['enumeration: better']} / {o['enumeration: not better']} "
        f"| {o['HiGHS: better']} / {o['HiGHS: not better']} | {tally.proven} | {c['enumeration']:.2f} "
        f"| {c['HiGHS']:.2f} | {total:.2f} |"
    )


HEADER = (
    "| groups | count | candidates not run | enumeration: better / not | HiGHS: better / not | HiGHS proven "
    "| enumeration CPU s | HiGHS CPU s (enumeration first) | all assign calls CPU s |\n|---|---|---|---|---|---|---|---|---|"
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument(
        "--seeds", type=int, default=40, help="seeds per shape (the study and the cliff: that many groups)"
    )
    ap.add_argument(
        "--full-root",
        action="store_true",
        help="HiGHS with its sub-MIP heuristics and restart (the exact candidate before its light root)",
    )
    args = ap.parse_args(argv)
    if args.full_root:
        full_root()
    print(HEADER)
    families = (
        (f"small unequal, one leaves ({len(SMALL_SHAPES)} shapes)", small_unequal),
        ("the cliff's shape, one joins", cliff),
        ("settling-study groups, changed", study),
    )
    for name, family in families:
        groups = list(family(args.seeds))
        tally, total = measure(groups)
        print(row(name, len(groups), tally, total), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
