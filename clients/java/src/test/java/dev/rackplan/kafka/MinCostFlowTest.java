package dev.rackplan.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.Random;
import org.junit.jupiter.api.Test;

/** The flow against brute force: random assignment problems, every task on one of the slots of the members. */
class MinCostFlowTest {
  /** Cheapest placement of tasks 0..t-1 on members with {@code caps}, by trying every placement. */
  static long brute(long[][] cost, int[] caps, int task) {
    if (task == cost.length) return 0;
    long best = Long.MAX_VALUE;
    for (int m = 0; m < caps.length; m++) {
      if (caps[m] == 0) continue;
      caps[m]--;
      long rest = brute(cost, caps, task + 1);
      caps[m]++;
      if (rest != Long.MAX_VALUE) best = Math.min(best, cost[task][m] + rest);
    }
    return best;
  }

  @Test
  void minimalCostOnRandomCapacitatedAssignments() {
    Random rnd = new Random(11);
    for (int i = 0; i < 300; i++) {
      int tasks = 1 + rnd.nextInt(7), members = 1 + rnd.nextInt(4);
      int[] caps = new int[members];
      int room = 0;
      for (int m = 0; m < members; m++) room += caps[m] = rnd.nextInt(4);
      if (room < tasks) caps[0] += tasks - room;
      long[][] cost = new long[tasks][members];
      MinCostFlow f = new MinCostFlow(2 + tasks + members);
      for (int t = 0; t < tasks; t++) {
        f.addEdge(0, 2 + t, 1, 0);
        for (int m = 0; m < members; m++) {
          cost[t][m] = rnd.nextInt(30);
          f.addEdge(2 + t, 2 + tasks + m, 1, cost[t][m]);
        }
      }
      for (int m = 0; m < members; m++) f.addEdge(2 + tasks + m, 1, caps[m], 0);
      long[] r = f.run(0, 1, tasks);
      assertEquals(tasks, r[0], "case " + i);
      assertEquals(brute(cost, caps.clone(), 0), r[1], "case " + i);
    }
  }

  /** Tasks costing 0, 1 or 2 on each member (the cheapest placement: every task at cost 0), room for all. */
  static MinCostFlow onePathLength(int tasks, int members) {
    MinCostFlow f = new MinCostFlow(2 + tasks + members);
    for (int t = 0; t < tasks; t++) {
      f.addEdge(0, 2 + t, 1, 0);
      for (int m = 0; m < members; m++) f.addEdge(2 + t, 2 + tasks + m, 1, (t + m) % 3);
    }
    for (int m = 0; m < members; m++) f.addEdge(2 + tasks + m, 1, tasks / members, 0);
    return f;
  }

  /**
   * The primal-dual step: units that share a path length go in one phase (one Dijkstra), not one
   * each. 600 tasks, three members of 200 slots, every task costing 0, 1 or 2 on each member: at most
   * a task at cost 0 on each, so one path length: one phase (successive shortest paths ran 600
   * Dijkstras), at the optimum 0. The random test above checks exactness on small graphs.
   */
  @Test
  void unitsOfOnePathLengthShareOneDijkstra() {
    int tasks = 600, members = 3;
    MinCostFlow f = onePathLength(tasks, members);
    long[] r = f.run(0, 1, tasks);
    assertEquals(tasks, r[0]);
    assertEquals(0, r[1]); // each member has 200 tasks at cost 0
    assertEquals(1, f.phases);
  }

  /**
   * Convex edges: a flow with one convex edge per task-member pair (ascending run prices) costs
   * exactly what the same network with a unit edge per run unit costs (the definition; the unit
   * network is checked against brute force above), on 300 random graphs with shared members.
   */
  @Test
  void convexEdgesCostWhatTheirUnitEdgesCost() {
    Random rnd = new Random(5);
    for (int i = 0; i < 300; i++) {
      int sources = 1 + rnd.nextInt(4), members = 1 + rnd.nextInt(4);
      int[] supply = new int[sources];
      int want = 0;
      for (int k = 0; k < sources; k++) want += supply[k] = 1 + rnd.nextInt(5);
      MinCostFlow convex = new MinCostFlow(2 + sources + members);
      MinCostFlow units = new MinCostFlow(2 + sources + members);
      for (int k = 0; k < sources; k++) {
        convex.addEdge(0, 2 + k, supply[k], 0);
        units.addEdge(0, 2 + k, supply[k], 0);
        for (int m = 0; m < members; m++) {
          int runs = 1 + rnd.nextInt(3);
          long[] price = new long[runs], count = new long[runs];
          long p = rnd.nextInt(5);
          for (int r = 0; r < runs; r++) {
            price[r] = p += rnd.nextInt(6);
            count[r] = 1 + rnd.nextInt(3);
            for (int u = 0; u < count[r]; u++) units.addEdge(2 + k, 2 + sources + m, 1, price[r]);
          }
          convex.addConvex(2 + k, 2 + sources + m, price, count);
        }
      }
      for (int m = 0; m < members; m++) {
        int room = 1 + rnd.nextInt(want);
        convex.addEdge(2 + sources + m, 1, room, 0);
        units.addEdge(2 + sources + m, 1, room, 0);
      }
      long[] a = convex.run(0, 1, want), b = units.run(0, 1, want);
      assertEquals(b[0], a[0], "case " + i);
      assertEquals(b[1], a[1], "case " + i);
    }
  }

  /** Past its work bound the flow throws (the caller falls back) instead of running on. */
  @Test
  void aFlowPastItsWorkBoundThrows() {
    int tasks = 600, members = 3;
    MinCostFlow f = onePathLength(tasks, members);
    f.workLimit = 1_000;
    IllegalStateException e = assertThrows(IllegalStateException.class, () -> f.run(0, 1, tasks));
    assertEquals("the min-cost flow passed its work bound of 1000 edge steps", e.getMessage());
    assertEquals(true, f.work > 1_000 && f.work < 1_000 + 2 * (tasks * 4 + members));
  }
}
