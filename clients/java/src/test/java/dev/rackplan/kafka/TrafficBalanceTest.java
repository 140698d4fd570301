package dev.rackplan.kafka;

import static dev.rackplan.kafka.CoordinatorGroups.plain;
import static dev.rackplan.kafka.CoordinatorGroups.spec;
import static dev.rackplan.kafka.CoordinatorGroups.violation;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rackplan.kafka.CoordinatorGroups.Member;
import dev.rackplan.kafka.CoordinatorGroups.Topics;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.common.Uuid;
import org.junit.jupiter.api.Test;

/**
 * RackplanServerAssignor weighed by the agent's traffic (issue 27 §2): never more cross-rack bytes/s
 * than the count-only balance, optimal against brute force over balanced assignments on tiny groups,
 * sticky and valid; with no (fresh) traffic for the group's topics, the count-only assignment itself.
 */
class TrafficBalanceTest {
  static final String[] RACKS = RackStickyBalancerTest.RACKS;
  static final long NOW = System.currentTimeMillis();

  /** Zipf-like bytes/s: a few hot partitions, some idle. */
  static Map<Uuid, double[]> skewed(Random r, Topics topics) {
    Map<Uuid, double[]> out = new HashMap<>();
    for (Uuid id : topics.ids()) {
      double[] w = new double[topics.numPartitions(id)];
      for (int p = 0; p < w.length; p++)
        w[p] = r.nextInt(8) == 0 ? 0 : Math.floor(1e6 / Math.pow(1 + r.nextInt(50), 1.2) * (1 + r.nextDouble()));
      out.put(id, w);
    }
    return out;
  }

  static byte[] value(String topic, double[] rates, double windowS, long measuredAt) {
    StringBuilder b = new StringBuilder("{\"schema\": 1, \"topic\": \"" + topic + "\", \"bytes_per_s\": [");
    for (int i = 0; i < rates.length; i++) b.append(i == 0 ? "" : ", ").append(rates[i]);
    b.append("], \"window_s\": ").append(windowS).append(", \"measured_at_ms\": ").append(measuredAt).append('}');
    return b.toString().getBytes(StandardCharsets.UTF_8);
  }

  static TrafficStore store(Topics topics, Map<Uuid, double[]> rates) {
    TrafficStore s = new TrafficStore(0);
    for (Map.Entry<Uuid, double[]> e : rates.entrySet()) {
      String name = topics.names().get(e.getKey());
      assertEquals(TrafficStore.Outcome.APPLIED,
          s.apply("_rackplan.traffic", "traffic/" + name, value(name, e.getValue(), 300, NOW), null, null, NOW));
    }
    return s;
  }

  static RackplanServerAssignor weighed(Topics topics, Map<Uuid, double[]> rates) {
    return RackplanServerAssignor.forTest(new PlanStore(), topics.names(), store(topics, rates));
  }

  /** Cross-rack bytes/s of an assignment (members of no rack and partitions of unknown racks: none). */
  static double crossBytes(Map<String, Member> members, Topics topics, Map<Uuid, double[]> rates, Map<String, Map<Uuid, Set<Integer>>> a) {
    double sum = 0;
    for (Map.Entry<String, Map<Uuid, Set<Integer>>> e : a.entrySet()) {
      String rack = members.get(e.getKey()).rack();
      if (rack == null) continue;
      for (Map.Entry<Uuid, Set<Integer>> t : e.getValue().entrySet())
        for (int p : t.getValue()) {
          Set<String> r = topics.racksForPartition(t.getKey(), p);
          if (!r.isEmpty() && !r.contains(rack)) sum += rates.get(t.getKey())[p];
        }
    }
    return sum;
  }

  static double slack(Map<Uuid, double[]> rates) {
    double max = 0;
    int n = 0;
    for (double[] w : rates.values()) for (double x : w) {
      max = Math.max(max, x);
      n++;
    }
    return max * n / (1 << 18); // the weight quantum (a millionth of the heaviest), summed over every partition
  }

