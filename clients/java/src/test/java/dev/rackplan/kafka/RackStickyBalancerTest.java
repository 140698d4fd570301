package dev.rackplan.kafka;

import static dev.rackplan.kafka.CoordinatorGroups.crossRack;
import static dev.rackplan.kafka.CoordinatorGroups.moves;
import static dev.rackplan.kafka.CoordinatorGroups.plain;
import static dev.rackplan.kafka.CoordinatorGroups.spec;
import static dev.rackplan.kafka.CoordinatorGroups.violation;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rackplan.kafka.CoordinatorGroups.Member;
import dev.rackplan.kafka.CoordinatorGroups.Topics;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;
import org.junit.jupiter.api.Test;

/**
 * RackplanServerAssignor without a plan (RackStickyBalancer) against Kafka's own {@code uniform}
 * (UniformAssignor, 4.4) on random groups in the coordinator's terms, and against brute force.
 */
class RackStickyBalancerTest {
  static final String[] RACKS = {"az-a", "az-b", "az-c"};

  static Map<String, Member> members(Random r, Topics topics, boolean homogeneous, int count) {
    List<Uuid> ids = topics.ids();
    Set<Uuid> all = new HashSet<>(ids);
    Map<String, Member> out = new TreeMap<>();
    for (int i = 0; i < count; i++) {
      Set<Uuid> subs = all;
      if (!homogeneous) {
        subs = new HashSet<>();
        for (Uuid t : ids) if (r.nextInt(3) > 0) subs.add(t);
        if (subs.isEmpty()) subs.add(ids.get(r.nextInt(ids.size())));
      }
      String rack = r.nextInt(12) == 0 ? null : RACKS[r.nextInt(RACKS.length)];
      out.put("m" + i + "-" + Long.toHexString(r.nextLong()), new Member(rack, subs));
    }
    return out;
  }

  static RackplanServerAssignor rackplan(Topics topics) {
    return RackplanServerAssignor.forTest(new PlanStore(), topics.names());
  }

  /** One property run: ours valid and balanced, never more cross-rack than uniform, sticky. */
  static int[] compare(long seed, boolean homogeneous) {
    Random r = new Random(seed);
    Topics topics = CoordinatorGroups.topics(r, 1 + r.nextInt(4), 1 + r.nextInt(24), RACKS, 1 + r.nextInt(2), true);
    Map<String, Member> members = members(r, topics, homogeneous, 1 + r.nextInt(10));
    // a current assignment: Kafka's uniform for a random part of the group (members that were there)
    Map<String, Member> before = new TreeMap<>();
    for (Map.Entry<String, Member> e : members.entrySet()) if (r.nextInt(4) > 0) before.put(e.getKey(), e.getValue());
    Map<String, Map<Uuid, Set<Integer>>> current =
        before.isEmpty() ? Map.of() : plain(new UniformAssignor().assign(spec(before, Map.of()), topics));
    RackplanServerAssignor a = rackplan(topics);
    Map<String, Map<Uuid, Set<Integer>>> ours = plain(a.assign(spec(members, current), topics));
    Map<String, Map<Uuid, Set<Integer>>> uniform = plain(new UniformAssignor().assign(spec(members, current), topics));
    String where = "seed " + seed + (homogeneous ? " homogeneous" : " heterogeneous");
    assertEquals(1, a.balancedCount.get(), where + ": the balancer assigned (" + a.lastSafeReason + ")");
    assertNull(violation(members, topics, ours), where);
    assertNull(violation(members, topics, uniform), where + " (uniform)");
    int oursCross = crossRack(members, topics, ours);
    int uniformCross = crossRack(members, topics, uniform);
    assertTrue(oursCross <= uniformCross, where + ": cross-rack " + oursCross + " > uniform's " + uniformCross);
    // again from our own result: nothing moves
    Map<String, Map<Uuid, Set<Integer>>> again = plain(rackplan(topics).assign(spec(members, ours), topics));
    assertEquals(ours, again, where + ": not stable");
    return new int[] {oursCross, uniformCross};
  }

  /** Cross-rack partitions summed over 400 random groups from ``firstSeed``: {rackplan, uniform}. */
  static long[] totals(long firstSeed, boolean homogeneous) {
    long[] sum = new long[2];
    for (long seed = firstSeed; seed < firstSeed + 400; seed++) {
      int[] c = compare(seed, homogeneous);
      sum[0] += c[0];
      sum[1] += c[1];
    }
    System.out.printf("%s, 400 groups: cross-rack rackplan %d, uniform %d%n",
        homogeneous ? "homogeneous" : "heterogeneous", sum[0], sum[1]);
    return sum;
  }

