"""The compiled primal-dual phases (``_flowcore.c``): :func:`rackplan.assignor.flow.mincost._phases` in C."""

from collections.abc import Sequence

SOLVED: int
CUT_OFF: int
INFEASIBLE: int
FALLBACK: int

def solve(
    num_nodes: int, edges: Sequence[tuple[int, int, int, int]], supply: Sequence[int], cutoff: int | None, /
) -> tuple[int, int | None, list[int] | int | None]:
    """``(SOLVED, cost, flow)``, ``(CUT_OFF, None, None)``, ``(INFEASIBLE, sent, need)`` or
    ``(FALLBACK, None, None)`` (outside the core's 64-bit domain: solve it in Python)."""
