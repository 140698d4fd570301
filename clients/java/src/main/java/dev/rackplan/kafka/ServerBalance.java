package dev.rackplan.kafka;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.Predicate;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberSubscription;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;

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
    List<String> memberIds = new ArrayList<>(new TreeSet<>(spec.memberIds()));
    TreeMap<Uuid, Integer> topicIndex = new TreeMap<>();
    Map<String, Integer> rackIndex = new TreeMap<>();
    List<Set<Uuid>> subs = new ArrayList<>();
    for (String m : memberIds) {
      MemberSubscription s = spec.memberSubscription(m);
      Set<Uuid> ok = new TreeSet<>();
      for (Uuid id : s.subscribedTopicIds()) if (describer.numPartitions(id) >= 0 && topicAllowed.test(id)) ok.add(id);
      subs.add(ok);
      for (Uuid id : ok) topicIndex.putIfAbsent(id, 0);
      s.rackId().ifPresent(r -> rackIndex.putIfAbsent(r, 0));
    }
    List<Uuid> topics = new ArrayList<>(topicIndex.keySet());
    for (int i = 0; i < topics.size(); i++) topicIndex.put(topics.get(i), i);
    int[] numPartitions = new int[topics.size()];
    List<List<Set<String>>> racks = new ArrayList<>();
    for (int t = 0; t < topics.size(); t++) {
      numPartitions[t] = describer.numPartitions(topics.get(t));
      List<Set<String>> rows = new ArrayList<>(numPartitions[t]);
      for (int p = 0; p < numPartitions[t]; p++) {
        Set<String> r = describer.racksForPartition(topics.get(t), p);
        rows.add(r);
        for (String x : r) rackIndex.putIfAbsent(x, 0);
      }
      racks.add(rows);
    }
    if (rackIndex.size() > RackStickyBalancer.MAX_RACKS)
      throw new IllegalStateException(rackIndex.size() + " racks: more than " + RackStickyBalancer.MAX_RACKS);
    int r = 0;
    for (Map.Entry<String, Integer> e : rackIndex.entrySet()) e.setValue(r++);
    long[][] masks = new long[topics.size()][];
    for (int t = 0; t < topics.size(); t++) {
      masks[t] = new long[numPartitions[t]];
      for (int p = 0; p < numPartitions[t]; p++) for (String x : racks.get(t).get(p)) masks[t][p] |= 1L << rackIndex.get(x);
    }
    int n = memberIds.size();
    int[] memberRack = new int[n];
    int[][] memberTopics = new int[n][];
    int[][] current = new int[topics.size()][];
    for (int t = 0; t < topics.size(); t++) {
      current[t] = new int[numPartitions[t]];
      java.util.Arrays.fill(current[t], -1);
    }
    for (int m = 0; m < n; m++) {
      String id = memberIds.get(m);
      memberRack[m] = spec.memberSubscription(id).rackId().map(rackIndex::get).orElse(-1);
      memberTopics[m] = subs.get(m).stream().mapToInt(topicIndex::get).toArray();
      for (Map.Entry<Uuid, Set<Integer>> e : spec.memberAssignment(id).partitions().entrySet()) {
        Integer t = topicIndex.get(e.getKey());
        if (t == null) continue;
        for (int p : e.getValue()) if (p >= 0 && p < numPartitions[t] && current[t][p] < 0) current[t][p] = m;
      }
    }
    int[][] owner = RackStickyBalancer.assign(memberRack, memberTopics, numPartitions, masks, current);
    Map<String, Map<Uuid, Set<Integer>>> out = new HashMap<>();
    for (String m : memberIds) out.put(m, new HashMap<>());
    for (int t = 0; t < topics.size(); t++)
      for (int p = 0; p < numPartitions[t]; p++)
        if (owner[t][p] >= 0) out.get(memberIds.get(owner[t][p])).computeIfAbsent(topics.get(t), k -> new TreeSet<>()).add(p);
    return out;
  }
}
