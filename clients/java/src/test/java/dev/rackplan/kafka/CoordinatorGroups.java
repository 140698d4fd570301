package dev.rackplan.kafka;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.apache.kafka.coordinator.group.modern.Assignment;
import org.apache.kafka.coordinator.group.modern.GroupSpecImpl;
import org.apache.kafka.coordinator.group.modern.MemberSubscriptionAndAssignmentImpl;

/**
 * Consumer groups in the coordinator's own terms (Kafka's {@link GroupSpecImpl}), for the property
 * tests against Kafka's {@code uniform} and for the benchmark: random or sized groups, cross-rack
 * counts, moves and Kafka's balance rule.
 */
final class CoordinatorGroups {
  private CoordinatorGroups() {}

  /** Topics: id -> partitions' replica racks. */
  record Topics(Map<Uuid, List<Set<String>>> racks, Map<Uuid, String> names) implements SubscribedTopicDescriber {
    @Override public int numPartitions(Uuid id) {
      List<Set<String>> r = racks.get(id);
      return r == null ? -1 : r.size();
    }

    @Override public Set<String> racksForPartition(Uuid id, int p) {
      return racks.get(id).get(p);
    }

    List<Uuid> ids() {
      return new ArrayList<>(new TreeSet<>(racks.keySet()));
    }
  }

  record Member(String rack, Set<Uuid> topics) {}

  /** The coordinator's GroupSpec for ``members`` holding ``current`` (member -> topic -> partitions). */
  static GroupSpec spec(Map<String, Member> members, Map<String, Map<Uuid, Set<Integer>>> current) {
    Map<String, MemberSubscriptionAndAssignmentImpl> ms = new HashMap<>();
    Map<Uuid, Map<Integer, String>> inverted = new HashMap<>();
    Set<Set<Uuid>> distinct = new java.util.HashSet<>();
    for (Map.Entry<String, Member> e : members.entrySet()) {
      Map<Uuid, Set<Integer>> cur = current.getOrDefault(e.getKey(), Map.of());
      ms.put(e.getKey(), new MemberSubscriptionAndAssignmentImpl(
          Optional.ofNullable(e.getValue().rack()), Optional.empty(), e.getValue().topics(), new Assignment(cur)));
      distinct.add(e.getValue().topics());
      for (Map.Entry<Uuid, Set<Integer>> t : cur.entrySet())
        for (int p : t.getValue()) inverted.computeIfAbsent(t.getKey(), k -> new HashMap<>()).put(p, e.getKey());
    }
    SubscriptionType type = distinct.size() <= 1 ? SubscriptionType.HOMOGENEOUS : SubscriptionType.HETEROGENEOUS;
    return new GroupSpecImpl(ms, type, inverted);
  }

  static Map<String, Map<Uuid, Set<Integer>>> plain(GroupAssignment g) {
    Map<String, Map<Uuid, Set<Integer>>> out = new TreeMap<>();
    for (Map.Entry<String, MemberAssignment> e : g.members().entrySet()) {
      Map<Uuid, Set<Integer>> parts = new TreeMap<>();
      for (Map.Entry<Uuid, Set<Integer>> t : e.getValue().partitions().entrySet())
        if (!t.getValue().isEmpty()) parts.put(t.getKey(), new TreeSet<>(t.getValue()));
      out.put(e.getKey(), parts);
    }
    return out;
  }

  /** Partitions held by a member with a rack that is not among the partition's replica racks. */
  static int crossRack(Map<String, Member> members, Topics topics, Map<String, Map<Uuid, Set<Integer>>> a) {
    int n = 0;
    for (Map.Entry<String, Map<Uuid, Set<Integer>>> e : a.entrySet()) {
      String rack = members.get(e.getKey()).rack();
      if (rack == null) continue;
      for (Map.Entry<Uuid, Set<Integer>> t : e.getValue().entrySet())
        for (int p : t.getValue()) {
          Set<String> r = topics.racksForPartition(t.getKey(), p);
          if (!r.isEmpty() && !r.contains(rack)) n++;
        }
    }
    return n;
  }

