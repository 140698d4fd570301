package dev.rackplan.kafka.streams;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
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
import org.junit.jupiter.api.Test;

/**
 * rackplan's broker-side Streams assignor against Kafka's own (the broker's built-in {@code sticky},
 * Kafka 4.4) on random groups: the same group, previous assignment and replica racks given to both.
 * rackplan's assignment must pass its postconditions, keep Kafka's balance rule, never read more
 * partitions across racks with its actives, and place as many standbys, fewer in their active's rack.
 */
class KafkaStickyParityTest {
  static final TaskAssignor KAFKA = new StickyTaskAssignor();

  record Case(GroupSpec spec, TopologyDescriber describer, Groups.App app, Map<String, Groups.M> members) {}

  /** A group after churn: members of a first Kafka-assigned round, some gone, some new. */
  static Case randomCase(Random rnd) {
    List<String> racks = rnd.nextBoolean() ? List.of("az-a", "az-b", "az-c") : List.of("az-a", "az-b");
    int processes = 2 + rnd.nextInt(7);
    Map<String, Groups.M> first = new TreeMap<>();
    for (int p = 0; p < processes; p++) {
      String rack = racks.get(rnd.nextInt(racks.size()));
      int members = rnd.nextInt(5) == 0 ? 2 : 1;
      for (int k = 0; k < members; k++)
        first.put("m" + p + "-" + k, Groups.M.of("p" + p, rack).withTags(Map.of("zone", rack, "host", "h" + (p % 3))));
    }
    int standbys = rnd.nextInt(3);
    List<String> tags = rnd.nextInt(3) == 0 ? List.of("zone") : List.of();
    Set<String> memberIds = new TreeSet<>(first.keySet());
    Set<String> processIds = new TreeSet<>();
    for (Groups.M m : first.values()) processIds.add(m.process());
    Groups.App app = Groups.app(rnd, racks, "g", memberIds, processIds);
    TopologyDescriber d = Groups.describer(app.partitions(), app.stateful());
    GroupAssignment before = KAFKA.assign(Groups.spec(first, standbys, tags), d);
    Map<String, Groups.M> now = new TreeMap<>();
    for (Map.Entry<String, Groups.M> e : first.entrySet()) {
      if (rnd.nextInt(4) == 0 && first.size() > 1) continue; // left
      var a = before.members().get(e.getKey());
      now.put(e.getKey(), e.getValue().withActive(a.activeTasks()).withStandby(a.standbyTasks()));
    }
    int joined = rnd.nextInt(3);
    for (int j = 0; j < joined || now.isEmpty(); j++) {
      String rack = racks.get(rnd.nextInt(racks.size()));
      now.put("n" + j, Groups.M.of("q" + j, rack).withTags(Map.of("zone", rack, "host", "h" + j)));
    }
    return new Case(Groups.spec(now, standbys, tags), d, app, now);
  }

  static int activeCross(Case c, Map<String, Set<Task>> active) {
    int n = 0;
    for (Map.Entry<String, Set<Task>> e : active.entrySet())
      for (Task t : e.getValue()) n += c.app().topology().activeCross(t, c.members().get(e.getKey()).rack());
    return n;
  }

  static int standbysInActiveRack(Case c, Map<String, Set<Task>> active, Map<String, Set<Task>> standby) {
    Map<Task, String> rackOfActive = new HashMap<>();
    for (Map.Entry<String, Set<Task>> e : active.entrySet())
      for (Task t : e.getValue()) rackOfActive.put(t, c.members().get(e.getKey()).rack());
    int n = 0;
    for (Map.Entry<String, Set<Task>> e : standby.entrySet())
      for (Task t : e.getValue()) if (c.members().get(e.getKey()).rack().equals(rackOfActive.get(t))) n++;
    return n;
  }

  /** Actives no longer on the member that held them, where that member is still in the group. */
  static int moves(Case c, Map<String, Set<Task>> active) {
    int n = 0;
    for (Map.Entry<String, Set<Task>> e : active.entrySet())
      for (Task t : e.getValue())
        for (Map.Entry<String, Groups.M> m : c.members().entrySet())
          if (!m.getKey().equals(e.getKey()) && Groups.tasks(m.getValue().active()).contains(t)) n++;
    return n;
  }

  static int count(Map<String, Set<Task>> m) {
    int n = 0;
    for (Set<Task> s : m.values()) n += s.size();
    return n;
  }

