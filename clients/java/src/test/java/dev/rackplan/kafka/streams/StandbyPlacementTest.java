package dev.rackplan.kafka.streams;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/**
 * The standby placement ({@link StandbyPlacement}: by class of rack and tag values) is the
 * rule itself: the oracle is the rule read literally (every member scanned for every standby, its key computed in full, the first
 * least key in the view's order), on random groups after churn with client tags, previous owners and
 * warm state; and the same for a sub-topology id that is not a number.
 */
class StandbyPlacementTest {
  @Test
  void theIndexedPlacementIsTheLiteralRule() {
    Random rnd = new Random(29);
    int[] withStandbys = new int[2]; // without tags, with tags
    for (int i = 0; i < 400; i++) {
      KafkaStickyParityTest.Case c = KafkaStickyParityTest.randomCase(rnd);
      GroupView v = GroupView.of(c.spec(), c.describer(), 0);
      for (RackAwareTaskAssignment.Strategy s : RackAwareTaskAssignment.Strategy.values()) {
        Map<String, Set<Task>> active = RackAwareTaskAssignment.assignActive(v, c.app().topology(), s);
        Map<String, Set<Task>> got = RackAwareTaskAssignment.assignStandby(v, c.app().topology(), active);
        assertEquals(literal(v, c.app().topology(), active), got, "case " + i + " " + s);
        if (got.values().stream().anyMatch(x -> !x.isEmpty())) withStandbys[v.tagKeys.isEmpty() ? 0 : 1]++;
      }
    }
    assertTrue(withStandbys[0] > 200 && withStandbys[1] > 100, "cases with standbys: " + Arrays.toString(withStandbys));
  }

  /**
   * The same on larger groups, where a class (rack, tag values) holds many members, so which of them
   * the class offers matters: 10 to 150 members, one or two a process, racks on all, some or none of
   * them, the tags {@code zone} (three values, independent of the rack) and/or {@code host} (one to
   * six values, or about one a member), sometimes missing on a member; after churn (Kafka's sticky answer held, a quarter
   * left, some joined), warm state from the held standbys and from reported offsets (caught up or
   * not), one to three standbys.
   */
  @Test
  void largerGroupsWithTagsAreTheLiteralRule() {
    Random rnd = new Random(31);
    int sharedClasses = 0; // cases where some class holds more than one free member of the least load
    for (int i = 0; i < 150; i++) {
      List<String> racks = List.of("az-a", "az-b", "az-c");
      int rackMode = rnd.nextInt(3); // 0: every member has a rack, 1: some have none, 2: none has one
      List<List<String>> tagChoices = List.of(List.of("zone"), List.of("zone", "host"), List.of("host"));
      List<String> tagKeys = tagChoices.get(rnd.nextInt(3));
      int hosts = rnd.nextInt(4) == 0 ? 10_000 : 1 + rnd.nextInt(6); // 10,000: about one a member
      int processes = 5 + rnd.nextInt(100);
      Map<String, Groups.M> first = new TreeMap<>();
      for (int q = 0; q < processes; q++) {
        String rack = rackMode == 2 || (rackMode == 1 && rnd.nextInt(3) == 0) ? null : racks.get(rnd.nextInt(3));
        int count = rnd.nextInt(3) == 0 ? 2 : 1;
        for (int k = 0; k < count; k++) first.put(String.format("m%03d-%d", q, k), member(rnd, "p" + q, rack, hosts));
      }
      Set<String> processIds = new TreeSet<>();
      for (Groups.M m : first.values()) processIds.add(m.process());
      Groups.App app = Groups.app(rnd, racks, "g", first.keySet(), processIds, 10 + rnd.nextInt(150));
      var d = Groups.describer(app.partitions(), app.stateful());
      int standbys = 1 + rnd.nextInt(3);
      var before = KafkaStickyParityTest.KAFKA.assign(Groups.spec(first, standbys, tagKeys), d);
      Map<String, Groups.M> now = new TreeMap<>();
      for (Map.Entry<String, Groups.M> e : first.entrySet()) {
        if (rnd.nextInt(4) == 0) continue; // left
        var a = before.members().get(e.getKey());
        Groups.M m = e.getValue().withActive(a.activeTasks()).withStandby(a.standbyTasks());
        if (rnd.nextInt(3) == 0) { // reports offsets of some stateful tasks, and the ends of its actives
          Map<String, Map<Integer, Long>> offsets = new TreeMap<>();
          for (String sub : app.stateful())
            for (int p = 0; p < app.partitions().get(sub); p++)
              if (rnd.nextInt(4) == 0) offsets.computeIfAbsent(sub, k -> new TreeMap<>()).put(p, (long) rnd.nextInt(200));
          Map<String, Map<Integer, Long>> ends = new TreeMap<>();
          for (Map.Entry<String, Set<Integer>> t : a.activeTasks().entrySet())
            for (int p : t.getValue()) ends.computeIfAbsent(t.getKey(), k -> new TreeMap<>()).put(p, 200L);
          m = m.withOffsets(offsets, ends);
        }
        now.put(e.getKey(), m);
      }
      int joined = 1 + rnd.nextInt(10);
      for (int j = 0; j < joined; j++) {
        String rack = rackMode == 2 || (rackMode == 1 && rnd.nextInt(3) == 0) ? null : racks.get(rnd.nextInt(3));
        now.put("n" + j, member(rnd, "q" + j, rack, hosts));
      }
      GroupView v = GroupView.of(Groups.spec(now, standbys, tagKeys), d, 100);
      for (RackAwareTaskAssignment.Strategy s : RackAwareTaskAssignment.Strategy.values()) {
        Map<String, Set<Task>> active = RackAwareTaskAssignment.assignActive(v, app.topology(), s);
        assertEquals(literal(v, app.topology(), active), RackAwareTaskAssignment.assignStandby(v, app.topology(), active),
            "case " + i + " " + s);
      }
      Map<List<Object>, Integer> classSizes = new HashMap<>();
      for (GroupView.Member m : v.members) {
        List<Object> key = new ArrayList<>(List.of(String.valueOf(m.rack())));
        for (String k : tagKeys) key.add(String.valueOf(m.tags().get(k)));
        classSizes.merge(key, 1, Integer::sum);
      }
      if (classSizes.values().stream().anyMatch(n -> n > 5) && !v.stateful.isEmpty()) sharedClasses++;
    }
    assertTrue(sharedClasses > 75, "cases whose classes hold several members: " + sharedClasses);
  }

