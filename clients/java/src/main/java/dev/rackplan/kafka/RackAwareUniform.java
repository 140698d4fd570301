package dev.rackplan.kafka;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * The server-side fallback: a uniform, sticky, rack-aware assignment (pure, no Kafka types).
 *
 * <p>Kafka's built-in server-side assignors ({@code uniform}, {@code range}) ignore racks. This one
 * balances like {@code uniform} (equal subscriptions: counts differ by at most one) and, within that
 * balance, prefers for each partition a member in one of its replicas' racks, then its current
 * owner. Order of passes, each under the member's quota: (1) current partitions that are in-rack, (2)
 * in-rack members with the fewest partitions, (3) current owners, (4) whoever subscribed has the
 * fewest. Members are visited in id order, partitions in (topic, partition) order: deterministic.
 */
public final class RackAwareUniform {
  private RackAwareUniform() {}

  /** One member: its rack (null: none), subscribed topics and what it holds now. */
  public static final class Member {
    final String rack;
    final Set<String> topics;
    final Map<String, Set<Integer>> current;

    public Member(String rack, Set<String> topics, Map<String, Set<Integer>> current) {
      this.rack = rack;
      this.topics = topics;
      this.current = current;
    }
  }

  /** A partition's replica racks; an empty set means none known. */
  public interface Racks {
    Set<String> of(String topic, int partition);
  }

  public static Map<String, Map<String, Set<Integer>>> assign(
      Map<String, Member> members, Map<String, Integer> partitions, Racks racks) {
    TreeMap<String, Member> ms = new TreeMap<>(members);
    Map<String, Map<String, Set<Integer>>> out = new TreeMap<>();
    Map<String, Integer> count = new HashMap<>();
    Map<String, List<String>> subscribers = new TreeMap<>();
    for (Map.Entry<String, Member> e : ms.entrySet()) {
      out.put(e.getKey(), new TreeMap<>());
      count.put(e.getKey(), 0);
      for (String t : e.getValue().topics) if (partitions.containsKey(t)) subscribers.computeIfAbsent(t, k -> new ArrayList<>()).add(e.getKey());
    }
    if (ms.isEmpty()) return out;
    // Quotas: equal subscriptions get floor/ceil with a limited number of ceils (uniform's balance);
    // unequal ones a fair share of each topic, rounded up.
    Set<Set<String>> distinct = new HashSet<>();
    for (Member m : ms.values()) {
      Set<String> s = new TreeSet<>(m.topics);
      s.retainAll(partitions.keySet());
      distinct.add(s);
    }
    boolean homogeneous = distinct.size() == 1;
    int total = 0;
    for (String t : subscribers.keySet()) total += partitions.get(t);
    final int floor = total / ms.size();
    final int[] extras = {total % ms.size()};
    Map<String, Integer> fair = new HashMap<>();
    for (Map.Entry<String, Member> e : ms.entrySet()) {
      double share = 0;
      for (String t : e.getValue().topics) if (subscribers.containsKey(t)) share += (double) partitions.get(t) / subscribers.get(t).size();
      fair.put(e.getKey(), (int) Math.ceil(share - 1e-9));
    }
    Map<String, Set<Integer>> taken = new HashMap<>();
    class Assigner {
      boolean canTake(String m) {
        int c = count.get(m);
        if (!homogeneous) return c < fair.get(m);
        return c < floor || (c == floor && extras[0] > 0);
      }

      void give(String m, String t, int p) {
        int c = count.get(m);
        if (homogeneous && c == floor) extras[0]--;
        count.put(m, c + 1);
        out.get(m).computeIfAbsent(t, k -> new TreeSet<>()).add(p);
        taken.computeIfAbsent(t, k -> new HashSet<>()).add(p);
      }

      boolean free(String t, int p) {
        return !taken.getOrDefault(t, Set.of()).contains(p);
      }

      boolean inRack(Member m, String t, int p) {
        return m.rack != null && racks.of(t, p).contains(m.rack);
      }
    }
    Assigner a = new Assigner();
    // (1) keep in-rack partitions
    for (Map.Entry<String, Member> e : ms.entrySet())
      for (Map.Entry<String, Set<Integer>> c : new TreeMap<>(e.getValue().current).entrySet())
        if (subscribers.containsKey(c.getKey()) && e.getValue().topics.contains(c.getKey()))
          for (int p : new TreeSet<>(c.getValue()))
            if (p < partitions.get(c.getKey()) && a.free(c.getKey(), p) && a.inRack(e.getValue(), c.getKey(), p) && a.canTake(e.getKey()))
              a.give(e.getKey(), c.getKey(), p);
    // (2) in-rack members, fewest first
    for (Map.Entry<String, List<String>> t : subscribers.entrySet())
      for (int p = 0; p < partitions.get(t.getKey()); p++) {
        if (!a.free(t.getKey(), p)) continue;
        String best = null;
        for (String m : t.getValue())
          if (a.inRack(ms.get(m), t.getKey(), p) && a.canTake(m) && (best == null || count.get(m) < count.get(best))) best = m;
        if (best != null) a.give(best, t.getKey(), p);
      }
    // (3) current owners
    for (Map.Entry<String, Member> e : ms.entrySet())
      for (Map.Entry<String, Set<Integer>> c : new TreeMap<>(e.getValue().current).entrySet())
        if (subscribers.containsKey(c.getKey()) && e.getValue().topics.contains(c.getKey()))
          for (int p : new TreeSet<>(c.getValue()))
            if (p < partitions.get(c.getKey()) && a.free(c.getKey(), p) && a.canTake(e.getKey()))
              a.give(e.getKey(), c.getKey(), p);
    // (4) the rest: fewest first
    for (Map.Entry<String, List<String>> t : subscribers.entrySet())
      for (int p = 0; p < partitions.get(t.getKey()); p++) {
        if (!a.free(t.getKey(), p)) continue;
        String best = null;
        for (String m : t.getValue()) if (best == null || count.get(m) < count.get(best)) best = m;
        a.give(best, t.getKey(), p);
      }
    return out;
  }
}
