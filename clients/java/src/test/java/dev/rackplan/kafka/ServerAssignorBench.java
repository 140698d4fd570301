package dev.rackplan.kafka;

import dev.rackplan.kafka.CoordinatorGroups.Member;
import dev.rackplan.kafka.CoordinatorGroups.Topics;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.ConsumerGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.assignor.RangeAssignor;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;

/**
 * CPU ms per {@code assign} on the coordinator's own types (GroupSpecImpl), rackplan next to Kafka's
 * {@code uniform} and {@code range} in one JVM: warmed up, then the median of timed runs. Two calls per
 * group: a fresh assignment (no member holds anything) and a sticky one (a member joined a group that
 * holds the fresh assignment). Driven by bench/bench_server_assignor.py; one JSON line per case.
 *
 * <p>Groups: 100 topics, replicas in 2 of 3 racks (random), members spread over the 3 racks;
 * homogeneous (all topics) or heterogeneous (5 subscriptions, each 2 fifths of the topics, overlapping).
 */
public final class ServerAssignorBench {
  private ServerAssignorBench() {}

  static final String[] RACKS = {"az-a", "az-b", "az-c"};

  public static void main(String[] args) {
    if (args.length > 0 && args[0].equals("traffic")) {
      traffic(java.util.Arrays.copyOfRange(args, 1, args.length));
      return;
    }
    int warmup = Integer.parseInt(args.length > 0 ? args[0] : "3");
    int runs = Integer.parseInt(args.length > 1 ? args[1] : "7");
    int[][] shapes = {{100, 10_000}, {100, 50_000}, {1_000, 10_000}, {1_000, 50_000}, {5_000, 10_000}, {5_000, 50_000}};
    if (args.length > 2) shapes = new int[][] {{Integer.parseInt(args[2]), Integer.parseInt(args[3])}};
    for (int[] shape : shapes)
      for (boolean homogeneous : new boolean[] {true, false}) run(shape[0], shape[1], homogeneous, warmup, runs);
  }

  static void run(int memberCount, int partitions, boolean homogeneous, int warmup, int runs) {
    Random r = new Random(memberCount * 31L + partitions + (homogeneous ? 0 : 7));
    int topicCount = 100;
    Map<Uuid, List<Set<String>>> racks = new HashMap<>();
    Map<Uuid, String> names = new HashMap<>();
    List<Uuid> ids = new ArrayList<>();
    for (int t = 0; t < topicCount; t++) {
      Uuid id = new Uuid(r.nextLong(), r.nextLong());
      ids.add(id);
      names.put(id, "topic-" + t);
      List<Set<String>> rows = new ArrayList<>();
      for (int p = 0; p < partitions / topicCount; p++) {
        int a = r.nextInt(3);
        rows.add(Set.of(RACKS[a], RACKS[(a + 1 + r.nextInt(2)) % 3]));
      }
      racks.put(id, rows);
    }
    Topics topics = new Topics(racks, names);
    Map<String, Member> members = new TreeMap<>();
    for (int i = 0; i <= memberCount; i++) {
      Set<Uuid> subs = new HashSet<>(ids);
      if (!homogeneous) {
        subs = new HashSet<>();
        for (int t = 0; t < topicCount; t++) if (t % 5 == i % 5 || t % 5 == (i + 1) % 5) subs.add(ids.get(t));
      }
      members.put(String.format("member-%05d", i), new Member(RACKS[i % 3], subs));
    }
    Map<String, Member> before = new TreeMap<>(members);
    before.remove(String.format("member-%05d", memberCount)); // the one that joins
    Map<String, ConsumerGroupPartitionAssignor> assignors = new java.util.LinkedHashMap<>();
    assignors.put("uniform", new UniformAssignor());
    assignors.put("range", new RangeAssignor());
    assignors.put("rackplan", RackplanServerAssignor.forTest(new PlanStore(), names));
    for (Map.Entry<String, ConsumerGroupPartitionAssignor> e : assignors.entrySet()) {
      ConsumerGroupPartitionAssignor a = e.getValue();
      GroupSpec fresh = CoordinatorGroups.spec(before, Map.of());
      Map<String, Map<Uuid, Set<Integer>>> settled = CoordinatorGroups.plain(a.assign(fresh, topics));
      GroupSpec joined = CoordinatorGroups.spec(members, settled);
      double[] freshMs = time(a, fresh, topics, warmup, runs);
      double[] joinMs = time(a, joined, topics, warmup, runs);
      Map<String, Map<Uuid, Set<Integer>>> after = CoordinatorGroups.plain(a.assign(joined, topics));
      String bad = CoordinatorGroups.violation(members, topics, after);
      System.out.printf(
          "{\"assignor\":\"%s\",\"members\":%d,\"partitions\":%d,\"subscriptions\":\"%s\",\"fresh_ms\":%.2f,\"join_ms\":%.2f,"
              + "\"cross_rack\":%d,\"moves_on_join\":%d,\"balanced\":%s}%n",
          e.getKey(), memberCount, partitions, homogeneous ? "homogeneous" : "heterogeneous", median(freshMs), median(joinMs),
          CoordinatorGroups.crossRack(members, topics, after), CoordinatorGroups.moves(settled, after),
          bad == null ? "true" : "\"" + bad.replace("\"", "'") + "\"");
      if (a instanceof RackplanServerAssignor rp && rp.safeFallbackCount.get() > 0)
        System.err.println("rackplan fell back: " + rp.lastSafeReason);
    }
  }

