package dev.rackplan.kafka.streams;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

/**
 * The greedy standby placement of {@link RackAwareTaskAssignment} (its class comment states the rule):
 * each standby of each stateful task, in task order, to the member with the least key (its rack
 * already used by a copy of the task, client tags shared with the copies, the task's changelog
 * partitions it would read across racks, its stickiness tier, its load) among the least loaded
 * members whose process holds no copy of the task; the first such member in the view's order on a tie.
 *
 * <p>Why a class: a scan of every member for every standby is members x standbys key computations,
 * most of a large group's assignment on the coordinator's thread. A member's key depends only on its
 * rack and its values of the client tags ({@code rack.aware.assignment.tags}), unless it has state of
 * the task (its previous owner, or warm), so the best of such a class is its first member (by load,
 * then order) whose process is free: each class keeps its members ordered by (load, order), and only
 * the few members with state are keyed one by one. Until session 34 the classes were racks and, with
 * tags, every free least-loaded member was keyed for every standby (1.3-3.1 s at 2,000 members, found
 * by a hunt). It gives the rule's member ({@code StandbyPlacementTest} checks it against the rule read
 * literally, with tags and without).
 */
final class StandbyPlacement {
  private final GroupView g;
  private final TaskRacks racks;
  private final List<GroupView.Member> members;
  private final int nm;
  private final Map<String, Integer> index = new HashMap<>();
  private final int[] process;
  /** A member's rack number; members with no rack have the last one. */
  private final int[] slot;
  /** A member's class: its rack and its values of the client tags. */
  private final int[] klass;
  private final int noRack;
  private final int[] load;
  private final boolean[] held;
  private final boolean[] rackUsed;
  /** Members with state of the task being placed (its previous owner, warm ones): keyed one by one. */
  private final boolean[] stateful;
  /** Per class, its members as {@code load * nm + index}, ascending. */
  private final List<TreeSet<Long>> byClass = new ArrayList<>();
  /** The task being placed: its changelog partitions read across racks, per rack (-1: not asked yet). */
  private final int[] crossIn;
  private Task task;
  private String previous;
  private Map<String, Integer> warm;
  private final List<Map<String, String>> usedTags = new ArrayList<>();
  private final List<Integer> withState = new ArrayList<>();

  private StandbyPlacement(GroupView g, TaskRacks racks) {
    this.g = g;
    this.racks = racks;
    members = g.members;
    nm = members.size();
    process = new int[nm];
    slot = new int[nm];
    Map<String, Integer> processIndex = new HashMap<>();
    Map<String, Integer> rackIndex = new HashMap<>();
    for (int i = 0; i < nm; i++) {
      GroupView.Member m = members.get(i);
      index.put(m.id(), i);
      process[i] = processIndex.computeIfAbsent(m.processId(), k -> processIndex.size());
      slot[i] = m.rack() == null ? -1 : rackIndex.computeIfAbsent(m.rack(), k -> rackIndex.size());
    }
    noRack = rackIndex.size();
    for (int i = 0; i < nm; i++) if (slot[i] < 0) slot[i] = noRack;
    klass = new int[nm];
    Map<List<Object>, Integer> classIndex = new HashMap<>();
    for (int i = 0; i < nm; i++) {
      List<Object> key = new ArrayList<>(g.tagKeys.size() + 1);
      key.add(slot[i]);
      for (String tagKey : g.tagKeys) key.add(members.get(i).tags().get(tagKey));
      klass[i] = classIndex.computeIfAbsent(key, k -> classIndex.size());
    }
    for (int c = 0; c < classIndex.size(); c++) byClass.add(new TreeSet<>());
    load = new int[nm];
    held = new boolean[processIndex.size()];
    rackUsed = new boolean[noRack + 1];
    stateful = new boolean[nm];
    crossIn = new int[noRack + 1];
  }

  /** The loads after placing (actives and standbys) and each task's active owner: what evening out reads. */
  record Placed(Map<String, Integer> loads, Map<Task, String> activeOwner) {}

