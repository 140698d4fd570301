package dev.rackplan.kafka;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Min-cost flow by successive shortest paths (Dijkstra on reduced costs, Johnson potentials), every
 * shortest path of a distance used before the next Dijkstra (the primal-dual method): small, exact
 * and allocation-light, for the assignor's graphs of a few thousand nodes. Edge costs must be
 * non-negative when added (they are: cross-rack counts, bytes and move tiers), so the potentials
 * start at zero and stay valid.
 *
 * <p>Why the primal-dual step: the assignor's source has one unit edge per task, so plain successive
 * shortest paths ran one Dijkstra over the whole graph per task (thousands on the coordinator's
 * thread for a large group); most tasks share a few path lengths, and after one Dijkstra every path
 * of that length is made of edges of reduced cost zero, found by depth-first search with a
 * current-edge pointer per node (a dead end is not entered again in that phase).
 *
 * <p>Shared by both broker plugins: the Streams task assignment and the KIP-848 balance ({@link
 * RackStickyBalancer}), which also needs
 * <ul>
 *   <li>convex edges ({@link #addConvex}): units at ascending run prices, the cheapest first. The
 *       residual pair shows one run at a time (the next unit's price forward, the last unit's refund
 *       backward), which are the tightest of the parallel unit edges it stands for, so reduced costs
 *       stay non-negative and the method stays exact without an edge per unit;
 *   <li>a work bound ({@link #workLimit}): the edges looked at, counted by every search, so the cost
 *       on the coordinator's thread is bounded by the input's size, not by luck; past it {@link #run}
 *       throws and the caller falls back. It counts steps, not time: every broker decides alike.
 * </ul>
 */
public final class MinCostFlow {
  private int n;
  private int m;
  private int[] head;
  private int[] next = new int[16];
  private int[] to = new int[16];
  private long[] cap = new long[16];
  private long[] cost = new long[16];

  /** Convex edges by edge pair ({@code id >> 1}): index into {@link #convex}, or -1 (grown with the edges). */
  private int[] convexOf = new int[8];
  private final List<Convex> convex = new ArrayList<>();

  /** Edges looked at by {@link #run} so far. */
  public long work;
  /** {@link #run} throws {@link IllegalStateException} once {@link #work} passes this. */
  public long workLimit = Long.MAX_VALUE;

  /** A convex edge's runs: {@code end[i] - end[i-1]} units at {@code price[i]}, prices ascending; its flow. */
  private static final class Convex {
    final long[] price;
    final long[] end; // cumulative counts
    long flow;

    Convex(long[] price, long[] count) {
      this.price = price.clone();
      this.end = new long[count.length];
      long sum = 0;
      for (int i = 0; i < count.length; i++) end[i] = sum += count[i];
    }

    /** The run holding unit {@code u} (0-based). */
    int runOf(long u) {
      int i = Arrays.binarySearch(end, u + 1);
      return i >= 0 ? i : -i - 1;
    }
  }

  public MinCostFlow(int nodes) {
    Arrays.fill(convexOf, -1);
    n = nodes;
    head = new int[nodes];
    Arrays.fill(head, -1);
  }

  /** Adds edge u->v and returns its id (its flow is read with {@link #flow}). */
  public int addEdge(int u, int v, long capacity, long edgeCost) {
    if (edgeCost < 0) throw new IllegalArgumentException("negative edge cost " + edgeCost);
    if (m + 2 > to.length) {
      int len = to.length * 2;
      next = Arrays.copyOf(next, len);
      to = Arrays.copyOf(to, len);
      cap = Arrays.copyOf(cap, len);
      cost = Arrays.copyOf(cost, len);
    }
    if ((m >> 1) >= convexOf.length) {
      int old = convexOf.length;
      convexOf = Arrays.copyOf(convexOf, Math.max(old * 2, (m >> 1) + 1));
      Arrays.fill(convexOf, old, convexOf.length, -1);
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

  /**
   * A convex edge u -> v: {@code count[i]} units at {@code price[i]} each (prices ascending and
   * non-negative); the cheapest units are used first. Returns its id (for {@link #flow}).
   */
  public int addConvex(int u, int v, long[] price, long[] count) {
    for (int i = 0; i < price.length; i++)
      if (price[i] < 0 || (i > 0 && price[i] < price[i - 1])) throw new IllegalArgumentException("convex prices must ascend from 0");
    int id = addEdge(u, v, 0, 0);
    Convex c = new Convex(price, count);
    convexOf[id >> 1] = convex.size();
    convex.add(c);
    refresh(id, c);
    return id;
  }

  /** A convex edge's residual pair after its flow changed: the next unit's price, the last unit's refund. */
  private void refresh(int e, Convex c) {
    long total = c.end.length == 0 ? 0 : c.end[c.end.length - 1];
    if (c.flow < total) {
      int i = c.runOf(c.flow);
      cap[e] = c.end[i] - c.flow;
      cost[e] = c.price[i];
    } else {
      cap[e] = 0;
    }
    if (c.flow > 0) {
      int j = c.runOf(c.flow - 1);
      cap[e ^ 1] = c.flow - (j == 0 ? 0 : c.end[j - 1]);
      cost[e ^ 1] = -c.price[j];
    } else {
      cap[e ^ 1] = 0;
    }
  }

  /** Sends {@code push} units along residual edge {@code e} (a convex edge's pair is refreshed). */
  private void send(int e, long push) {
    int k = convexOf[e >> 1];
    if (k < 0) {
      cap[e] -= push;
      cap[e ^ 1] += push;
      return;
    }
    Convex c = convex.get(k);
    c.flow += (e & 1) == 0 ? push : -push;
    refresh(e & ~1, c);
  }

  /** Flow on edge {@code id} (as returned by {@link #addEdge} or {@link #addConvex}). */
  public long flow(int id) {
    int k = convexOf[id >> 1];
    return k >= 0 ? convex.get(k).flow : cap[id ^ 1];
  }

  private void charge(long steps) {
    work += steps;
    if (work > workLimit) throw new IllegalStateException("the min-cost flow passed its work bound of " + workLimit + " edge steps");
  }

  /** Flow-carrying edges from nodes in [fromLo, fromHi) to nodes in [fromHi, toHi). */
  public void forEachFlow(int fromLo, int fromHi, int toHi, FlowVisitor visitor) {
    for (int u = fromLo; u < fromHi; u++)
      for (int e = head[u]; e != -1; e = next[e])
        if ((e & 1) == 0 && to[e] >= fromHi && to[e] < toHi && flow(e) > 0) visitor.visit(u, to[e], flow(e));
  }

  /** One edge's flow. */
  public interface FlowVisitor {
    void visit(int from, int to, long flow);
  }

  /** Dijkstra runs of the last {@link #run} (its phases): how much work the primal-dual step saved. */
  public int phases;

  /**
   * Sends up to {@code want} units from s to t at least cost; returns {flow, cost}. Each Dijkstra stops
   * when t is settled; nodes not settled then get t's distance added to their potential (the usual
   * early-exit rule, which keeps every reduced cost non-negative), so the shortest path found has
   * reduced cost zero on every edge. Then {@link #pushTight} sends flow along every path of reduced
   * cost zero it finds (each one a shortest path too, every reduced cost being non-negative, and each
   * augmentation keeps them so: a reversed edge of cost zero has cost zero). A phase whose search finds
   * no path (it never enters a node twice, so a zero-cost cycle can hide one) sends one unit along
   * the Dijkstra's own path. The heap is an array of node ids.
   */
  public long[] run(int s, int t, long want) {
    long[] pot = new long[n];
    long[] dist = new long[n];
    int[] via = new int[n];
    boolean[] done = new boolean[n];
    int[] heap = new int[n];
    int[] where = new int[n];
    Tight tight = new Tight(n);
    phases = 0;
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
        long steps = 0;
        for (int e = head[u]; e != -1; e = next[e]) {
          steps++;
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
        charge(steps);
      }
      if (!done[t]) break;
      phases++;
      long dt = dist[t];
      for (int v = 0; v < n; v++) pot[v] += Math.min(dist[v], dt); // unsettled or unreached: + dt
      long[] sent = pushTight(s, t, want - flow, pot, tight);
      if (sent[0] == 0) {
        long push = want - flow;
        for (int v = t; v != s; v = to[via[v] ^ 1]) push = Math.min(push, cap[via[v]]);
        for (int v = t; v != s; v = to[via[v] ^ 1]) {
          total += push * cost[via[v]];
          send(via[v], push);
        }
        flow += push;
      } else {
        flow += sent[0];
        total += sent[1];
      }
    }
    return new long[] {flow, total};
  }

  /** The depth-first search's arrays, allocated once per {@link #run}. */
  private static final class Tight {
    final int[] iter;
    final int[] nodes;
    final int[] edges;
    final boolean[] onPath;
    final boolean[] dead;

    Tight(int n) {
      iter = new int[n];
      nodes = new int[n + 1];
      edges = new int[n + 1];
      onPath = new boolean[n];
      dead = new boolean[n];
    }
  }

  /**
   * Up to {@code limit} units along paths s to t whose every edge has reduced cost zero under {@code
   * pot} (residual capacity left); returns {units sent, their cost}. Iterative, with a current-edge
   * pointer per node: an edge that leads nowhere is skipped for the rest of the phase, a node with no
   * edge left is dead for it, so one phase costs the edges it looks at plus the paths it sends.
   */
  private long[] pushTight(int s, int t, long limit, long[] pot, Tight k) {
    System.arraycopy(head, 0, k.iter, 0, n);
    Arrays.fill(k.dead, false);
    long sent = 0;
    long spent = 0;
    while (sent < limit) {
      int depth = 0;
      k.nodes[0] = s;
      k.onPath[s] = true;
      while (depth >= 0 && k.nodes[depth] != t) {
        int u = k.nodes[depth];
        int e = k.iter[u];
        long steps = 1;
        while (e != -1) {
          int v = to[e];
          if (cap[e] > 0 && !k.onPath[v] && !k.dead[v] && cost[e] + pot[u] - pot[v] == 0) break;
          e = next[e];
          steps++;
        }
        charge(steps);
        k.iter[u] = e;
        if (e != -1) {
          k.edges[depth] = e;
          k.nodes[++depth] = to[e];
          k.onPath[to[e]] = true;
        } else {
          k.dead[u] = true;
          k.onPath[u] = false;
          if (--depth >= 0) k.iter[k.nodes[depth]] = next[k.iter[k.nodes[depth]]];
        }
      }
      if (depth < 0) break;
      long push = limit - sent;
      for (int i = 0; i < depth; i++) push = Math.min(push, cap[k.edges[i]]);
      for (int i = 0; i < depth; i++) {
        int e = k.edges[i];
        spent += push * cost[e];
        send(e, push);
      }
      charge(depth);
      for (int i = 0; i <= depth; i++) k.onPath[k.nodes[i]] = false;
      sent += push;
    }
    return new long[] {sent, spent};
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
