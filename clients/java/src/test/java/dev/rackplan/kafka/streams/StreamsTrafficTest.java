package dev.rackplan.kafka.streams;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rackplan.kafka.TrafficStore;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor;
import org.junit.jupiter.api.Test;

/**
 * The Streams assignment weighed by the agent's traffic: among the assignments within Kafka's quotas,
 * the fewest bytes/s read across racks by the actives. The oracle is brute force over every
 * assignment within the same quotas, in exact doubles.
 */
class StreamsTrafficTest {
  static final List<String> RACKS = List.of("az-a", "az-b", "az-c");

  record Small(GroupView view, GroupTopology topology, Map<String, double[]> bytes, Map<String, String> rackOf) {}

  /** 2-3 members, 1-2 sub-topologies of 1-3 partitions (at most 6 tasks), bytes/s up to 1,024 (some topics unknown). */
  static Small small(Random rnd) {
    int nm = 2 + rnd.nextInt(2);
    Map<String, Groups.M> members = new TreeMap<>();
    Map<String, String> rackOf = new TreeMap<>();
    Set<String> processes = new TreeSet<>();
    for (int i = 0; i < nm; i++) {
      String rack = RACKS.get(rnd.nextInt(RACKS.size()));
      members.put("m" + i, Groups.M.of("p" + i, rack));
      rackOf.put("m" + i, rack);
      processes.add("p" + i);
    }
    int subs = 1 + rnd.nextInt(2);
    Map<String, Integer> partitions = new TreeMap<>();
    Set<String> stateful = new TreeSet<>();
    Map<String, GroupTopology.Subtopology> st = new TreeMap<>();
    Map<String, List<Set<String>>> topicRacks = new TreeMap<>();
    Map<String, double[]> bytes = new TreeMap<>();
    for (int s = 0; s < subs; s++) {
      String id = Integer.toString(s);
      int n = 1 + rnd.nextInt(3);
      partitions.put(id, n);
      boolean sf = rnd.nextBoolean();
      if (sf) stateful.add(id);
      List<String> changelogs = sf ? List.of("s" + id + "-changelog") : List.of();
      st.put(id, new GroupTopology.Subtopology(List.of("s" + id), changelogs));
      List<String> topics = new ArrayList<>(List.of("s" + id));
      topics.addAll(changelogs);
      for (String t : topics) {
        topicRacks.put(t, Groups.randomRacks(rnd, RACKS, n));
        if (rnd.nextInt(4) == 0) continue; // no figures: weighs the mean of the known ones
        double[] w = new double[n];
        for (int p = 0; p < n; p++) w[p] = rnd.nextInt(1025);
        bytes.put(t, w);
      }
    }
    GroupTopology topology = new GroupTopology("g", members.keySet(), processes, st, topicRacks);
    GroupSpec spec = Groups.spec(members, 0, List.of());
    GroupView view = GroupView.of(spec, Groups.describer(partitions, stateful), 10_000L);
    return new Small(view, topology, bytes, rackOf);
  }

  /** Exact bytes/s the actives read across racks (the contract's rule: an unknown topic weighs the known mean). */
  static double crossBytes(Small c, Map<String, Set<Task>> active) {
    double sum = 0;
    long n = 0;
    for (double[] w : c.bytes().values()) for (double x : w) {
      sum += x;
      n++;
    }
    double mean = n == 0 ? 0 : sum / n;
    double total = 0;
    for (Map.Entry<String, Set<Task>> e : active.entrySet()) {
      String rack = c.rackOf().get(e.getKey());
      for (Task t : e.getValue()) {
        GroupTopology.Subtopology s = c.topology().subtopologies().get(t.subtopology());
        List<String> topics = new ArrayList<>(s.sources());
        topics.addAll(s.changelogs());
        for (String topic : topics) {
          Set<String> racks = c.topology().topicRacks().get(topic).get(t.partition());
          if (racks.isEmpty() || racks.contains(rack)) continue;
          double[] w = c.bytes().get(topic);
          total += w == null ? mean : w[t.partition()];
        }
      }
    }
    return total;
  }

  /**
   * The least {@link #crossBytes} over every assignment within the flow's quotas: those {@code
   * violation} checks, and at most ceil(L/M) of the L stateless actives per member (the flow caps
   * both kinds alike).
   */
  static double leastCrossBytes(Small c, RackAwareTaskAssignment.Strategy strategy) {
    List<Task> tasks = c.view().tasks;
    List<String> ids = new ArrayList<>(c.rackOf().keySet());
    int[] at = new int[tasks.size()];
    double best = Double.POSITIVE_INFINITY;
    while (true) {
      Map<String, Set<Task>> active = new TreeMap<>();
      for (String m : ids) active.put(m, new TreeSet<>());
      for (int t = 0; t < tasks.size(); t++) active.get(ids.get(at[t])).add(tasks.get(t));
      RackAwareTaskAssignment.Result r = new RackAwareTaskAssignment.Result(active, Map.of());
      int stateless = tasks.size() - c.view().stateful.size();
      boolean within = RackAwareTaskAssignment.violation(c.view(), r, strategy) == null;
      for (Set<Task> mine : active.values())
        within &= mine.stream().filter(t -> !c.view().stateful.contains(t)).count() <= (stateless + ids.size() - 1) / ids.size();
      if (within) best = Math.min(best, crossBytes(c, active));
      int i = 0;
      while (i < at.length && ++at[i] == ids.size()) at[i++] = 0;
      if (i == at.length) return best;
    }
  }