  @Test
  void homogeneousGroupsNeverMoreCrossRackThanKafkasUniform() {
    long[] t = totals(0, true);
    assertTrue(t[0] * 2 < t[1], "far fewer cross-rack partitions than uniform: " + t[0] + " vs " + t[1]);
  }

  @Test
  void heterogeneousGroupsNeverMoreCrossRackThanKafkasUniform() {
    long[] t = totals(1000, false);
    assertTrue(t[0] * 3 < t[1] * 2, "far fewer cross-rack partitions than uniform: " + t[0] + " vs " + t[1]);
  }

  /** Brute force on small homogeneous groups: no floor/ceil assignment has fewer cross-rack partitions. */
  @Test
  void homogeneousIsExactAgainstBruteForce() {
    for (long seed = 0; seed < 150; seed++) {
      Random r = new Random(seed);
      Topics topics = CoordinatorGroups.topics(r, 1 + r.nextInt(2), 4, RACKS, 2, false);
      Map<String, Member> members = members(r, topics, true, 1 + r.nextInt(3));
      List<String> ms = new ArrayList<>(members.keySet());
      List<Uuid> ids = topics.ids();
      List<int[]> parts = new ArrayList<>();
      for (int t = 0; t < ids.size(); t++) for (int p = 0; p < topics.numPartitions(ids.get(t)); p++) parts.add(new int[] {t, p});
      if (parts.size() > 8) continue;
      int best = Integer.MAX_VALUE;
      int[] pick = new int[parts.size()];
      int total = parts.size(), n = ms.size();
      for (long code = 0; code < Math.pow(n, total); code++) {
        long c = code;
        int[] count = new int[n];
        for (int i = 0; i < total; i++) {
          pick[i] = (int) (c % n);
          c /= n;
          count[pick[i]]++;
        }
        boolean balanced = true;
        for (int k : count) if (k < total / n || k > (total + n - 1) / n) balanced = false;
        if (!balanced) continue;
        int cross = 0;
        for (int i = 0; i < total; i++) {
          String rack = members.get(ms.get(pick[i])).rack();
          Set<String> rs = topics.racksForPartition(ids.get(parts.get(i)[0]), parts.get(i)[1]);
          if (rack != null && !rs.isEmpty() && !rs.contains(rack)) cross++;
        }
        best = Math.min(best, cross);
      }
      Map<String, Map<Uuid, Set<Integer>>> ours = plain(rackplan(topics).assign(spec(members, Map.of()), topics));
      assertEquals(best, crossRack(members, topics, ours), "seed " + seed);
    }
  }

  /** A member joins a settled group: far fewer moves than a fresh assignment, close to the new member's share. */
  @Test
  void aJoiningMemberMovesFewPartitions() {
    long ours = 0, fresh = 0, share = 0;
    long[] byKind = new long[4];
    for (long seed = 0; seed < 100; seed++) {
      Random r = new Random(seed);
      boolean homogeneous = seed % 2 == 0;
      Topics topics = CoordinatorGroups.topics(r, 2 + r.nextInt(3), 40, RACKS, 2, false);
      Map<String, Member> members = members(r, topics, homogeneous, 3 + r.nextInt(8));
      Map<String, Map<Uuid, Set<Integer>>> settled = plain(rackplan(topics).assign(spec(members, Map.of()), topics));
      Map<String, Member> grown = new TreeMap<>(members);
      grown.putAll(members(new Random(seed + 7), topics, homogeneous, 1));
      Map<String, Map<Uuid, Set<Integer>>> next = plain(rackplan(topics).assign(spec(grown, settled), topics));
      Map<String, Map<Uuid, Set<Integer>>> scratch = plain(rackplan(topics).assign(spec(grown, Map.of()), topics));
      assertNull(violation(grown, topics, next), "seed " + seed);
      if (homogeneous) // exact: the sticky answer is as local as the fresh one
        assertEquals(crossRack(grown, topics, scratch), crossRack(grown, topics, next), "seed " + seed + ": same locality as from scratch");
      int moved = moves(settled, next);
      int joined = 0;
      for (String m : grown.keySet()) if (!members.containsKey(m)) for (Set<Integer> ps : next.get(m).values()) joined += ps.size();
      ours += moved;
      // a fresh assignment: what a non-sticky assignor (Kafka's uniform with no current assignment) gives
      fresh += moves(settled, plain(new UniformAssignor().assign(spec(grown, Map.of()), topics)));
      share += joined;
      byKind[homogeneous ? 0 : 2] += moved;
      byKind[homogeneous ? 1 : 3] += joined;
    }
    System.out.printf("a member joins (100 groups): moves sticky %d, fresh %d, the new members' shares %d; homogeneous %d/%d, heterogeneous %d/%d%n",
        ours, fresh, share, byKind[0], byKind[1], byKind[2], byKind[3]);
    assertTrue(ours * 3 < fresh, "moves " + ours + " vs fresh " + fresh);
    // the least possible is the new members' shares; rack locality first may add a few chain moves
    assertTrue(ours * 2 < share * 3, "moves " + ours + " vs the new members' shares " + share);
  }

