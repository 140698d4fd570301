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
