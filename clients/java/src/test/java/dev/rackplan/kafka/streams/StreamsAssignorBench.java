package dev.rackplan.kafka.streams;

import static dev.rackplan.kafka.ServerAssignorBench.median;

import dev.rackplan.kafka.TrafficStore;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.streams.assignor.TaskAssignor;
import org.apache.kafka.coordinator.group.api.streams.assignor.TopologyDescriber;
import org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor;

/**
 * KIP-1071 Streams assignors on the coordinator's own types, skewed traffic: Kafka 4.4's {@code
 * sticky}, rackplan's plugin by counts, and rackplan's plugin weighing the agent's traffic (a filled
 * {@code TrafficStore}), in one JVM. CPU ms per {@code assign} (the thread's CPU time, warmed up, the
 * median of timed runs), for a fresh group and for one a member joined (the group holding the
 * assignor's own fresh answer); after the join, the actives' cross-rack partitions and bytes/s.
 * Driven by bench/bench_streams_server_assignor.py; one JSON line per case.
 *
 * <p>Apps: {@code subs} sub-topologies of {@code tasks / subs} partitions, half of them stateful
 * (a changelog each); every partition's one replica in one rack, the racks holding 50 / 30 / 20% of
 * them; Zipf-like bytes/s over each topic's partitions; members spread over the three racks, one
 * standby. With {@code tags} first: every member also has the client tag {@code zone} (one of three,
 * independent of its rack) and the group {@code rack.aware.assignment.tags=zone}; with {@code host}
 * next, also the tag {@code host}, one value a member ({@code rack.aware.assignment.tags=zone,host}).
 * With {@code norack} next: no member has a rack (the partitions' racks stay).
 */
public final class StreamsAssignorBench {
  private StreamsAssignorBench() {}

  static final List<String> RACKS = List.of("az-a", "az-b", "az-c");

  /** Members carry the client tag zone and the group names it (main's first argument {@code tags}). */
  static List<String> tagKeys = List.of();

  /** Members have no rack (argument {@code norack}, after {@code tags} and {@code host} if given). */
  static boolean noRack = false;

  public static void main(String[] args) {
    if (args.length > 0 && args[0].equals("tags")) {
      tagKeys = List.of("zone");
      args = java.util.Arrays.copyOfRange(args, 1, args.length);
    }
    if (args.length > 0 && args[0].equals("host")) {
      tagKeys = List.of("zone", "host");
      args = java.util.Arrays.copyOfRange(args, 1, args.length);
    }
    if (args.length > 0 && args[0].equals("norack")) {
      noRack = true;
      args = java.util.Arrays.copyOfRange(args, 1, args.length);
    }
    int warmup = Integer.parseInt(args.length > 0 ? args[0] : "5");
    int runs = Integer.parseInt(args.length > 1 ? args[1] : "9");
    int[][] shapes = {{100, 10}, {1_000, 50}, {2_000, 200}};
    if (args.length > 2) shapes = new int[][] {{Integer.parseInt(args[2]), Integer.parseInt(args[3])}};
    for (int[] shape : shapes) run(shape[0], shape[1], warmup, runs);
  }

  static String rack(Random r) {
    double x = r.nextDouble();
    return x < 0.5 ? "az-a" : x < 0.8 ? "az-b" : "az-c";
  }

