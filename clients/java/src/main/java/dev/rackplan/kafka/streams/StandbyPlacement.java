package dev.rackplan.kafka.streams;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
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
 * the few members with state are keyed one by one. Per rack, the classes' first members are kept in
 * (load, order) too, and walked in that order until one has no more tags in common with the task's
 * copies than the rack's least possible (no later member of the rack can beat it): a tag with one
 * value a member (a host name) makes a class of every member, and walking every class per standby
 * was the scan again. Until session 34 the classes were racks and, with tags, every free least-loaded
 * member was keyed for every standby (1.3-3.1 s at 2,000 members, found by a hunt). It gives the
 * rule's member ({@code StandbyPlacementTest} checks it against the rule read literally, with tags
 * and without, and counts the members looked at).
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
  /** A class's rack number. */
  private int[] classSlot;
  /** Per rack number, the first member of each of its classes, as {@code load * nm + index}, ascending. */
  private final List<TreeSet<Long>> heads = new ArrayList<>();
  /** Every member as {@code load * nm + index}, ascending: the least load of a free process. */
  private final TreeSet<Long> all = new TreeSet<>();
  /** Per rack number and tag key: the values its members have (null if one has none). */
  private final List<List<Set<String>>> rackValues = new ArrayList<>();
  /** The task being placed: its changelog partitions read across racks, per rack (-1: not asked yet). */
  private final int[] crossIn;
  private Task task;
  private String previous;
  private Map<String, Integer> warm;
  private final List<Map<String, String>> usedTags = new ArrayList<>();
  private final List<Integer> withState = new ArrayList<>();
  private int picks;
  private long examined;

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
    classSlot = new int[classIndex.size()];
    for (int i = 0; i < nm; i++) classSlot[klass[i]] = slot[i];
    for (int r = 0; r <= noRack; r++) {
      heads.add(new TreeSet<>());
      List<Set<String>> values = new ArrayList<>();
      for (int k = 0; k < g.tagKeys.size(); k++) values.add(new HashSet<>());
      rackValues.add(values);
    }
    for (int i = 0; i < nm; i++)
      for (int k = 0; k < g.tagKeys.size(); k++) rackValues.get(slot[i]).get(k).add(members.get(i).tags().get(g.tagKeys.get(k)));
    load = new int[nm];
    held = new boolean[processIndex.size()];
    rackUsed = new boolean[noRack + 1];
    stateful = new boolean[nm];
    crossIn = new int[noRack + 1];
  }

  /**
   * The loads after placing (actives and standbys) and each task's active owner: what evening out
   * reads; and the work done: {@code picks} standbys looked for, {@code examined} members looked at
   * for them (each step of a class's walk to its first free member, each member with state weighed).
   */
  record Placed(Map<String, Integer> loads, Map<Task, String> activeOwner, int picks, long examined) {}

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
    for (int i = 0; i < p.nm; i++) {
      p.byClass.get(p.klass[i]).add(p.entry(i));
      p.all.add(p.entry(i));
    }
    for (int c = 0; c < p.byClass.size(); c++) p.heads.get(p.classSlot[c]).add(p.byClass.get(c).first());
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
    return new Placed(loads, activeOwner, p.picks, p.examined);
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
    TreeSet<Long> cls = byClass.get(klass[best]);
    TreeSet<Long> rackHeads = heads.get(slot[best]);
    rackHeads.remove(cls.first());
    cls.remove(entry(best));
    all.remove(entry(best));
    load[best]++;
    cls.add(entry(best));
    all.add(entry(best));
    rackHeads.add(cls.first());
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
   * process is free. The classes of a rack are walked by their first members' (load, order), and the
   * walk stops at a free first member without state whose tags in common with the copies are the
   * rack's least possible ({@link #fewestSameTags}): every later member of the rack has as many or
   * more, the same rack terms, and a higher (load, order).
   */
  private int best() {
    picks++;
    int least = -1;
    for (long e : all) {
      examined++;
      int i = (int) (e % nm);
      if (!held[process[i]]) {
        least = load[i];
        break;
      }
    }
    if (least < 0) return -1;
    int best = -1;
    long[] bestKey = null;
    for (int r = 0; r <= noRack; r++) {
      if (heads.get(r).isEmpty()) continue;
      long fewest = fewestSameTags(r);
      for (long e : heads.get(r)) {
        examined++;
        int h = (int) (e % nm);
        if (load[h] > least) break;
        boolean free = !held[process[h]] && !stateful[h];
        int i = free ? h : firstFree(byClass.get(klass[h]));
        if (i < 0 || load[i] != least) continue;
        long[] key = key(i);
        int c = bestKey == null ? -1 : Arrays.compare(key, bestKey);
        if (c < 0 || (c == 0 && i < best)) {
          best = i;
          bestKey = key;
        }
        if (free && key[1] == fewest) break;
      }
    }
    for (int i : withState) {
      examined++;
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

  /**
   * A lower bound of the tags a member of rack number {@code r} has in common with the task's copies
   * (the key's second term): per tag key, none if some member of the rack has a value no copy has (or
   * none), else the fewest copies sharing one of the rack's values.
   */
  private long fewestSameTags(int r) {
    long sum = 0;
    for (int k = 0; k < g.tagKeys.size(); k++) {
      String tagKey = g.tagKeys.get(k);
      Set<String> values = rackValues.get(r).get(k);
      if (values.isEmpty() || values.contains(null)) continue;
      Map<String, Integer> copies = new HashMap<>();
      for (Map<String, String> u : usedTags) {
        String v = u.get(tagKey);
        if (v != null && values.contains(v)) copies.merge(v, 1, Integer::sum);
      }
      if (copies.size() < values.size()) continue;
      int fewest = Integer.MAX_VALUE;
      for (int n : copies.values()) fewest = Math.min(fewest, n);
      sum += fewest;
    }
    return sum;
  }

  /** A class's first member by (load, order) whose process is free and that has no state of the task. */
  private int firstFree(TreeSet<Long> cls) {
    for (long e : cls) {
      examined++;
      int i = (int) (e % nm);
      if (!held[process[i]] && !stateful[i]) return i;
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
