"""``rackplan assign`` on consumer groups whose every broker is its own rack: time and peak memory.

    .venv/bin/python -m bench.bench_many_racks [--scale 1.0]

Where ``broker.rack`` names the host, a partition's replica racks are nearly unique to it, and
the equal-subscription flows once had an arc per (partition class, rack class): a 281 KB input
took 8.7 s and 1.56 GB (session 31's hunt; docs/performance.md, "Many racks").  Seeded inputs,
replication factor 3, ten topics, members in random racks, equal subscriptions:

* ``R=2000, P=6000, M=1000``, rack-optimal and cooperative-sticky;
* ``P=20000, M=100`` rack-optimal with R = 6, 25, 50 and 100 racks (how the cost grows with R);
* ``--unequal``: ``P=6000, M=1000``, each member on 3 to 10 of the ten topics, R = 3, 100 and 2,000,
  both assignors (another path: the general search, and rack-optimal's program and neighbourhoods).

Each runs once in a fresh interpreter (:func:`bench.bench_streams_shapes.print_runs`): wall time, CPU
and the child's peak RSS.  ``--scale`` multiplies the partition and member counts.
"""

from __future__ import annotations

import argparse
import random
from typing import Any

from .bench_streams_shapes import print_runs


def group(racks: int, partitions: int, members: int, assignor: str, unequal: bool = False) -> dict[str, Any]:
    """Every broker its own rack, RF 3 over ten topics, members in random racks (all topics each, or
    3 to 10 of them when ``unequal``)."""
    rng = random.Random(1)
    brokers = [{"id": i, "rack": f"r{i}"} for i in range(racks)]
    topics = {f"t{k}": [rng.sample(range(racks), 3) for _ in range(partitions // 10)] for k in range(10)}
    names = list(topics)
    people = [
        {
            "member_id": f"m{i}",
            "rack": f"r{rng.randrange(racks)}",
            "topics": sorted(rng.sample(names, rng.randint(3, 10))) if unequal else names,
        }
        for i in range(members)
    ]
    cg = {"group_id": "g", "assignor": assignor, "members": people}
    return {"cluster": {"brokers": brokers, "topics": topics}, "consumer_group": cg}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies the partition and member counts")
    ap.add_argument("--unequal", action="store_true", help="the unequal-subscription groups instead")
    args = ap.parse_args(argv)
    k = args.scale
    p, m = int(6_000 * k), int(1_000 * k)
    if args.unequal:
        unequal = {
            f"unequal R={r} P={p} M={m}, {a}": group(r, p, m, a, unequal=True)
            for r in (3, 100, 2_000)
            for a in ("rack-optimal", "cooperative-sticky")
        }
        print(f"scale {k:g}\n")
        print_runs("group", unequal)
        return 0
    cases = {
        f"R=2000 P={p} M={m}, rack-optimal": group(2_000, p, m, "rack-optimal"),
        f"R=2000 P={p} M={m}, cooperative-sticky": group(2_000, p, m, "cooperative-sticky"),
    }
    for r in (6, 25, 50, 100):
        cases[f"R={r} P={int(20_000 * k)} M={int(100 * k)}, rack-optimal"] = group(
            r, int(20_000 * k), int(100 * k), "rack-optimal"
        )
    print(f"scale {k:g}\n")
    print_runs("group", cases)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
