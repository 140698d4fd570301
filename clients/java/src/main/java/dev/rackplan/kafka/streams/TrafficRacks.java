package dev.rackplan.kafka.streams;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.BiFunction;

/**
 * A Streams group's racks with the agent's measured bytes/s: an active reading a partition across
 * racks weighs that partition's bytes/s ({@link RackAwareTaskAssignment} then reads the fewest
 * bytes/s across racks first). A partition of a topic without figures weighs the mean of the group's
 * known ones (the contract's rule for missing traffic); standbys are not weighed (they read only
 * changelogs, counted as before).
 */
record TrafficRacks(GroupTopology topology, Map<String, double[]> bytes, double unknown) implements TaskRacks {

  /**
   * The group's topics' figures from {@code traffic} (a topic and its partition count to its bytes/s,
   * null when it has none fresh); null when none of its topics has any: the group is then assigned
   * by counts alone, exactly as without traffic.
   */
  static TrafficRacks of(GroupTopology topology, BiFunction<String, Integer, double[]> traffic) {
    Map<String, double[]> known = new TreeMap<>();
    double sum = 0;
    long n = 0;
    for (Map.Entry<String, List<Set<String>>> e : topology.topicRacks().entrySet()) {
      double[] w = traffic.apply(e.getKey(), e.getValue().size());
      if (w == null || w.length != e.getValue().size()) continue;
      known.put(e.getKey(), w);
      for (double x : w) {
        sum += x;
        n++;
      }
    }
    return known.isEmpty() ? null : new TrafficRacks(topology, known, n == 0 ? 0 : sum / n);
  }

  @Override
  public int activeCross(Task task, String rack) {
    return topology.activeCross(task, rack);
  }

  @Override
  public int standbyCross(Task task, String rack) {
    return topology.standbyCross(task, rack);
  }

  @Override
  public double[] activeCrossBytes(Task task, String rack) {
    GroupTopology.Subtopology s = topology.subtopologies().get(task.subtopology());
    if (s == null || rack == null) return NO_BYTES;
    List<Double> out = new ArrayList<>();
    for (List<String> topics : List.of(s.sources(), s.changelogs()))
      for (String t : topics) {
        List<Set<String>> parts = topology.topicRacks().get(t);
        int p = task.partition();
        if (parts == null || p >= parts.size()) continue;
        Set<String> racks = parts.get(p);
        if (racks.isEmpty() || racks.contains(rack)) continue;
        double[] w = bytes.get(t);
        out.add(w == null ? unknown : w[p]);
      }
    double[] a = new double[out.size()];
    for (int i = 0; i < a.length; i++) a[i] = out.get(i);
    return a;
  }
}
