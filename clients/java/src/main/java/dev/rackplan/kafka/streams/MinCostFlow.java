package dev.rackplan.kafka.streams;

import java.util.Arrays;

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

  /**
   * Sends up to {@code want} units from s to t at least cost; returns {flow, cost}. Each Dijkstra stops
   * when t is settled; nodes not settled then get t's distance added to their potential (the usual
   * early-exit rule, which keeps every reduced cost non-negative). The heap is an array of node ids.
   */
  long[] run(int s, int t, long want) {
    long[] pot = new long[n];
    long[] dist = new long[n];
    int[] via = new int[n];
    boolean[] done = new boolean[n];
    int[] heap = new int[n];
    int[] where = new int[n];
    long flow = 0;
    long total = 0;
    while (flow < want) {
      Arrays.fill(dist, Long.MAX_VALUE);
      Arrays.fill(done, false);
      Arrays.fill(where, -1);
      dist[s] = 0;
      int size = 0;
      heap[size] = s;
      where[s] = size++;
      siftUp(heap, where, dist, 0);
      while (size > 0) {
        int u = heap[0];
        where[u] = -1;
        size--;
        if (size > 0) {
          heap[0] = heap[size];
          where[heap[0]] = 0;
          siftDown(heap, where, dist, 0, size);
        }
        done[u] = true;
        if (u == t) break;
        for (int e = head[u]; e != -1; e = next[e]) {
          if (cap[e] <= 0) continue;
          int v = to[e];
          if (done[v]) continue;
          long d = dist[u] + cost[e] + pot[u] - pot[v];
          if (d < dist[v]) {
            dist[v] = d;
            via[v] = e;
            if (where[v] < 0) {
              heap[size] = v;
              where[v] = size++;
            }
            siftUp(heap, where, dist, where[v]);
          }
        }
      }
      if (!done[t]) break;
      long dt = dist[t];
      for (int v = 0; v < n; v++) pot[v] += Math.min(dist[v], dt); // unsettled or unreached: + dt
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

  private static void siftUp(int[] heap, int[] where, long[] key, int i) {
    int x = heap[i];
    while (i > 0) {
      int parent = (i - 1) >>> 1;
      if (key[heap[parent]] <= key[x]) break;
      heap[i] = heap[parent];
      where[heap[i]] = i;
      i = parent;
    }
    heap[i] = x;
    where[x] = i;
  }

  private static void siftDown(int[] heap, int[] where, long[] key, int i, int size) {
    int x = heap[i];
    while (true) {
      int c = 2 * i + 1;
      if (c >= size) break;
      if (c + 1 < size && key[heap[c + 1]] < key[heap[c]]) c++;
      if (key[heap[c]] >= key[x]) break;
      heap[i] = heap[c];
      where[heap[i]] = i;
      i = c;
    }
    heap[i] = x;
    where[x] = i;
  }
}