  @Test
  void theActivesReadTheFewestBytesAcrossRacksOfAnyAssignmentWithinTheQuotas() {
    Random rnd = new Random(20261129L);
    int weighedFewer = 0;
    for (int i = 0; i < 300; i++) {
      Small c = small(rnd);
      RackAwareTaskAssignment.Strategy s =
          i % 2 == 0 ? RackAwareTaskAssignment.Strategy.MIN_TRAFFIC : RackAwareTaskAssignment.Strategy.BALANCE_SUBTOPOLOGY;
      TrafficRacks weighed = TrafficRacks.of(c.topology(), (t, n) -> c.bytes().get(t));
      if (weighed == null) continue;
      RackAwareTaskAssignment.Result ours = RackAwareTaskAssignment.assign(c.view(), weighed, s);
      assertNull(RackAwareTaskAssignment.violation(c.view(), ours, s), "case " + i);
      double least = leastCrossBytes(c, s);
      assertEquals(least, crossBytes(c, ours.active()), 0.01, "case " + i);
      RackAwareTaskAssignment.Result counted = RackAwareTaskAssignment.assign(c.view(), c.topology(), s);
      if (crossBytes(c, counted.active()) > least + 0.01) weighedFewer++;
    }
    // the count-only assignment is not the bytes' optimum in general: the weighing is what finds it
    assertTrue(weighedFewer > 10, "cases where weighing read fewer bytes: " + weighedFewer);
  }

  @Test
  void withoutFiguresTheAssignmentIsTheCountOnlyOne() {
    Random rnd = new Random(7L);
    for (int i = 0; i < 100; i++) {
      Small c = small(rnd);
      assertNull(TrafficRacks.of(c.topology(), (t, n) -> null));
      Map<String, double[]> zero = new TreeMap<>();
      for (Map.Entry<String, List<Set<String>>> e : c.topology().topicRacks().entrySet())
        zero.put(e.getKey(), new double[e.getValue().size()]);
      TrafficRacks idle = new TrafficRacks(c.topology(), zero, 0);
      for (RackAwareTaskAssignment.Strategy s : RackAwareTaskAssignment.Strategy.values())
        assertEquals(RackAwareTaskAssignment.assign(c.view(), c.topology(), s),
            RackAwareTaskAssignment.assign(c.view(), idle, s), "case " + i);
    }
  }

  static byte[] record(String topic, double[] rates, long at) {
    StringBuilder b = new StringBuilder("{\"schema\": 1, \"topic\": \"" + topic + "\", \"bytes_per_s\": [");
    for (int i = 0; i < rates.length; i++) b.append(i == 0 ? "" : ", ").append(rates[i]);
    b.append("], \"window_s\": 300.0, \"measured_at_ms\": ").append(at).append('}');
    return b.toString().getBytes(StandardCharsets.UTF_8);
  }

  /**
   * The plugin with the agent's feed: two members (az-a, az-b), one stateless sub-topology of two
   * partitions, both only in az-a; one task must be read across racks, and it is the light one.
   */
  @Test
  void thePluginReadsTheHeavyPartitionInItsRackAndCountsTheWeighedAssignment() {
    GroupTopology topology = new GroupTopology("app", Set.of("ma", "mb"), Set.of("pa", "pb"),
        Map.of("0", new GroupTopology.Subtopology(List.of("in"), List.of())),
        Map.of("in", List.of(Set.of("az-a"), Set.of("az-a"))));
    Map<String, Groups.M> members = new TreeMap<>();
    members.put("ma", Groups.M.of("pa", "az-a"));
    members.put("mb", Groups.M.of("pb", "az-b"));
    GroupSpec spec = Groups.spec(members, 0, List.of());
    StreamsCatalog catalog = new StreamsCatalog();
    catalog.replace(List.of(topology));
    for (double[] rates : List.of(new double[] {1.0, 5000.0}, new double[] {5000.0, 1.0})) {
      try (RackplanStreamsTaskAssignor a = new RackplanStreamsTaskAssignor(catalog, new StickyTaskAssignor())) {
        a.configure(Map.of("rackplan.bootstrap.servers", "127.0.0.1:1", "rackplan.streams.refresh.ms", "3600000"));
        TrafficStore store = new TrafficStore(0);
        long now = System.currentTimeMillis();
        store.apply("_rackplan.traffic", "traffic/in", record("in", rates, now), null, null, now);
        a.traffic = store;
        GroupAssignment r = a.assign(spec, Groups.describer(Map.of("0", 2), Set.of()));
        int heavy = rates[0] > rates[1] ? 0 : 1;
        assertEquals(Set.of(heavy), r.members().get("ma").activeTasks().get("0"), "the heavy partition stays in az-a");
        assertEquals(1, a.trafficCount.get());
        assertEquals(1, a.rackAware.get());
      }
    }
  }
}
