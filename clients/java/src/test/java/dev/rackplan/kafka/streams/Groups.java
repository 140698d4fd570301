package dev.rackplan.kafka.streams;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.coordinator.group.api.streams.assignor.AssignmentConfigs;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignmentMetadata;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignmentState;
import org.apache.kafka.coordinator.group.api.streams.assignor.TopologyDescriber;

/** Test groups in the coordinator's terms (GroupSpec, TopologyDescriber), random or hand-made. */
final class Groups {
  private Groups() {}

  /** One member as the coordinator describes it. */
  record M(String process, String rack, Map<String, String> tags, Map<String, Set<Integer>> active,
      Map<String, Set<Integer>> standby, Map<String, Set<Integer>> warmup, Map<String, Map<Integer, Long>> offsets,
      Map<String, Map<Integer, Long>> endOffsets) {
    static M of(String process, String rack) {
      return new M(process, rack, Map.of(), Map.of(), Map.of(), Map.of(), Map.of(), Map.of());
    }

    M withActive(Map<String, Set<Integer>> a) {
      return new M(process, rack, tags, a, standby, warmup, offsets, endOffsets);
    }

    M withStandby(Map<String, Set<Integer>> s) {
      return new M(process, rack, tags, active, s, warmup, offsets, endOffsets);
    }

    M withOffsets(Map<String, Map<Integer, Long>> o, Map<String, Map<Integer, Long>> e) {
      return new M(process, rack, tags, active, standby, warmup, o, e);
    }

    M withTags(Map<String, String> t) {
      return new M(process, rack, t, active, standby, warmup, offsets, endOffsets);
    }
  }

  static GroupSpec spec(Map<String, M> members, int standbys, List<String> tagKeys) {
    AssignmentConfigs configs = new AssignmentConfigs() {
      @Override public int numStandbyReplicas() { return standbys; }
      @Override public List<String> rackAwareAssignmentTags() { return tagKeys; }
    };
    return new GroupSpec() {
      @Override public Collection<String> memberIds() { return members.keySet(); }
      @Override public MemberAssignmentMetadata memberMetadata(String id) {
        M m = members.get(id);
        return new MemberAssignmentMetadata() {
          @Override public Optional<String> instanceId() { return Optional.empty(); }
          @Override public Optional<String> rackId() { return Optional.ofNullable(m.rack()); }
          @Override public String processId() { return m.process(); }
          @Override public Map<String, String> clientTags() { return m.tags(); }
        };
      }
      @Override public MemberAssignmentState memberAssignmentState(String id) {
        M m = members.get(id);
        return new MemberAssignmentState() {
          @Override public Map<String, Set<Integer>> activeTasks() { return m.active(); }
          @Override public Map<String, Set<Integer>> standbyTasks() { return m.standby(); }
          @Override public Map<String, Set<Integer>> warmupTasks() { return m.warmup(); }
          @Override public Map<String, Map<Integer, Long>> taskOffsets() { return m.offsets(); }
          @Override public Map<String, Map<Integer, Long>> taskEndOffsets() { return m.endOffsets(); }
        };
      }
      @Override public AssignmentConfigs configs() { return configs; }
    };
  }

  static TopologyDescriber describer(Map<String, Integer> partitions, Set<String> stateful) {
    return new TopologyDescriber() {
      @Override public List<String> subtopologies() { return new ArrayList<>(new TreeSet<>(partitions.keySet())); }
      @Override public int maxNumInputPartitions(String s) {
        Integer n = partitions.get(s);
        if (n == null) throw new java.util.NoSuchElementException(s);
        return n;
      }
      @Override public boolean isStateful(String s) { return stateful.contains(s); }
    };
  }

  /** A random app on random racks: its topology (sources "s<i>", changelogs "s<i>-changelog"). */
  record App(Map<String, Integer> partitions, Set<String> stateful, GroupTopology topology) {}

  static App app(Random rnd, List<String> racks, String groupId, Set<String> memberIds, Set<String> processIds) {
    return app(rnd, racks, groupId, memberIds, processIds, 12);
  }

  /** 1 to 4 sub-topologies of 1 to {@code maxPartitions} partitions, two in three stateful. */
  static App app(Random rnd, List<String> racks, String groupId, Set<String> memberIds, Set<String> processIds, int maxPartitions) {
    int subs = 1 + rnd.nextInt(4);
    Map<String, Integer> partitions = new TreeMap<>();
    Set<String> stateful = new TreeSet<>();
    Map<String, GroupTopology.Subtopology> st = new TreeMap<>();
    Map<String, List<Set<String>>> topicRacks = new TreeMap<>();
    for (int s = 0; s < subs; s++) {
      String id = Integer.toString(s);
      int n = 1 + rnd.nextInt(maxPartitions);
      partitions.put(id, n);
      boolean sf = rnd.nextInt(3) > 0;
      if (sf) stateful.add(id);
      topicRacks.put("s" + id, randomRacks(rnd, racks, n));
      if (sf) topicRacks.put("s" + id + "-changelog", randomRacks(rnd, racks, n));
      st.put(id, new GroupTopology.Subtopology(List.of("s" + id), sf ? List.of("s" + id + "-changelog") : List.of()));
    }
    return new App(partitions, stateful, new GroupTopology(groupId, memberIds, processIds, st, topicRacks));
  }

  /** Each partition's replicas in 1 or 2 of the racks (racks-1 at most, so some reads cross). */
  static List<Set<String>> randomRacks(Random rnd, List<String> racks, int n) {
    List<Set<String>> out = new ArrayList<>();
    for (int p = 0; p < n; p++) {
      Set<String> r = new TreeSet<>();
      int k = 1 + rnd.nextInt(Math.max(1, racks.size() - 1));
      while (r.size() < k) r.add(racks.get(rnd.nextInt(racks.size())));
      out.add(r);
    }
    return out;
  }

  /** Member id -> its tasks, from a coordinator-shaped assignment. */
  static Map<String, Set<Task>> active(GroupAssignment a) {
    Map<String, Set<Task>> out = new TreeMap<>();
    for (Map.Entry<String, MemberAssignment> e : a.members().entrySet()) out.put(e.getKey(), tasks(e.getValue().activeTasks()));
    return out;
  }

  static Map<String, Set<Task>> standby(GroupAssignment a) {
    Map<String, Set<Task>> out = new TreeMap<>();
    for (Map.Entry<String, MemberAssignment> e : a.members().entrySet()) out.put(e.getKey(), tasks(e.getValue().standbyTasks()));
    return out;
  }

  static Set<Task> tasks(Map<String, Set<Integer>> m) {
    Set<Task> out = new TreeSet<>();
    for (Map.Entry<String, Set<Integer>> e : m.entrySet()) for (int p : e.getValue()) out.add(new Task(e.getKey(), p));
    return out;
  }

  static Map<String, Set<Integer>> compact(Set<Task> tasks) {
    Map<String, Set<Integer>> out = new HashMap<>();
    for (Task t : tasks) out.computeIfAbsent(t.subtopology(), k -> new TreeSet<>()).add(t.partition());
    return out;
  }
}