  static int spread(Map<String, Set<Task>> a, Map<String, Set<Task>> b) {
    int min = Integer.MAX_VALUE, max = 0;
    for (String k : a.keySet()) {
      int n = a.get(k).size() + b.get(k).size();
      min = Math.min(min, n);
      max = Math.max(max, n);
    }
    return max - min;
  }

  @Test
  void neverMoreCrossRackActivesThanKafkaStickyOnRandomGroups() {
    Random rnd = new Random(20261128L);
    long oursCross = 0, kafkaCross = 0, oursSame = 0, kafkaSame = 0, oursStandbys = 0, kafkaStandbys = 0;
    int kafkaOutsideBalance = 0, cases = 400;
    int oursSpreadWorse = 0, oursMoreCross = 0;
    long oursMoves = 0, kafkaMoves = 0;
    for (int i = 0; i < cases; i++) {
      Case c = randomCase(rnd);
      RackplanStreamsTaskAssignor ours = new RackplanStreamsTaskAssignor(new StreamsCatalog(), KAFKA);
      GroupView view = GroupView.of(c.spec(), c.describer(), 10_000L);
      GroupAssignment r = ours.assignWith(c.app().topology(), view, c.spec(), c.describer());
      assertEquals(1, ours.rackAware.get(), "case " + i + " fell back: " + ours.lastReason);
      GroupAssignment k = KAFKA.assign(c.spec(), c.describer());
      var ra = Groups.active(r);
      var rs = Groups.standby(r);
      var ka = Groups.active(k);
      var ks = Groups.standby(k);
      var strategy = RackAwareTaskAssignment.Strategy.MIN_TRAFFIC;
      assertNull(RackAwareTaskAssignment.violation(view, new RackAwareTaskAssignment.Result(ra, rs), strategy), "case " + i);
      int oc = activeCross(c, ra), kc = activeCross(c, ka);
      String kafkaOutside = RackAwareTaskAssignment.violation(view, new RackAwareTaskAssignment.Result(ka, ks), strategy);
      if (kafkaOutside == null)
        assertTrue(oc <= kc, "case " + i + ": rackplan reads " + oc + " partitions across racks, Kafka's sticky " + kc);
      else {
        kafkaOutsideBalance++; // Kafka 4.4 does not cap stateful actives per member: more freedom than rackplan takes
        if (oc > kc) oursMoreCross++;
      }
      assertEquals(count(ks), count(rs), "case " + i + ": standbys placed");
      oursMoves += moves(c, ra);
      kafkaMoves += moves(c, ka);
      oursCross += oc;
      kafkaCross += kc;
      oursSame += standbysInActiveRack(c, ra, rs);
      kafkaSame += standbysInActiveRack(c, ka, ks);
      oursStandbys += count(rs);
      kafkaStandbys += count(ks);
      if (spread(ra, rs) > Math.max(1, spread(ka, ks))) {
        oursSpreadWorse++;
        if (System.getProperty("debug") != null) {
          for (String m : ra.keySet())
            System.out.printf("case %d %s %s rack %s: ours %d+%d kafka %d+%d%n", i, m, c.members().get(m).process(),
                c.members().get(m).rack(), ra.get(m).size(), rs.get(m).size(), ka.get(m).size(), ks.get(m).size());
          System.out.println(c.app().partitions() + " stateful " + c.app().stateful() + " standbys " + view.numStandbys);
        }
      }
    }
    System.out.printf("streams parity, %d random groups: cross-rack active partitions rackplan %d, Kafka sticky %d"
        + " (Kafka above ceil(F/M) stateful actives on a member in %d groups, rackplan reads more across racks in %d"
        + " of those); standbys %d / %d, in their active's rack: rackplan %d, Kafka %d;"
        + " rackplan's total-task spread above max(1, Kafka's) in %d; actives moved off a remaining owner: rackplan %d,"
        + " Kafka %d%n",
        cases, oursCross, kafkaCross, kafkaOutsideBalance, oursMoreCross, oursStandbys, kafkaStandbys, oursSame, kafkaSame,
        oursSpreadWorse, oursMoves, kafkaMoves);
    assertEquals(0, oursMoreCross, "groups where rackplan reads more across racks than Kafka's freer assignment");
    assertTrue(oursSame <= kafkaSame, "standbys in their active's rack: rackplan " + oursSame + ", Kafka " + kafkaSame);
    assertEquals(0, oursSpreadWorse, "cases where rackplan's total tasks per member spread wider than Kafka's");
  }
}