  /** The same group in another member order (another broker, another map): the same assignment. */
  @Test
  void deterministic() {
    for (long seed = 0; seed < 50; seed++) {
      Random r = new Random(seed);
      Topics topics = CoordinatorGroups.topics(r, 3, 20, RACKS, 2, true);
      Map<String, Member> members = members(r, topics, seed % 2 == 0, 6);
      Map<String, Member> reversed = new TreeMap<>(java.util.Comparator.reverseOrder());
      reversed.putAll(members);
      assertEquals(plain(rackplan(topics).assign(spec(members, Map.of()), topics)),
          plain(rackplan(topics).assign(spec(reversed, Map.of()), topics)));
    }
  }

  /**
   * Racks past a long's 64 bits ({@link RackMasks}' words; before it the balancer declined groups with
   * more than 63 racks): 500 random groups, heterogeneous or not, with current owners and unknown racks,
   * give exactly the same assignment when every rack index r is moved to r + 130 (three words, the
   * order of racks kept) as with one bit per rack.
   */
  @Test
  void racksPastSixtyFourGiveTheSameAssignment() {
    Random r = new Random(64);
    for (int trial = 0; trial < 500; trial++) {
      int n = 1 + r.nextInt(10), topics = 1 + r.nextInt(4);
      int[] numPartitions = new int[topics];
      long[][] masks = new long[topics][];
      int[][] current = new int[topics][];
      for (int t = 0; t < topics; t++) {
        numPartitions[t] = 1 + r.nextInt(24);
        masks[t] = new long[numPartitions[t]];
        current[t] = new int[numPartitions[t]];
        for (int p = 0; p < numPartitions[t]; p++) {
          masks[t][p] = r.nextInt(8); // a subset of racks 0-2, sometimes none (unknown)
          current[t][p] = r.nextInt(3) == 0 ? -1 : r.nextInt(n);
        }
      }
      boolean homogeneous = r.nextBoolean();
      int[] memberRack = new int[n], shiftedRack = new int[n];
      int[][] memberTopics = new int[n][];
      for (int m = 0; m < n; m++) {
        memberRack[m] = r.nextInt(8) == 0 ? -1 : r.nextInt(3);
        shiftedRack[m] = memberRack[m] < 0 ? -1 : memberRack[m] + 130;
        List<Integer> ts = new ArrayList<>();
        for (int t = 0; t < topics; t++) if (homogeneous || r.nextInt(3) > 0) ts.add(t);
        if (ts.isEmpty()) ts.add(r.nextInt(topics));
        memberTopics[m] = ts.stream().mapToInt(Integer::intValue).toArray();
      }
      RackMasks.Builder wide = new RackMasks.Builder(topics);
      for (int t = 0; t < topics; t++) {
        wide.topic(t, numPartitions[t]);
        for (int p = 0; p < numPartitions[t]; p++) {
          long[] w = new long[3];
          for (int k = 0; k < 3; k++) if ((masks[t][p] & (1L << k)) != 0) w[(k + 130) >> 6] |= 1L << ((k + 130) & 63);
          wide.partition(t, p, w, 3);
        }
      }
      int[][] narrow = RackStickyBalancer.assign(memberRack, memberTopics, numPartitions, masks, current);
      int[][] shifted = RackStickyBalancer.assign(shiftedRack, memberTopics, numPartitions, wide.build(), current, null);
      for (int t = 0; t < topics; t++) assertArrayEquals(narrow[t], shifted[t], "trial " + trial + " topic " + t);
    }
  }
}