  /**
   * Adds {@code replicas} standbys of every stateful task to {@code out} (every member has an entry),
   * as far as free processes allow; before {@link RackAwareTaskAssignment#evenOut}.
   */
  static Placed place(GroupView g, TaskRacks racks, Map<String, Set<Task>> active, int replicas, Map<String, Set<Task>> out) {
    StandbyPlacement p = new StandbyPlacement(g, racks);
    Map<Task, String> activeOwner = new HashMap<>();
    for (Map.Entry<String, Set<Task>> e : active.entrySet()) {
      p.load[p.index.get(e.getKey())] = e.getValue().size();
      for (Task t : e.getValue()) activeOwner.put(t, e.getKey());
    }
    for (int i = 0; i < p.nm; i++) p.byClass.get(p.klass[i]).add(p.entry(i));
    int[] holders = new int[replicas + 1];
    for (Task t : g.stateful) {
      int owner = p.index.get(activeOwner.get(t));
      p.start(t, owner);
      holders[0] = owner;
      int placed = 0;
      for (int k = 0; k < replicas; k++) {
        int best = p.best();
        if (best < 0) break;
        out.get(p.members.get(best).id()).add(t);
        p.take(best);
        holders[++placed] = best;
      }
      p.finish(holders, placed);
    }
    Map<String, Integer> loads = new HashMap<>();
    for (int i = 0; i < p.nm; i++) loads.put(p.members.get(i).id(), p.load[i]);
    return new Placed(loads, activeOwner);
  }

  private long entry(int i) {
    return (long) load[i] * nm + i;
  }

  private void start(Task t, int owner) {
    task = t;
    previous = g.previousActive.get(t);
    warm = g.warm.get(t);
    Arrays.fill(crossIn, -1);
    held[process[owner]] = true;
    if (slot[owner] != noRack) rackUsed[slot[owner]] = true;
    usedTags.clear();
    usedTags.add(members.get(owner).tags());
    withState.clear();
    Integer p = previous == null ? null : index.get(previous);
    if (p != null) markState(p);
    if (warm != null) for (String id : warm.keySet()) {
      Integer w = index.get(id);
      if (w != null) markState(w);
    }
  }

  private void markState(int i) {
    if (!stateful[i]) {
      stateful[i] = true;
      withState.add(i);
    }
  }

  private void take(int best) {
    byClass.get(klass[best]).remove(entry(best));
    load[best]++;
    byClass.get(klass[best]).add(entry(best));
    held[process[best]] = true;
    if (slot[best] != noRack) rackUsed[slot[best]] = true;
    usedTags.add(members.get(best).tags());
  }

  private void finish(int[] holders, int placed) {
    for (int j = 0; j <= placed; j++) {
      held[process[holders[j]]] = false;
      rackUsed[slot[holders[j]]] = false;
    }
    for (int w : withState) stateful[w] = false;
  }

  /**
   * The member the rule picks: per class its first free member by (load, order) that has no state of
   * the task, and each free member with state, keyed; the least key, then the first in order. -1 if no
   * process is free.
   */
  private int best() {
    int least = Integer.MAX_VALUE;
    for (TreeSet<Long> cls : byClass) {
      int first = firstFree(cls, false);
      if (first >= 0) least = Math.min(least, load[first]);
    }
    int best = -1;
    long[] bestKey = null;
    for (TreeSet<Long> cls : byClass) {
      int i = firstFree(cls, true);
      if (i >= 0 && load[i] == least) {
        long[] key = key(i);
        int c = bestKey == null ? -1 : Arrays.compare(key, bestKey);
        if (c < 0 || (c == 0 && i < best)) {
          best = i;
          bestKey = key;
        }
      }
    }
    for (int i : withState) {
      if (held[process[i]] || load[i] != least) continue;
      long[] key = key(i);
      int c = bestKey == null ? -1 : Arrays.compare(key, bestKey);
      if (c < 0 || (c == 0 && i < best)) {
        best = i;
        bestKey = key;
      }
    }
    return best;
  }

  /** A class's first member by (load, order) whose process is free (and, if asked, with no state of the task). */
  private int firstFree(TreeSet<Long> cls, boolean noState) {
    for (long e : cls) {
      int i = (int) (e % nm);
      if (!held[process[i]] && !(noState && stateful[i])) return i;
    }
    return -1;
  }

  /** The rule's key of member {@code i} for the task being placed. */
  private long[] key(int i) {
    GroupView.Member m = members.get(i);
    int sameTags = 0;
    for (String tagKey : g.tagKeys)
      for (Map<String, String> u : usedTags)
        if (m.tags().get(tagKey) != null && m.tags().get(tagKey).equals(u.get(tagKey))) sameTags++;
    int r = slot[i];
    if (crossIn[r] < 0) crossIn[r] = racks.standbyCross(task, m.rack());
    int tier = m.id().equals(previous) ? GroupView.PREVIOUS_OWNER
        : warm == null ? GroupView.NO_STATE : warm.getOrDefault(m.id(), GroupView.NO_STATE);
    return new long[] {r == noRack || rackUsed[r] ? 1 : 0, sameTags, crossIn[r], Math.min(tier, GroupView.NO_STATE), load[i]};
  }
}
