package dev.rackplan.kafka.streams;

import java.util.Arrays;
import java.util.PriorityQueue;

/**
 * Min-cost flow by successive shortest paths (Dijkstra on reduced costs, Johnson potentials):
 * small, exact and allocation-light, for the assignor's graphs of a few thousand nodes. Edge costs
 * must be non-negative when added (they are: cross-rack counts and move tiers), so the potentials
 * start at zero and stay valid.
 */
final class MinCostFlow {
  private int n;
  private int m;
  private int[] head;
  private int[] next = new int[16];
  private int[] to = new int[16];
  private long[] cap = new long[16];
  private long[] cost = new long[16];

  MinCostFlow(int nodes) {
    n = nodes;
    head = new int[nodes];
    Arrays.fill(head, -1);
  }

  /** Adds edge u->v and returns its id (its flow is read with {@link #flow}). */
  int addEdge(int u, int v, long capacity, long edgeCost) {
    if (edgeCost < 0) throw new IllegalArgumentException("negative edge cost " + edgeCost);
    if (m + 2 > to.length) {
      int len = to.length * 2;
      next = Arrays.copyOf(next, len);
      to = Arrays.copyOf(to, len);
      cap = Arrays.copyOf(cap, len);
      cost = Arrays.copyOf(cost, len);
    }
    int id = m;
    link(u, v, capacity, edgeCost);
    link(v, u, 0, -edgeCost);
    return id;
  }

  private void link(int u, int v, long c, long w) {
    to[m] = v;
    cap[m] = c;
    cost[m] = w;
    next[m] = head[u];
    head[u] = m++;
  }

  /** Flow on edge {@code id} (as returned by {@link #addEdge}). */
  long flow(int id) {
    return cap[id ^ 1];
  }

  /** Flow-carrying edges from nodes in [fromLo, fromHi) to nodes in [fromHi, toHi). */
  void forEachFlow(int fromLo, int fromHi, int toHi, FlowVisitor visitor) {
    for (int u = fromLo; u < fromHi; u++)
      for (int e = head[u]; e != -1; e = next[e])
        if ((e & 1) == 0 && to[e] >= fromHi && to[e] < toHi && flow(e) > 0) visitor.visit(u, to[e], flow(e));
  }

  /** One edge's flow. */
  interface FlowVisitor {
    void visit(int from, int to, long flow);
  }

  /** Sends up to {@code want} units from s to t at least cost; returns {flow, cost}. */
  long[] run(int s, int t, long want) {
    long[] pot = new long[n];
    long[] dist = new long[n];
    int[] via = new int[n];
    long flow = 0;
    long total = 0;
    while (flow < want) {
      Arrays.fill(dist, Long.MAX_VALUE);
      Arrays.fill(via, -1);
      dist[s] = 0;
      PriorityQueue<long[]> q = new PriorityQueue<>((a, b) -> Long.compare(a[0], b[0]));
      q.add(new long[] {0, s});
      while (!q.isEmpty()) {
        long[] top = q.poll();
        int u = (int) top[1];
        if (top[0] > dist[u]) continue;
        for (int e = head[u]; e != -1; e = next[e]) {
          if (cap[e] <= 0) continue;
          int v = to[e];
          long d = dist[u] + cost[e] + pot[u] - pot[v];
          if (d < dist[v]) {
            dist[v] = d;
            via[v] = e;
            q.add(new long[] {d, v});
          }
        }
      }
      if (dist[t] == Long.MAX_VALUE) break;
      for (int v = 0; v < n; v++) if (dist[v] != Long.MAX_VALUE) pot[v] += dist[v];
      long push = want - flow;
      for (int v = t; v != s; v = to[via[v] ^ 1]) push = Math.min(push, cap[via[v]]);
      for (int v = t; v != s; v = to[via[v] ^ 1]) {
        cap[via[v]] -= push;
        cap[via[v] ^ 1] += push;
        total += push * cost[via[v]];
      }
      flow += push;
    }
    return new long[] {flow, total};
  }
}