  private static Groups.M member(Random rnd, String process, String rack, int hosts) {
    Map<String, String> tags = new TreeMap<>();
    if (rnd.nextInt(10) > 0) tags.put("zone", "zone-" + rnd.nextInt(3));
    if (rnd.nextInt(10) > 0) tags.put("host", "h" + rnd.nextInt(hosts));
    return Groups.M.of(process, rack).withTags(tags);
  }

  /**
   * The work of the standby pass does not grow with the members: members looked at per standby
   * ({@link StandbyPlacement.Placed#examined}), on the bench's shape (3 racks, the tag zone of 3
   * values independent of the rack, one standby, a member joined a group holding rackplan's own
   * answer, 4 tasks a member), with the tag zone alone and with zone and host (one host a member: a
   * class of (rack, tag values) a member), at 500 and 2,000 members. The scan the classes replaced
   * keyed every free least-loaded member for every standby, and a walk of every class per standby
   * looked at twice the classes: with hosts, twice the members.
   */
  @Test
  void theStandbyPassLooksAtAFewMembersPerStandbyWhateverTheGroupSize() {
    for (List<String> tagKeys : List.of(List.of("zone"), List.of("zone", "host"))) {
      double[] perStandby = new double[2];
      int[] sizes = {500, 2_000};
      for (int s = 0; s < 2; s++) {
        int n = sizes[s];
        StandbyPlacement.Placed placed = joinOnBenchShape(n, tagKeys);
        perStandby[s] = (double) placed.examined() / placed.picks();
        assertTrue(placed.picks() > n, "standbys looked for: " + placed.picks());
      }
      String got = tagKeys + ": " + Arrays.toString(perStandby) + " members looked at per standby at " + Arrays.toString(sizes);
      assertTrue(perStandby[0] <= 30 && perStandby[1] <= 30, got);
      assertTrue(perStandby[1] <= 1.25 * perStandby[0], got);
    }
  }

