"""Optimal dual prices of a min-cost flow: which arcs optimal flows may, must or cannot use.

rack-optimal solves its class-level flow once, then needs *every* optimal
class-level flow, not just the one found, to choose among them the stickiest.
Complementary slackness describes that set: with optimal prices ``p``, an arc
of positive reduced cost ``cost + p[tail] - p[head]`` carries nothing in any
optimal flow, one of negative reduced cost is full in all of them, and the
optimal flows are exactly the feasible flows that respect this on every arc.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from .mincost import Edge


def residual_potentials(num_nodes: int, edges: Sequence[Edge], flow: Sequence[int]) -> list[int]:
    """Node prices under which ``flow`` satisfies complementary slackness.

    For an optimal flow the residual graph has no negative cycle, so shortest
    distances from a virtual root joined to every node exist (Bellman-Ford,
    here its queue-based form); they give every residual arc a non-negative
    reduced cost.  Raises ``ValueError`` when ``flow`` is not optimal.
    """
    out: list[list[tuple[int, int]]] = [[] for _ in range(num_nodes)]
    for (u, v, c, w), f in zip(edges, flow, strict=True):
        if f < c:
            out[u].append((v, w))
        if f > 0:
            out[v].append((u, -w))
    d = [0] * num_nodes
    queue = deque(range(num_nodes))
    queued = [True] * num_nodes
    passes = [0] * num_nodes
    while queue:
        u = queue.popleft()
        queued[u] = False
        du = d[u]
        for v, w in out[u]:
            if du + w < d[v]:
                d[v] = du + w
                if not queued[v]:
                    passes[v] += 1
                    if passes[v] > num_nodes:
                        raise ValueError("negative cycle: the flow is not optimal")
                    queued[v] = True
                    queue.append(v)
    return d