  /** Partitions whose owner changed (a partition nobody held before does not count). */
  static int moves(Map<String, Map<Uuid, Set<Integer>>> before, Map<String, Map<Uuid, Set<Integer>>> after) {
    Map<String, String> was = owners(before);
    int n = 0;
    for (Map.Entry<String, String> e : owners(after).entrySet()) {
      String old = was.get(e.getKey());
      if (old != null && !old.equals(e.getValue())) n++;
    }
    return n;
  }

  static Map<String, String> owners(Map<String, Map<Uuid, Set<Integer>>> a) {
    Map<String, String> out = new HashMap<>();
    for (Map.Entry<String, Map<Uuid, Set<Integer>>> e : a.entrySet())
      for (Map.Entry<Uuid, Set<Integer>> t : e.getValue().entrySet())
        for (int p : t.getValue()) out.put(t.getKey() + "-" + p, e.getKey());
    return out;
  }

  /**
   * Null when ``a`` is a valid assignment balanced by Kafka's rule (every partition of a subscribed
   * topic once, to a subscriber; no holder of a topic's partition has more than one partition more
   * than any subscriber of that topic), else what is wrong.
   */
  static String violation(Map<String, Member> members, Topics topics, Map<String, Map<Uuid, Set<Integer>>> a) {
    Map<String, Integer> count = new HashMap<>();
    Map<String, Integer> seen = new HashMap<>();
    for (String m : members.keySet()) count.put(m, 0);
    for (Map.Entry<String, Map<Uuid, Set<Integer>>> e : a.entrySet())
      for (Map.Entry<Uuid, Set<Integer>> t : e.getValue().entrySet()) {
        if (!members.get(e.getKey()).topics().contains(t.getKey())) return e.getKey() + " holds unsubscribed " + t.getKey();
        for (int p : t.getValue()) {
          count.merge(e.getKey(), 1, Integer::sum);
          if (seen.merge(t.getKey() + "-" + p, 1, Integer::sum) > 1) return t.getKey() + "-" + p + " owned twice";
        }
      }
    for (Uuid t : topics.racks().keySet()) {
      int min = Integer.MAX_VALUE;
      boolean subscribed = false;
      for (Map.Entry<String, Member> e : members.entrySet())
        if (e.getValue().topics().contains(t)) {
          subscribed = true;
          min = Math.min(min, count.get(e.getKey()));
        }
      for (int p = 0; p < topics.numPartitions(t); p++)
        if (subscribed && !seen.containsKey(t + "-" + p)) return t + "-" + p + " not assigned";
      for (Map.Entry<String, Map<Uuid, Set<Integer>>> e : a.entrySet())
        if (e.getValue().containsKey(t) && count.get(e.getKey()) > min + 1)
          return e.getKey() + " holds " + count.get(e.getKey()) + " with " + t + ", a subscriber holds " + min;
    }
    return null;
  }

  /** Random replica racks: 1 to ``rf`` distinct racks of ``racks``, sometimes none known. */
  static Topics topics(Random r, int count, int maxPartitions, String[] racks, int rf, boolean someUnknown) {
    Map<Uuid, List<Set<String>>> out = new HashMap<>();
    Map<Uuid, String> names = new HashMap<>();
    for (int t = 0; t < count; t++) {
      Uuid id = new Uuid(r.nextLong(), r.nextLong());
      List<Set<String>> rows = new ArrayList<>();
      int n = 1 + r.nextInt(maxPartitions);
      for (int p = 0; p < n; p++) {
        Set<String> s = new TreeSet<>();
        if (!(someUnknown && r.nextInt(10) == 0)) {
          int k = 1 + r.nextInt(Math.min(rf, racks.length));
          while (s.size() < k) s.add(racks[r.nextInt(racks.length)]);
        }
        rows.add(s);
      }
      out.put(id, rows);
      names.put(id, "topic-" + t);
    }
    return new Topics(out, names);
  }
}