  private static StandbyPlacement.Placed joinOnBenchShape(int n, List<String> tagKeys) {
    List<String> racks = List.of("az-a", "az-b", "az-c");
    Map<String, Groups.M> members = new TreeMap<>();
    Set<String> processIds = new TreeSet<>();
    for (int i = 0; i <= n; i++) {
      Map<String, String> tags = Map.of("zone", "zone-" + (i / 3) % 3, "host", "h" + i);
      members.put(String.format("m%05d", i), Groups.M.of(String.format("p%05d", i), racks.get(i % 3)).withTags(tags));
      processIds.add(String.format("p%05d", i));
    }
    Map<String, Integer> partitions = new TreeMap<>();
    for (int sub = 0; sub < 10; sub++) partitions.put(Integer.toString(sub), 2 * n / 5);
    Set<String> stateful = Set.of("0", "2", "4", "6", "8");
    Map<String, GroupTopology.Subtopology> st = new TreeMap<>();
    Map<String, List<Set<String>>> topicRacks = new TreeMap<>();
    Random rnd = new Random(n);
    for (String sub : partitions.keySet()) {
      boolean sf = stateful.contains(sub);
      st.put(sub, new GroupTopology.Subtopology(List.of("s" + sub), sf ? List.of("s" + sub + "-changelog") : List.of()));
      topicRacks.put("s" + sub, Groups.randomRacks(rnd, racks, partitions.get(sub)));
      if (sf) topicRacks.put("s" + sub + "-changelog", Groups.randomRacks(rnd, racks, partitions.get(sub)));
    }
    GroupTopology topology = new GroupTopology("g", members.keySet(), processIds, st, topicRacks);
    var d = Groups.describer(partitions, stateful);
    String joiner = String.format("m%05d", n);
    Map<String, Groups.M> before = new TreeMap<>(members);
    before.remove(joiner);
    var strategy = RackAwareTaskAssignment.Strategy.MIN_TRAFFIC;
    var first = RackAwareTaskAssignment.assign(GroupView.of(Groups.spec(before, 1, tagKeys), d, 0), topology, strategy);
    Map<String, Groups.M> held = new TreeMap<>(members);
    for (Map.Entry<String, Set<Task>> e : first.active().entrySet())
      held.put(e.getKey(), held.get(e.getKey()).withActive(Groups.compact(e.getValue()))
          .withStandby(Groups.compact(first.standby().get(e.getKey()))));
    GroupView v = GroupView.of(Groups.spec(held, 1, tagKeys), d, 0);
    Map<String, Set<Task>> active = RackAwareTaskAssignment.assignActive(v, topology, strategy);
    Map<String, Set<Task>> out = new TreeMap<>();
    for (GroupView.Member m : v.members) out.put(m.id(), new TreeSet<>());
    return StandbyPlacement.place(v, topology, active, 1, out);
  }

  /** The greedy as the class comment states it, one member at a time, then the same evening out. */
  static Map<String, Set<Task>> literal(GroupView g, TaskRacks racks, Map<String, Set<Task>> active) {
    Map<String, Set<Task>> out = new TreeMap<>();
    for (GroupView.Member m : g.members) out.put(m.id(), new TreeSet<>());
    if (g.numStandbys <= 0 || g.stateful.isEmpty() || g.members.isEmpty()) return out;
    Map<String, Integer> load = new HashMap<>();
    Map<Task, String> activeOwner = new HashMap<>();
    for (Map.Entry<String, Set<Task>> e : active.entrySet()) {
      load.put(e.getKey(), e.getValue().size());
      for (Task t : e.getValue()) activeOwner.put(t, e.getKey());
    }
    Set<String> processes = new TreeSet<>();
    for (GroupView.Member m : g.members) processes.add(m.processId());
    int replicas = Math.min(g.numStandbys, processes.size() - 1);
    if (replicas <= 0) return out;
    for (Task t : g.stateful) {
      GroupView.Member owner = g.byId.get(activeOwner.get(t));
      Set<String> holders = new HashSet<>(List.of(owner.processId()));
      Set<String> usedRacks = new HashSet<>();
      if (owner.rack() != null) usedRacks.add(owner.rack());
      List<Map<String, String>> usedTags = new ArrayList<>(List.of(owner.tags()));
      for (int k = 0; k < replicas; k++) {
        GroupView.Member best = null;
        long[] bestKey = null;
        int least = Integer.MAX_VALUE;
        for (GroupView.Member m : g.members) if (!holders.contains(m.processId())) least = Math.min(least, load.get(m.id()));
        for (GroupView.Member m : g.members) {
          if (holders.contains(m.processId()) || load.get(m.id()) > least) continue;
          int sameTags = 0;
          for (String key : g.tagKeys)
            for (Map<String, String> u : usedTags)
              if (m.tags().get(key) != null && m.tags().get(key).equals(u.get(key))) sameTags++;
          long[] key = {
            m.rack() == null || usedRacks.contains(m.rack()) ? 1 : 0,
            sameTags,
            racks.standbyCross(t, m.rack()),
            Math.min(g.tier(t, m.id()), GroupView.NO_STATE),
            load.get(m.id())
          };
          if (bestKey == null || Arrays.compare(key, bestKey) < 0) {
            best = m;
            bestKey = key;
          }
        }
        if (best == null) break;
        out.get(best.id()).add(t);
        load.merge(best.id(), 1, Integer::sum);
        holders.add(best.processId());
        if (best.rack() != null) usedRacks.add(best.rack());
        usedTags.add(best.tags());
      }
    }
    RackAwareTaskAssignment.evenOut(g, load, activeOwner, out);
    return out;
  }
}