  /** Random groups, homogeneous and not: valid, balanced, sticky, and never more cross-rack bytes than counts alone. */
  @Test
  void neverMoreCrossRackBytesThanTheCountOnlyBalance() {
    double ours = 0, counts = 0;
    int fewer = 0;
    for (long seed = 0; seed < 400; seed++) {
      Random r = new Random(seed);
      boolean homogeneous = seed % 2 == 0;
      Topics topics = CoordinatorGroups.topics(r, 1 + r.nextInt(4), 1 + r.nextInt(30), RACKS, 1 + r.nextInt(2), true);
      Map<String, Member> members = RackStickyBalancerTest.members(r, topics, homogeneous, 1 + r.nextInt(10));
      Map<Uuid, double[]> rates = skewed(r, topics);
      String where = "seed " + seed + (homogeneous ? " homogeneous" : " heterogeneous");
      RackplanServerAssignor a = weighed(topics, rates);
      Map<String, Map<Uuid, Set<Integer>>> w = plain(a.assign(spec(members, Map.of()), topics));
      Map<String, Map<Uuid, Set<Integer>>> c = plain(RackStickyBalancerTest.rackplan(topics).assign(spec(members, Map.of()), topics));
      assertEquals(1, a.trafficCount.get(), where + ": weighed (" + a.lastTrafficReason + a.lastSafeReason + ")");
      assertNull(violation(members, topics, w), where);
      double bw = crossBytes(members, topics, rates, w), bc = crossBytes(members, topics, rates, c);
      assertTrue(bw <= bc + slack(rates), where + ": cross-rack bytes/s " + bw + " > the count-only balance's " + bc);
      if (bw < bc - slack(rates)) fewer++;
      ours += bw;
      counts += bc;
      // again from its own result: nothing moves
      assertEquals(w, plain(weighed(topics, rates).assign(spec(members, w), topics)), where + ": not stable");
    }
    System.out.printf("400 groups, skewed traffic: cross-rack bytes/s weighed %.0f, count-only %.0f; fewer in %d groups%n", ours, counts, fewer);
    assertTrue(fewer > 20, "traffic changed the answer in " + fewer + " groups only");
    assertTrue(ours < counts * 0.9, "weighed " + ours + " vs counts " + counts);
  }

