package dev.rackplan.kafka;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Function;
import java.util.function.Predicate;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberSubscription;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;

/**
 * The coordinator's view ({@link GroupSpec}, {@link SubscribedTopicDescriber}) turned into {@link
 * RackStickyBalancer}'s indexes and back: members in id order, topics in id order, racks in name order,
 * so the same group gives the same assignment on every broker.
 */
final class ServerBalance {
  private ServerBalance() {}

  /**
   * member id -> topic id -> partitions, every member present.
   *
   * @param topicAllowed which subscribed topic ids may be assigned (names known, not a plan topic)
   * @throws IllegalStateException when the balancer cannot or will not assign (the reason says why)
   */
  static Map<String, Map<Uuid, Set<Integer>>> assign(GroupSpec spec, SubscribedTopicDescriber describer, Predicate<Uuid> topicAllowed) {
    return assign(spec, describer, topicAllowed, null);
  }

  /**
   * As {@link #assign(GroupSpec, SubscribedTopicDescriber, Predicate)}, weighed by traffic when {@code
   * traffic} knows some of the group's topics: a topic's bytes/s per partition (its partition count
   * long), or null when unknown. A partition of unknown traffic weighs the mean of the group's known
   * partitions (the contract's rule); with none known the assignment is the count-only one.
   */
  static Map<String, Map<Uuid, Set<Integer>>> assign(
      GroupSpec spec, SubscribedTopicDescriber describer, Predicate<Uuid> topicAllowed, Function<Uuid, double[]> traffic) {
    String[] memberIds = spec.memberIds().toArray(new String[0]);
    Arrays.sort(memberIds);
    int n = memberIds.length;
    // Distinct subscriptions are few: each one's allowed topics are worked out once.
    Map<Set<Uuid>, Uuid[]> allowedOf = new HashMap<>();
    Uuid[][] subs = new Uuid[n][];
    TreeSet<Uuid> allTopics = new TreeSet<>();
    TreeSet<String> rackNames = new TreeSet<>();
    String[] memberRackName = new String[n];
    // The coordinator says when every member subscribes the same topics: then one look at one set.
    boolean homogeneous = spec.subscriptionType() == SubscriptionType.HOMOGENEOUS;
    Uuid[] shared = null;
    for (int m = 0; m < n; m++) {
      MemberSubscription s = spec.memberSubscription(memberIds[m]);
      Set<Uuid> ids = s.subscribedTopicIds();
      Uuid[] ok = homogeneous ? shared : allowedOf.get(ids);
      if (ok == null) {
        List<Uuid> list = new ArrayList<>(ids.size());
        for (Uuid id : ids) if (describer.numPartitions(id) >= 0 && topicAllowed.test(id)) list.add(id);
        ok = list.toArray(new Uuid[0]);
        if (homogeneous) shared = ok;
        else allowedOf.put(ids, ok);
        allTopics.addAll(list);
      }
      subs[m] = ok;
      memberRackName[m] = s.rackId().orElse(null);
      if (memberRackName[m] != null) rackNames.add(memberRackName[m]);
    }
    Uuid[] topics = allTopics.toArray(new Uuid[0]);
    Map<Uuid, Integer> topicIndex = new HashMap<>(topics.length * 2);
    for (int i = 0; i < topics.length; i++) topicIndex.put(topics[i], i);
    int[] numPartitions = new int[topics.length];
    // Rack names get indexes in the order first seen (the coordinator hands out the same String per
    // broker, so a scan by identity over the names seen last answers almost every lookup), and each
    // partition's set of them an id (RackMasks: any number of racks); renumbered by name below.
    RackBits bits = new RackBits();
    for (String r : rackNames) bits.index(r);
    RackMasks.Builder sets = new RackMasks.Builder(topics.length);
    long[] w = new long[1];
    for (int t = 0; t < topics.length; t++) {
      numPartitions[t] = describer.numPartitions(topics[t]);
      sets.topic(t, numPartitions[t]);
      for (int p = 0; p < numPartitions[t]; p++) {
        Arrays.fill(w, 0);
        for (String x : describer.racksForPartition(topics[t], p)) {
          int i = bits.index(x);
          if ((i >> 6) >= w.length) w = Arrays.copyOf(w, Math.max(w.length * 2, (i >> 6) + 1));
          w[i >> 6] |= 1L << (i & 63);
        }
        sets.partition(t, p, w, w.length);
      }
    }
    rackNames.addAll(bits.names);
    Map<String, Integer> rackIndex = new HashMap<>();
    for (String r : rackNames) rackIndex.put(r, rackIndex.size());
    int[] renumber = new int[bits.names.size()];
    boolean same = true;
    for (int i = 0; i < renumber.length; i++) same &= (renumber[i] = rackIndex.get(bits.names.get(i))) == i;
    RackMasks masks = sets.build(same ? null : renumber);
    int[] memberRack = new int[n];
    int[][] memberTopics = new int[n][];
    Map<Uuid[], int[]> indexesOf = new IdentityHashMap<>();
    int[][] current = new int[topics.length][];
    for (int t = 0; t < topics.length; t++) {
      current[t] = new int[numPartitions[t]];
      Arrays.fill(current[t], -1);
    }
    for (int m = 0; m < n; m++) {
      memberRack[m] = memberRackName[m] == null ? -1 : rackIndex.get(memberRackName[m]);
      int[] ts = indexesOf.get(subs[m]);
      if (ts == null) {
        ts = new int[subs[m].length];
        for (int i = 0; i < ts.length; i++) ts[i] = topicIndex.get(subs[m][i]);
        Arrays.sort(ts);
        indexesOf.put(subs[m], ts);
      }
      memberTopics[m] = ts;
      for (Map.Entry<Uuid, Set<Integer>> e : spec.memberAssignment(memberIds[m]).partitions().entrySet()) {
        Integer t = topicIndex.get(e.getKey());
        if (t == null) continue;
        for (int p : e.getValue()) if (p >= 0 && p < numPartitions[t] && current[t][p] < 0) current[t][p] = m;
      }
    }
    int[][] owner = RackStickyBalancer.assign(memberRack, memberTopics, numPartitions, masks, current, weights(topics, numPartitions, traffic));
    List<Map<Uuid, Set<Integer>>> parts = new ArrayList<>(n);
    for (int m = 0; m < n; m++) parts.add(new HashMap<>());
    for (int t = 0; t < topics.length; t++)
      for (int p = 0; p < numPartitions[t]; p++)
        if (owner[t][p] >= 0) parts.get(owner[t][p]).computeIfAbsent(topics[t], k -> new HashSet<>()).add(p);
    Map<String, Map<Uuid, Set<Integer>>> out = new HashMap<>(n * 2);
    for (int m = 0; m < n; m++) out.put(memberIds[m], parts.get(m));
    return out;
  }