  /**
   * The skewed-traffic case (issue 27 §2): replicas in one rack each, racks holding 50 / 30 / 20% of the
   * partitions while members are spread evenly (some partitions must cross), Zipf-like bytes/s (rank^-1.1
   * over a random order of all partitions). rackplan without traffic, rackplan with the traffic in its
   * {@link TrafficStore}, and Kafka's {@code uniform}: CPU ms per assign (fresh / join), cross-rack
   * partitions and bytes/s after the join, moves on join.
   */
  static void traffic(String[] args) {
    int warmup = Integer.parseInt(args.length > 0 ? args[0] : "3");
    int runs = Integer.parseInt(args.length > 1 ? args[1] : "7");
    int[][] shapes = {{100, 10_000}, {1_000, 10_000}, {1_000, 50_000}, {5_000, 50_000}};
    if (args.length > 2) shapes = new int[][] {{Integer.parseInt(args[2]), Integer.parseInt(args[3])}};
    for (int[] shape : shapes)
      for (boolean homogeneous : new boolean[] {true, false}) runTraffic(shape[0], shape[1], homogeneous, warmup, runs);
  }

  static void runTraffic(int memberCount, int partitions, boolean homogeneous, int warmup, int runs) {
    Random r = new Random(memberCount * 17L + partitions + (homogeneous ? 0 : 3));
    int topicCount = 100;
    Map<Uuid, List<Set<String>>> racks = new HashMap<>();
    Map<Uuid, String> names = new HashMap<>();
    List<Uuid> ids = new ArrayList<>();
    Integer[] order = new Integer[partitions / topicCount * topicCount];
    for (int i = 0; i < order.length; i++) order[i] = i;
    java.util.Collections.shuffle(java.util.Arrays.asList(order), r);
    Map<Uuid, double[]> rates = new HashMap<>();
    long now = System.currentTimeMillis();
    TrafficStore store = new TrafficStore(0);
    for (int t = 0; t < topicCount; t++) {
      Uuid id = new Uuid(r.nextLong(), r.nextLong());
      ids.add(id);
      names.put(id, "topic-" + t);
      List<Set<String>> rows = new ArrayList<>();
      double[] w = new double[partitions / topicCount];
      for (int p = 0; p < w.length; p++) {
        double x = r.nextDouble();
        rows.add(Set.of(RACKS[x < 0.5 ? 0 : x < 0.8 ? 1 : 2]));
        w[p] = 1e7 / Math.pow(1 + order[t * w.length + p], 1.1);
      }
      racks.put(id, rows);
      rates.put(id, w);
      store.apply("_rackplan.traffic", "traffic/topic-" + t, TrafficBalanceTest.value("topic-" + t, w, 300, now), null, null, now);
    }
    Topics topics = new Topics(racks, names);
    Map<String, Member> members = new TreeMap<>();
    for (int i = 0; i <= memberCount; i++) {
      Set<Uuid> subs = new HashSet<>(ids);
      if (!homogeneous) {
        subs = new HashSet<>();
        for (int t = 0; t < topicCount; t++) if (t % 5 == i % 5 || t % 5 == (i + 1) % 5) subs.add(ids.get(t));
      }
      members.put(String.format("member-%05d", i), new Member(RACKS[i % 3], subs));
    }
    Map<String, Member> before = new TreeMap<>(members);
    before.remove(String.format("member-%05d", memberCount));
    Map<String, ConsumerGroupPartitionAssignor> assignors = new java.util.LinkedHashMap<>();
    assignors.put("uniform", new UniformAssignor());
    assignors.put("rackplan", RackplanServerAssignor.forTest(new PlanStore(), names));
    assignors.put("rackplan+traffic", RackplanServerAssignor.forTest(new PlanStore(), names, store));
    for (Map.Entry<String, ConsumerGroupPartitionAssignor> e : assignors.entrySet()) {
      ConsumerGroupPartitionAssignor a = e.getValue();
      GroupSpec fresh = CoordinatorGroups.spec(before, Map.of());
      Map<String, Map<Uuid, Set<Integer>>> settled = CoordinatorGroups.plain(a.assign(fresh, topics));
      GroupSpec joined = CoordinatorGroups.spec(members, settled);
      double[] freshMs = time(a, fresh, topics, warmup, runs);
      double[] joinMs = time(a, joined, topics, warmup, runs);
      Map<String, Map<Uuid, Set<Integer>>> after = CoordinatorGroups.plain(a.assign(joined, topics));
      String bad = CoordinatorGroups.violation(members, topics, after);
      double total = 0;
      for (double[] w : rates.values()) for (double x : w) total += x;
      System.out.printf(
          "{\"assignor\":\"%s\",\"members\":%d,\"partitions\":%d,\"subscriptions\":\"%s\",\"fresh_ms\":%.2f,\"join_ms\":%.2f,"
              + "\"cross_rack\":%d,\"cross_rack_bytes_per_s\":%.0f,\"bytes_per_s\":%.0f,\"moves_on_join\":%d,\"balanced\":%s}%n",
          e.getKey(), memberCount, order.length, homogeneous ? "homogeneous" : "heterogeneous", median(freshMs), median(joinMs),
          CoordinatorGroups.crossRack(members, topics, after), TrafficBalanceTest.crossBytes(members, topics, rates, after), total,
          CoordinatorGroups.moves(settled, after), bad == null ? "true" : "\"" + bad.replace("\"", "'") + "\"");
      if (a instanceof RackplanServerAssignor rp && (rp.safeFallbackCount.get() > 0 || rp.trafficFailedCount.get() > 0))
        System.err.println("rackplan fell back: " + rp.lastSafeReason + rp.lastTrafficReason);
    }
  }

  /**
   * The calling thread's CPU time per {@code assign} (ThreadMXBean), not wall time: the machine is shared
   * (other JVMs take the cores), and what the coordinator's thread spends is the CPU the call needs.
   */
  static double[] time(ConsumerGroupPartitionAssignor a, GroupSpec spec, Topics topics, int warmup, int runs) {
    java.lang.management.ThreadMXBean cpu = java.lang.management.ManagementFactory.getThreadMXBean();
    for (int i = 0; i < warmup; i++) a.assign(spec, topics);
    double[] ms = new double[runs];
    for (int i = 0; i < runs; i++) {
      long t0 = cpu.getCurrentThreadCpuTime();
      a.assign(spec, topics);
      ms[i] = (cpu.getCurrentThreadCpuTime() - t0) / 1e6;
    }
    return ms;
  }

  public static double median(double[] xs) {
    double[] s = xs.clone();
    Arrays.sort(s);
    return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  }

}
