package dev.rackplan.kafka.streams;

import static org.junit.jupiter.api.Assertions.assertEquals;

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

  /**
   * The primal-dual step: units that share a path length go in one phase (one Dijkstra), not one
   * each. 600 tasks, three members of 200 slots, every task costing 0, 1 or 2 on each member: at most
   * a task at cost 0 on each, so one path length: one phase (successive shortest paths ran 600
   * Dijkstras), at the optimum 0. The random test above checks exactness on small graphs.
   */
  @Test
  void unitsOfOnePathLengthShareOneDijkstra() {
    int tasks = 600, members = 3;
    MinCostFlow f = new MinCostFlow(2 + tasks + members);
    for (int t = 0; t < tasks; t++) {
      f.addEdge(0, 2 + t, 1, 0);
      for (int m = 0; m < members; m++) f.addEdge(2 + t, 2 + tasks + m, 1, (t + m) % 3);
    }
    for (int m = 0; m < members; m++) f.addEdge(2 + tasks + m, 1, tasks / members, 0);
    long[] r = f.run(0, 1, tasks);
    assertEquals(tasks, r[0]);
    assertEquals(0, r[1]); // each member has 200 tasks at cost 0
    assertEquals(1, f.phases);
  }
}