  /** Tiny homogeneous groups: no floor/ceil assignment has fewer cross-rack bytes/s (brute force). */
  @Test
  void optimalAgainstBruteForceOnTinyGroups() {
    int checked = 0;
    for (long seed = 0; seed < 300; seed++) {
      Random r = new Random(seed);
      Topics topics = CoordinatorGroups.topics(r, 1 + r.nextInt(2), 4, RACKS, 2, false);
      Map<String, Member> members = RackStickyBalancerTest.members(r, topics, true, 1 + r.nextInt(3));
      Map<Uuid, double[]> rates = skewed(r, topics);
      List<String> ms = new ArrayList<>(members.keySet());
      List<Uuid> ids = topics.ids();
      List<int[]> parts = new ArrayList<>();
      for (int t = 0; t < ids.size(); t++) for (int p = 0; p < topics.numPartitions(ids.get(t)); p++) parts.add(new int[] {t, p});
      if (parts.size() > 8) continue;
      int total = parts.size(), n = ms.size();
      double best = Double.MAX_VALUE;
      int[] pick = new int[total];
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
        double cross = 0;
        for (int i = 0; i < total; i++) {
          String rack = members.get(ms.get(pick[i])).rack();
          Uuid t = ids.get(parts.get(i)[0]);
          Set<String> rs = topics.racksForPartition(t, parts.get(i)[1]);
          if (rack != null && !rs.isEmpty() && !rs.contains(rack)) cross += rates.get(t)[parts.get(i)[1]];
        }
        best = Math.min(best, cross);
      }
      Map<String, Map<Uuid, Set<Integer>>> ours = plain(weighed(topics, rates).assign(spec(members, Map.of()), topics));
      assertNull(violation(members, topics, ours), "seed " + seed);
      double got = crossBytes(members, topics, rates, ours);
      assertTrue(got <= best + slack(rates), "seed " + seed + ": " + got + " cross-rack bytes/s, the optimum is " + best);
      checked++;
    }
    assertTrue(checked > 100, "only " + checked + " groups small enough");
  }

  /** Rack a holds 3 partitions for 2 members of rack a and 1 of rack b: the lightest of them crosses. */
  @Test
  void theLightestPartitionCrosses() {
    Uuid id = new Uuid(1, 2);
    Topics topics = new Topics(Map.of(id, List.of(Set.of("az-a"), Set.of("az-a"), Set.of("az-a"))), Map.of(id, "orders"));
    Map<String, Member> members = new TreeMap<>(Map.of(
        "m1", new Member("az-a", Set.of(id)), "m2", new Member("az-a", Set.of(id)), "m3", new Member("az-b", Set.of(id))));
    for (int light = 0; light < 3; light++) {
      double[] w = {500, 500, 500};
      w[light] = 3;
      Map<String, Map<Uuid, Set<Integer>>> a = plain(weighed(topics, Map.of(id, w)).assign(spec(members, Map.of()), topics));
      assertEquals(Map.of(id, Set.of(light)), a.get("m3"), "partition " + light + " is the light one");
    }
  }

  /**
   * With no fresh traffic for the group's topics (none read, another topic's, stale, another partition
   * count), the assignment is the count-only one; and the count-only one is pinned (a digest of 300
   * groups computed before traffic existed).
   */
  @Test
  void withoutTrafficTheAssignmentIsTodays() throws Exception {
    MessageDigest digest = MessageDigest.getInstance("SHA-256");
    for (long seed = 0; seed < 300; seed++) {
      Random r = new Random(seed);
      boolean homogeneous = seed % 2 == 0;
      Topics topics = CoordinatorGroups.topics(r, 1 + r.nextInt(4), 1 + r.nextInt(30), RACKS, 1 + r.nextInt(2), true);
      Map<String, Member> members = RackStickyBalancerTest.members(r, topics, homogeneous, 1 + r.nextInt(10));
      Map<String, Map<Uuid, Set<Integer>>> half = new TreeMap<>();
      Map<String, Map<Uuid, Set<Integer>>> today = plain(RackStickyBalancerTest.rackplan(topics).assign(spec(members, half), topics));
      digest.update(today.toString().getBytes(StandardCharsets.UTF_8));
      String where = "seed " + seed;
      TrafficStore other = new TrafficStore(0);
      other.apply("_rackplan.traffic", "traffic/elsewhere", value("elsewhere", new double[] {9e9}, 300, NOW), null, null, NOW);
      TrafficStore stale = store(topics, skewed(r, topics));
      TrafficStore staleCopy = new TrafficStore(0);
      TrafficStore resized = new TrafficStore(0);
      for (Uuid t : topics.ids()) {
        String name = topics.names().get(t);
        double[] w = new double[topics.numPartitions(t)];
        java.util.Arrays.fill(w, 1000);
        staleCopy.apply("_rackplan.traffic", "traffic/" + name, value(name, w, 300, NOW), null, null, NOW - 901_000);
        resized.apply("_rackplan.traffic", "traffic/" + name, value(name, new double[w.length + 1], 300, NOW), null, null, NOW);
      }
      assertTrue(stale.size() > 0);
      for (TrafficStore s : List.of(new TrafficStore(0), other, staleCopy, resized)) {
        RackplanServerAssignor a = RackplanServerAssignor.forTest(new PlanStore(), topics.names(), s);
        assertEquals(today, plain(a.assign(spec(members, half), topics)), where);
        assertEquals(0, a.trafficCount.get(), where);
      }
    }
    StringBuilder hex = new StringBuilder();
    for (byte b : digest.digest()) hex.append(String.format("%02x", b & 0xff));
    assertEquals(PINNED, hex.toString(), "the count-only assignment changed");
  }

  /**
   * sha256 of the 300 count-only assignments above. First computed on the code before traffic (commit
   * 555cff1); re-pinned when the flow moved onto hubs (session 34): the optimum is the same (the
   * brute-force and Kafka-oracle tests of RackStickyBalancerTest), the tie among equal optima is
   * broken by another path order; and again when the count repair moved counts through heaps (ties
   * among equally loaded members broken by subscriber order, not by partition order).
   */
  static final String PINNED = "688749c30ddc647b5d3cb61648b04be0ef3fbf504d00968b15f67dc663b0c1f4";
}
