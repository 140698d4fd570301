package dev.rackplan.kafka.streams;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignmentMetadata;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignmentState;
import org.apache.kafka.coordinator.group.api.streams.assignor.TopologyDescriber;

/**
 * A Streams group as the broker's assignor sees it, indexed once: its members (sorted by id), its
 * tasks, which are stateful, and what each member held or has state for. Values only: the
 * assignment is computed from this and a {@link TaskRacks}.
 */
public final class GroupView {
  /** One member: a Streams client's consumer in the group (KIP-1071: one per KafkaStreams instance). */
  public record Member(String id, String processId, String rack, Map<String, String> tags) {}

  /** How much state a member has for a task: the lower, the cheaper moving the active there. */
  static final int PREVIOUS_OWNER = 0;

  static final int CAUGHT_UP = 1;
  static final int SOME_STATE = 2;
  static final int NO_STATE = 3;

  final List<Member> members;
  final Map<String, Member> byId;
  final List<Task> tasks;
  final Set<Task> stateful;
  final Map<String, Integer> partitions;
  /** task -> member id that held it active (the first in member order if several claim it). */
  final Map<Task, String> previousActive;
  /** task -> member id -> {@link #CAUGHT_UP} or {@link #SOME_STATE} (never the previous active owner). */
  final Map<Task, Map<String, Integer>> warm;
  final int numStandbys;
  final List<String> tagKeys;

  GroupView(List<Member> members, Map<String, Integer> partitions, Set<String> statefulSubs,
      Map<Task, String> previousActive, Map<Task, Map<String, Integer>> warm, int numStandbys, List<String> tagKeys) {
    List<Member> sorted = new ArrayList<>(members);
    sorted.sort((a, b) -> a.id().compareTo(b.id()));
    this.members = Collections.unmodifiableList(sorted);
    this.byId = new HashMap<>();
    for (Member m : sorted) byId.put(m.id(), m);
    this.partitions = new TreeMap<>(Task::compareIds);
    this.partitions.putAll(partitions);
    List<Task> ts = new ArrayList<>();
    Set<Task> sf = new TreeSet<>();
    for (Map.Entry<String, Integer> e : this.partitions.entrySet())
      for (int p = 0; p < e.getValue(); p++) {
        Task t = new Task(e.getKey(), p);
        ts.add(t);
        if (statefulSubs.contains(e.getKey())) sf.add(t);
      }
    this.tasks = Collections.unmodifiableList(ts);
    this.stateful = Collections.unmodifiableSet(sf);
    this.previousActive = previousActive;
    this.warm = warm;
    this.numStandbys = numStandbys;
    this.tagKeys = tagKeys;
  }

  /**
   * Reads the coordinator's view. A member is caught up on a task when it held it as a standby or
   * warm-up, or when its reported changelog offsets are within {@code acceptableRecoveryLag} of the
   * end offsets the task's owner reported (KIP-1071 {@code taskOffsets}/{@code taskEndOffsets});
   * offsets further behind still count as some state (what a restarted member with its old state
   * directory reports).
   */
  public static GroupView of(GroupSpec spec, TopologyDescriber topology, long acceptableRecoveryLag) {
    List<Member> members = new ArrayList<>();
    for (String id : spec.memberIds()) {
      MemberAssignmentMetadata md = spec.memberMetadata(id);
      members.add(new Member(id, md.processId(), md.rackId().orElse(null), new TreeMap<>(md.clientTags())));
    }
    members.sort((a, b) -> a.id().compareTo(b.id()));
    Map<String, Integer> partitions = new HashMap<>();
    Set<String> statefulSubs = new TreeSet<>();
    for (String s : topology.subtopologies()) {
      partitions.put(s, topology.maxNumInputPartitions(s));
      if (topology.isStateful(s)) statefulSubs.add(s);
    }
    Map<Task, String> previous = new HashMap<>();
    Map<Task, Long> end = new HashMap<>();
    for (Member m : members) {
      MemberAssignmentState st = spec.memberAssignmentState(m.id());
      for (Map.Entry<String, Set<Integer>> e : st.activeTasks().entrySet())
        for (int p : e.getValue()) previous.putIfAbsent(new Task(e.getKey(), p), m.id());
      for (Map.Entry<String, Map<Integer, Long>> e : st.taskEndOffsets().entrySet())
        for (Map.Entry<Integer, Long> o : e.getValue().entrySet())
          end.merge(new Task(e.getKey(), o.getKey()), o.getValue(), Math::max);
    }
    Map<Task, Map<String, Integer>> warm = new HashMap<>();
    for (Member m : members) {
      MemberAssignmentState st = spec.memberAssignmentState(m.id());
      for (Map<String, Set<Integer>> held : List.of(st.standbyTasks(), st.warmupTasks()))
        for (Map.Entry<String, Set<Integer>> e : held.entrySet())
          for (int p : e.getValue()) warm.computeIfAbsent(new Task(e.getKey(), p), k -> new HashMap<>()).put(m.id(), CAUGHT_UP);
      for (Map.Entry<String, Map<Integer, Long>> e : st.taskOffsets().entrySet())
        for (Map.Entry<Integer, Long> o : e.getValue().entrySet()) {
          Task t = new Task(e.getKey(), o.getKey());
          Long e2 = end.get(t);
          int tier = e2 != null && e2 - o.getValue() <= acceptableRecoveryLag ? CAUGHT_UP : SOME_STATE;
          warm.computeIfAbsent(t, k -> new HashMap<>()).merge(m.id(), tier, Math::min);
        }
    }
    for (Map.Entry<Task, String> e : previous.entrySet()) {
      Map<String, Integer> w = warm.get(e.getKey());
      if (w != null) w.remove(e.getValue());
    }
    return new GroupView(members, partitions, statefulSubs, previous, warm,
        spec.configs().numStandbyReplicas(), List.copyOf(spec.configs().rackAwareAssignmentTags()));
  }

  /** The stickiness tier of putting {@code task}'s active on {@code member}. */
  int tier(Task task, String member) {
    if (member.equals(previousActive.get(task))) return PREVIOUS_OWNER;
    Map<String, Integer> w = warm.get(task);
    Integer t = w == null ? null : w.get(member);
    return t == null ? NO_STATE : t;
  }
}