  /** Per topic, per partition, bytes/s: known ones as given, unknown ones the mean of the known; null when none is known. */
  static double[][] weights(Uuid[] topics, int[] numPartitions, Function<Uuid, double[]> traffic) {
    if (traffic == null) return null;
    double[][] w = new double[topics.length][];
    double sum = 0;
    long known = 0;
    for (int t = 0; t < topics.length; t++) {
      double[] row = traffic.apply(topics[t]);
      if (row == null || row.length != numPartitions[t]) continue;
      w[t] = row;
      for (double x : row) sum += x;
      known += row.length;
    }
    if (known == 0) return null;
    double mean = sum / known;
    for (int t = 0; t < topics.length; t++)
      if (w[t] == null) {
        w[t] = new double[numPartitions[t]];
        Arrays.fill(w[t], mean);
      }
    return w;
  }

  /** Rack name -> index, in the order first seen. */
  private static final class RackBits {
    final List<String> names = new ArrayList<>();
    private final Map<String, Integer> index = new HashMap<>();
    private int last = -1;

    int index(String name) {
      if (last >= 0 && names.get(last) == name) return last;
      for (int i = Math.max(0, names.size() - 8); i < names.size(); i++) if (names.get(i) == name) return last = i;
      Integer i = index.get(name);
      if (i == null) {
        i = names.size();
        names.add(name);
        index.put(name, i);
      }
      return last = i;
    }
  }
}