  static void run(int taskCount, int memberCount, int warmup, int runs) {
    Random r = new Random(taskCount * 31L + memberCount);
    int subs = 10;
    int per = taskCount / subs;
    Map<String, Integer> partitions = new TreeMap<>();
    Set<String> stateful = new TreeSet<>();
    Map<String, GroupTopology.Subtopology> st = new TreeMap<>();
    Map<String, List<Set<String>>> topicRacks = new TreeMap<>();
    Map<String, double[]> bytes = new TreeMap<>();
    for (int s = 0; s < subs; s++) {
      String id = Integer.toString(s);
      partitions.put(id, per);
      boolean sf = s % 2 == 0;
      if (sf) stateful.add(id);
      List<String> topics = new ArrayList<>(List.of("s" + id));
      if (sf) topics.add("s" + id + "-changelog");
      st.put(id, new GroupTopology.Subtopology(List.of("s" + id), sf ? List.of("s" + id + "-changelog") : List.of()));
      for (String t : topics) {
        List<Set<String>> rows = new ArrayList<>();
        double[] w = new double[per];
        for (int p = 0; p < per; p++) {
          rows.add(Set.of(rack(r)));
          w[p] = 1_000_000.0 / (1 + r.nextInt(per)); // Zipf-like: a few hot partitions, a long light tail
        }
        topicRacks.put(t, rows);
        bytes.put(t, w);
      }
    }
    Map<String, Groups.M> members = new TreeMap<>();
    Set<String> processes = new TreeSet<>();
    for (int i = 0; i <= memberCount; i++) {
      Groups.M m = Groups.M.of(String.format("p%05d", i), noRack ? null : RACKS.get(i % 3));
      Map<String, String> tags = tagKeys.size() > 1 ? Map.of("zone", "zone-" + (i / 3) % 3, "host", "h" + i)
          : Map.of("zone", "zone-" + (i / 3) % 3);
      members.put(String.format("m%05d", i), tagKeys.isEmpty() ? m : m.withTags(tags));
      processes.add(String.format("p%05d", i));
    }
    String joiner = String.format("m%05d", memberCount);
    Map<String, Groups.M> before = new TreeMap<>(members);
    before.remove(joiner);
    TopologyDescriber describer = Groups.describer(partitions, stateful);
    GroupTopology topology = new GroupTopology("app", members.keySet(), processes, st, topicRacks);
    StreamsCatalog catalog = new StreamsCatalog();
    catalog.replace(List.of(topology));
    TrafficStore store = new TrafficStore(0);
    long now = System.currentTimeMillis();
    for (Map.Entry<String, double[]> e : bytes.entrySet())
      store.apply("_rackplan.traffic", "traffic/" + e.getKey(), record(e.getKey(), e.getValue(), now), null, null, now);
    Map<String, TaskAssignor> assignors = new LinkedHashMap<>();
    assignors.put("sticky", new StickyTaskAssignor());
    assignors.put("rackplan", plugin(catalog, null));
    assignors.put("rackplan+traffic", plugin(catalog, store));
    for (Map.Entry<String, TaskAssignor> e : assignors.entrySet()) {
      TaskAssignor a = e.getValue();
      GroupSpec fresh = Groups.spec(before, 1, tagKeys);
      double[] freshMs = time(a, fresh, describer, warmup, runs);
      GroupAssignment first = a.assign(fresh, describer);
      Map<String, Groups.M> held = new TreeMap<>();
      for (Map.Entry<String, Groups.M> m : members.entrySet()) {
        var got = first.members().get(m.getKey());
        held.put(m.getKey(), got == null ? m.getValue() : m.getValue().withActive(got.activeTasks()).withStandby(got.standbyTasks()));
      }
      GroupSpec join = Groups.spec(held, 1, tagKeys);
      double[] joinMs = time(a, join, describer, warmup, runs);
      GroupAssignment after = a.assign(join, describer);
      long cross = 0;
      double crossBytes = 0;
      double all = 0;
      int moved = 0;
      for (Map.Entry<String, ? extends org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignment> m : after.members().entrySet()) {
        String rack = members.get(m.getKey()).rack();
        for (Map.Entry<String, Set<Integer>> t : m.getValue().activeTasks().entrySet())
          for (int p : t.getValue()) {
            GroupTopology.Subtopology s = st.get(t.getKey());
            List<String> topics = new ArrayList<>(s.sources());
            topics.addAll(s.changelogs());
            for (String topic : topics) {
              double w = bytes.get(topic)[p];
              all += w;
              if (rack == null || !topicRacks.get(topic).get(p).contains(rack)) {
                cross++;
                crossBytes += w;
              }
            }
            Set<Integer> had = held.get(m.getKey()).active().getOrDefault(t.getKey(), Set.of());
            if (!had.contains(p)) moved++;
          }
      }
      System.out.printf(java.util.Locale.ROOT,
          "{\"assignor\": \"%s\", \"tasks\": %d, \"members\": %d, \"fresh_ms\": %.3f, \"join_ms\": %.3f, "
              + "\"cross_rack\": %d, \"cross_rack_bytes_per_s\": %.1f, \"bytes_per_s\": %.1f, \"moves_on_join\": %d}%n",
          e.getKey(), taskCount, memberCount, median(freshMs), median(joinMs), cross, crossBytes, all, moved);
    }
  }

  static RackplanStreamsTaskAssignor plugin(StreamsCatalog catalog, TrafficStore traffic) {
    RackplanStreamsTaskAssignor a = new RackplanStreamsTaskAssignor(catalog, new StickyTaskAssignor());
    a.configure(Map.of("rackplan.bootstrap.servers", "127.0.0.1:1", "rackplan.streams.refresh.ms", "3600000"));
    a.traffic = traffic;
    return a;
  }

  static byte[] record(String topic, double[] rates, long at) {
    StringBuilder b = new StringBuilder("{\"schema\": 1, \"topic\": \"" + topic + "\", \"bytes_per_s\": [");
    for (int i = 0; i < rates.length; i++) b.append(i == 0 ? "" : ", ").append(rates[i]);
    b.append("], \"window_s\": 300.0, \"measured_at_ms\": ").append(at).append('}');
    return b.toString().getBytes(StandardCharsets.UTF_8);
  }

  /** The calling thread's CPU time per {@code assign}, not wall time (the machine is shared). */
  static double[] time(TaskAssignor a, GroupSpec spec, TopologyDescriber d, int warmup, int runs) {
    java.lang.management.ThreadMXBean cpu = java.lang.management.ManagementFactory.getThreadMXBean();
    for (int i = 0; i < warmup; i++) a.assign(spec, d);
    double[] ms = new double[runs];
    for (int i = 0; i < runs; i++) {
      long t0 = cpu.getCurrentThreadCpuTime();
      a.assign(spec, d);
      ms[i] = (cpu.getCurrentThreadCpuTime() - t0) / 1e6;
    }
    return ms;
  }
}
