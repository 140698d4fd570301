package dev.rackplan.kafka;

import dev.rackplan.kafka.CoordinatorGroups.Member;
import dev.rackplan.kafka.CoordinatorGroups.Topics;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.ConsumerGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.assignor.UniformAssignor;

/**
 * Hard shapes for the KIP-848 plugin: many distinct subscriptions, many racks, a group switching from
 * Kafka's {@code uniform} to {@code rackplan} (one member joins a group that holds uniform's answer).
 */
public final class ServerAssignorShapes {
  private ServerAssignorShapes() {}

  /**
   * A group shape: racks, replicas per partition, subscriptions (0: one per member), members, partitions,
   * and what the group holds: nothing, {@code uniform}'s answer without the last member (it joins), or
   * everything its first member subscribes (the others join at once: a scale-out from one pod).
   */
  record Shape(String name, int racks, int rf, int subscriptions, int members, int partitions, Start start, int topics) {
    Shape(String name, int racks, int rf, int subscriptions, int members, int partitions, Start start) {
      this(name, racks, rf, subscriptions, members, partitions, start, 100);
    }
  }

  enum Start { FRESH, JOINS_UNIFORM, ONE_HELD_ALL }

  static final List<Shape> SHAPES = List.of(
      new Shape("5 subscriptions, joins uniform's", 3, 2, 5, 2_000, 50_000, Start.JOINS_UNIFORM),
      new Shape("10 subscriptions, joins uniform's", 3, 2, 10, 100, 5_000, Start.JOINS_UNIFORM),
      new Shape("20 subscriptions, joins uniform's", 3, 2, 20, 2_000, 50_000, Start.JOINS_UNIFORM),
      new Shape("a subscription per member", 3, 2, 0, 2_000, 10_000, Start.FRESH),
      new Shape("24 racks, joins uniform's", 24, 3, 1, 1_000, 20_000, Start.JOINS_UNIFORM),
      new Shape("70 racks, joins uniform's", 70, 3, 1, 1_000, 10_000, Start.JOINS_UNIFORM),
      new Shape("70 racks, 10 subscriptions", 70, 3, 10, 1_000, 10_000, Start.JOINS_UNIFORM),
      new Shape("500 racks, 10 subscriptions", 500, 3, 10, 5_000, 50_000, Start.JOINS_UNIFORM),
      new Shape("10 subscriptions, one member held all, 5,000 join", 3, 2, 10, 5_000, 50_000, Start.ONE_HELD_ALL),
      new Shape("2 topics of 25,000, one member held all, 5,000 join", 3, 2, 3, 5_000, 50_000, Start.ONE_HELD_ALL, 2));

  record Group(Topics topics, Map<String, Member> members, Map<String, Map<Uuid, Set<Integer>>> current) {}

  static Group group(Shape s) {
    Random r = new Random(s.name().hashCode() * 31L + s.members());
    String[] racks = new String[s.racks()];
    for (int i = 0; i < racks.length; i++) racks[i] = String.format("az-%02d", i);
    int topicCount = s.topics();
    Map<Uuid, List<Set<String>>> rk = new HashMap<>();
    Map<Uuid, String> names = new HashMap<>();
    List<Uuid> ids = new ArrayList<>();
    for (int t = 0; t < topicCount; t++) {
      Uuid id = new Uuid(r.nextLong(), r.nextLong());
      ids.add(id);
      names.put(id, "topic-" + t);
      List<Set<String>> rows = new ArrayList<>();
      for (int p = 0; p < s.partitions() / topicCount; p++) {
        Set<String> set = new TreeSet<>();
        while (set.size() < Math.min(s.rf(), racks.length)) set.add(racks[r.nextInt(racks.length)]);
        rows.add(set);
      }
      rk.put(id, rows);
    }
    Topics topics = new Topics(rk, names);
    Map<String, Member> members = new TreeMap<>();
    for (int i = 0; i <= s.members(); i++) {
      Set<Uuid> subs = new HashSet<>();
      if (s.subscriptions() == 1) subs.addAll(ids);
      else if (s.subscriptions() == 0) {
        for (Uuid id : ids) if (r.nextInt(5) < 2) subs.add(id);
        if (subs.isEmpty()) subs.add(ids.get(i % topicCount));
      } else {
        int k = s.subscriptions();
        for (int t = 0; t < topicCount; t++) if (t % k == i % k || t % k == (i + 1) % k) subs.add(ids.get(t));
      }
      members.put(String.format("member-%05d", i), new Member(racks[i % racks.length], subs));
    }
    Map<String, Map<Uuid, Set<Integer>>> current = Map.of();
    if (s.start() == Start.ONE_HELD_ALL) {
      String first = String.format("member-%05d", 0);
      Map<Uuid, Set<Integer>> all = new HashMap<>();
      for (Uuid t : members.get(first).topics()) {
        Set<Integer> ps = new TreeSet<>();
        for (int p = 0; p < topics.numPartitions(t); p++) ps.add(p);
        all.put(t, ps);
      }
      current = Map.of(first, all);
    }
    if (s.start() == Start.JOINS_UNIFORM) {
      Map<String, Member> before = new TreeMap<>(members);
      before.remove(String.format("member-%05d", s.members()));
      current = CoordinatorGroups.plain(new UniformAssignor().assign(CoordinatorGroups.spec(before, Map.of()), topics));
    }
    return new Group(topics, members, current);
  }

  public static void main(String[] args) {
    int warmup = Integer.parseInt(args.length > 0 ? args[0] : "2");
    int runs = Integer.parseInt(args.length > 1 ? args[1] : "3");
    for (Shape s : SHAPES) {
      if (args.length > 2 && !s.name().contains(args[2])) continue;
      Group g = group(s);
      GroupSpec spec = CoordinatorGroups.spec(g.members(), g.current());
      Map<String, ConsumerGroupPartitionAssignor> assignors = new java.util.LinkedHashMap<>();
      assignors.put("uniform", new UniformAssignor());
      RackplanServerAssignor rp = RackplanServerAssignor.forTest(new PlanStore(), g.topics().names());
      assignors.put("rackplan", rp);
      for (Map.Entry<String, ConsumerGroupPartitionAssignor> e : assignors.entrySet()) {
        double[] ms = ServerAssignorBench.time(e.getValue(), spec, g.topics(), warmup, runs);
        Map<String, Map<Uuid, Set<Integer>>> after = CoordinatorGroups.plain(e.getValue().assign(spec, g.topics()));
        String bad = CoordinatorGroups.violation(g.members(), g.topics(), after);
        System.out.printf("{\"shape\":\"%s\",\"assignor\":\"%s\",\"cpu_ms\":%.1f,\"cross_rack\":%d,\"moves\":%d,\"balanced\":%s,\"fell_back\":\"%s\"}%n",
            s.name(), e.getKey(), ServerAssignorBench.median(ms), CoordinatorGroups.crossRack(g.members(), g.topics(), after),
            CoordinatorGroups.moves(g.current(), after), bad == null ? "true" : "\"" + bad + "\"",
            e.getValue() == rp && rp.safeFallbackCount.get() > 0 ? rp.lastSafeReason : "");
      }
    }
  }
}
