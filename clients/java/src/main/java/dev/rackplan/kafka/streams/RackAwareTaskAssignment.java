package dev.rackplan.kafka.streams;

import dev.rackplan.kafka.MinCostFlow;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * rackplan's Streams task assignment on the broker, pure: a {@link GroupView} and the tasks'
 * {@link TaskRacks} in, every member's active and standby tasks out.
 *
 * <p>Actives: one min-cost flow. Every member takes floor(A/M) or ceil(A/M) of the A active tasks
 * and at most ceil(F/M) of the F stateful ones (Kafka's balance: its sticky assignor fills each
 * member up to such quotas; balancing the stateful ones also balances the standbys that follow).
 * Under those constraints the flow minimises, first, the cross-rack partitions the actives read
 * (KIP-925's traffic cost: a cross-rack partition weighs more than every move together, so no
 * assignment within the same quotas, Kafka's included, reads fewer across racks), then the moves: a
 * task stays with its previous owner, else goes to a member caught up on its state (standby,
 * warm-up, or offsets within the acceptable recovery lag), else to one with some state. With {@code
 * balance_subtopology} each member also takes at most ceil(S/M) of each sub-topology's S tasks.
 *
 * <p>Standbys ({@code num.standby.replicas} per stateful task, on processes other than those holding
 * the task): greedily, each to one of the least loaded members (Kafka's rule), among those first to
 * one in a rack none of the task's copies is in, then differing most in the client tags of {@code
 * rack.aware.assignment.tags}, then reading the fewest changelog partitions across racks, then
 * already having the task's state; then moved from the most to the least loaded members until the
 * totals differ by at most one where the processes allow.
 */
public final class RackAwareTaskAssignment {
  /** KIP-925's two rack-aware strategies. */
  public enum Strategy {
    MIN_TRAFFIC,
    BALANCE_SUBTOPOLOGY
  }

  /** Every member's tasks (every member of the view has an entry, maybe empty). */
  public record Result(Map<String, Set<Task>> active, Map<String, Set<Task>> standby) {}

  private RackAwareTaskAssignment() {}


  public static Result assign(GroupView g, TaskRacks racks, Strategy strategy) {
    Map<String, Set<Task>> active = assignActive(g, racks, strategy);
    Map<String, Set<Task>> standby = assignStandby(g, racks, active);
    return new Result(active, standby);
  }

  static Map<String, Set<Task>> assignActive(GroupView g, TaskRacks racks, Strategy strategy) {
    Map<String, Set<Task>> out = new TreeMap<>();
    for (GroupView.Member m : g.members) out.put(m.id(), new TreeSet<>());
    int a = g.tasks.size();
    int nm = g.members.size();
    if (a == 0 || nm == 0) return out;
    int floor = a / nm;
    int extra = a - floor * nm;
    long w = 3L * a + 1; // one cross-rack partition outweighs every move together
    Bytes bytes = Bytes.of(g, racks, w);
    // Buckets: one per sub-topology (balance_subtopology, capped at ceil(S/M) per member), else one for
    // the stateful and one for the stateless tasks. Each member takes at most ceil(F/M) of the F
    // stateful actives: the standbys (of stateful tasks only) then balance the totals.
    boolean bySub = strategy == Strategy.BALANCE_SUBTOPOLOGY;
    List<String> buckets = bySub ? new ArrayList<>(g.partitions.keySet()) : List.of("stateful", "stateless");
    Map<String, Integer> bucketIndex = new HashMap<>();
    for (int i = 0; i < buckets.size(); i++) bucketIndex.put(buckets.get(i), i);
    int[] bucketOf = new int[a];
    int[] classCount = new int[2];
    for (int t = 0; t < a; t++) {
      Task task = g.tasks.get(t);
      boolean sf = g.stateful.contains(task);
      bucketOf[t] = bySub ? bucketIndex.get(task.subtopology()) : (sf ? 0 : 1);
      classCount[sf ? 0 : 1]++;
    }
    List<String> rackList = new ArrayList<>();
    Map<String, Integer> rackIndex = new HashMap<>();
    for (GroupView.Member m : g.members) {
      String r = rackOf(m);
      if (!rackIndex.containsKey(r)) {
        rackIndex.put(r, rackList.size());
        rackList.add(r);
      }
    }
    int nb = buckets.size();
    int nr = rackList.size();
    // nodes: source, sink, extra, tasks, rack x bucket, member x bucket, member x class, members
    int source = 0, sink = 1, extraNode = 2;
    int taskBase = 3;
    int rackBase = taskBase + a;
    int memberBucketBase = rackBase + nr * nb;
    int memberClassBase = memberBucketBase + nm * nb;
    int memberBase = memberClassBase + nm * 2;
    MinCostFlow f = new MinCostFlow(memberBase + nm);
    Map<String, Integer> memberIndex = new HashMap<>();
    for (int i = 0; i < nm; i++) memberIndex.put(g.members.get(i).id(), i);
    for (int i = 0; i < nm; i++) {
      int mNode = memberBase + i;
      if (floor > 0) f.addEdge(mNode, sink, floor, 0);
      if (extra > 0) f.addEdge(mNode, extraNode, 1, 0);
      for (int c = 0; c < 2; c++) f.addEdge(memberClassBase + i * 2 + c, mNode, (classCount[c] + nm - 1) / nm, 0);
      String r = rackOf(g.members.get(i));
      for (int b = 0; b < nb; b++) {
        long cap = a;
        int c = b;
        if (bySub) {
          int s = g.partitions.get(buckets.get(b));
          cap = (s + nm - 1) / nm;
          c = g.stateful.contains(new Task(buckets.get(b), 0)) ? 0 : 1;
        }
        f.addEdge(memberBucketBase + i * nb + b, memberClassBase + i * 2 + c, cap, 0);
        f.addEdge(rackBase + rackIndex.get(r) * nb + b, memberBucketBase + i * nb + b, a, 0);
      }
    }
    if (extra > 0) f.addEdge(extraNode, sink, extra, 0);
    // per task: its edges (to rack buckets and to members it is warm on)
    List<int[]> direct = new ArrayList<>(); // {task index, member index, edge id}
    List<int[]> viaRack = new ArrayList<>(); // {task index, rack index, edge id}
    for (int t = 0; t < a; t++) {
      Task task = g.tasks.get(t);
      int tNode = taskBase + t;
      int b = bucketOf[t];
      f.addEdge(source, tNode, 1, 0);
      for (int r = 0; r < nr; r++) {
        String rack = rackList.get(r).isEmpty() ? null : rackList.get(r);
        int e = f.addEdge(tNode, rackBase + r * nb + b, 1,
            bytes.cost(task, rack) + w * racks.activeCross(task, rack) + GroupView.NO_STATE);
        viaRack.add(new int[] {t, r, e});
      }
      Set<String> special = new TreeSet<>();
      String prev = g.previousActive.get(task);
      if (prev != null && memberIndex.containsKey(prev)) special.add(prev);
      Map<String, Integer> warm = g.warm.get(task);
      if (warm != null) for (String m : warm.keySet()) if (memberIndex.containsKey(m)) special.add(m);
      for (String m : special) {
        int i = memberIndex.get(m);
        String rack = g.byId.get(m).rack();
        int e = f.addEdge(tNode, memberBucketBase + i * nb + b, 1,
            bytes.cost(task, rack) + w * racks.activeCross(task, rack) + g.tier(task, m));
        direct.add(new int[] {t, i, e});
      }
    }
    long[] res = f.run(source, sink, a);
    if (res[0] != a) throw new IllegalStateException("no balanced placement of " + a + " tasks on " + nm + " members");
    // Read the flow back: direct edges name their member; tasks through a rack node take the members
    // that node feeds, in member order (the members of one rack are interchangeable there).
    String[] ownerOf = new String[a];
    for (int[] d : direct) if (f.flow(d[2]) > 0) ownerOf[d[0]] = g.members.get(d[1]).id();
    Map<Integer, List<Integer>> rackTasks = new TreeMap<>(); // rack*nb+bucket -> tasks
    for (int[] v : viaRack)
      if (f.flow(v[2]) > 0) {
        int b = bucketOf[v[0]];
        rackTasks.computeIfAbsent(v[1] * nb + b, k -> new ArrayList<>()).add(v[0]);
      }
    // how many tasks each member takes from its rack node: its member-bucket outflow minus direct ones
    int[][] bucketFlow = new int[nm][nb];
    for (int t = 0; t < a; t++) if (ownerOf[t] != null) {
      int b = bucketOf[t];
      bucketFlow[memberIndex.get(ownerOf[t])][b]--;
    }
    f.forEachFlow(memberBucketBase, memberClassBase, memberBase, (u, v, flow) -> {
      int i = (u - memberBucketBase) / nb;
      int b = (u - memberBucketBase) % nb;
      bucketFlow[i][b] += (int) flow;
    });
    for (Map.Entry<Integer, List<Integer>> e : rackTasks.entrySet()) {
      int r = e.getKey() / nb;
      int b = e.getKey() % nb;
      List<Integer> ts = e.getValue();
      List<Integer> left = new ArrayList<>();
      // a task's previous owner first, when it takes tasks from this node
      for (int t : ts) {
        String prev = g.previousActive.get(g.tasks.get(t));
        Integer i = prev == null ? null : memberIndex.get(prev);
        if (i != null && rackIndex.get(rackOf(g.members.get(i))) == r && bucketFlow[i][b] > 0) {
          bucketFlow[i][b]--;
          ownerOf[t] = prev;
        } else left.add(t);
      }
      int i = 0;
      for (int t : left) {
        while (i < nm && (rackIndex.get(rackOf(g.members.get(i))) != r || bucketFlow[i][b] <= 0)) i++;
        if (i == nm) throw new IllegalStateException("flow of rack " + rackList.get(r) + " not read back");
        bucketFlow[i][b]--;
        ownerOf[t] = g.members.get(i).id();
      }
    }
    for (int t = 0; t < a; t++) out.get(ownerOf[t]).add(g.tasks.get(t));
    return out;
  }

  /**
   * The actives' cross-rack bytes/s as flow costs, above the partitions and the moves: each crossing
   * partition costs its bytes/s in {@code q} levels of the heaviest one, times {@code scale}, which
   * exceeds what every cross-rack partition and every move can cost together; so among the
   * assignments within the quotas the flow reads the fewest bytes/s across racks (to a level), then
   * the fewest partitions, then moves least. {@code q} is at most 2^20 (a millionth of the heaviest
   * partition), lower when a path's cost could come near a long's range; with no bytes (no traffic),
   * or no room for even one level, every cost is 0 and the assignment is the count-only one.
   */
  record Bytes(TaskRacks racks, double max, long q, long scale) {
    static final long MAX_QUANTA = 1L << 20;

    static Bytes of(GroupView g, TaskRacks racks, long w) {
      double max = 0;
      long crossings = 0; // every task's most partitions read across racks, over the members' racks
      int widest = 0;
      Set<String> rackSet = new TreeSet<>();
      for (GroupView.Member m : g.members) rackSet.add(rackOf(m));
      for (Task t : g.tasks) {
        int most = 0;
        for (String r : rackSet) {
          String rack = r.isEmpty() ? null : r;
          double[] b = racks.activeCrossBytes(t, rack);
          for (double x : b) if (x > max) max = x;
          most = Math.max(most, racks.activeCross(t, rack));
          widest = Math.max(widest, b.length);
        }
        crossings += most;
      }
      if (!(max > 0) || widest == 0) return new Bytes(racks, 0, 0, 0);
      long scale = w * (crossings + 1);
      long nodes = 3L + g.tasks.size() + (long) (rackSet.size() + 2L * g.members.size()) * Math.max(2, g.partitions.size())
          + 3L * g.members.size();
      long room = Long.MAX_VALUE / 8 / scale / (widest + 1L) / (nodes + 2);
      long q = Math.min(MAX_QUANTA, room);
      return q < 1 ? new Bytes(racks, 0, 0, 0) : new Bytes(racks, max, q, scale);
    }

    /** Whether bytes are weighed at all. */
    boolean weighed() {
      return q > 0;
    }

    /** The weight of an active of {@code task} in {@code rack}: its crossing partitions' levels, scaled. */
    long cost(Task task, String rack) {
      if (q == 0) return 0;
      long levels = 0;
      for (double x : racks.activeCrossBytes(task, rack)) levels += level(x);
      return scale * levels;
    }

    long level(double x) {
      return Math.round(x / max * q);
    }
  }

  private static String rackOf(GroupView.Member m) {
    return m.rack() == null ? "" : m.rack();
  }

  /** Standbys: {@link StandbyPlacement}'s greedy, then {@link #evenOut}. */
  static Map<String, Set<Task>> assignStandby(GroupView g, TaskRacks racks, Map<String, Set<Task>> active) {
    Map<String, Set<Task>> out = new TreeMap<>();
    for (GroupView.Member m : g.members) out.put(m.id(), new TreeSet<>());
    if (g.numStandbys <= 0 || g.stateful.isEmpty() || g.members.isEmpty()) return out;
    Set<String> processes = new HashSet<>();
    for (GroupView.Member m : g.members) processes.add(m.processId());
    int replicas = Math.min(g.numStandbys, processes.size() - 1);
    if (replicas <= 0) return out;
    StandbyPlacement.Placed placed = StandbyPlacement.place(g, racks, active, replicas, out);
    evenOut(g, placed.loads(), placed.activeOwner(), out);
    return out;
  }

  /**
   * Moves standbys from the most to the least loaded members until the totals differ by at most one
   * (or no move is allowed: the receiver's process holds the task): the greedy placement can leave a
   * member short when the last tasks it could take are its own actives. A move that keeps the standby
   * out of its active's rack is taken first, then the rest.
   */
  static void evenOut(GroupView g, Map<String, Integer> load, Map<Task, String> activeOwner, Map<String, Set<Task>> standby) {
    Map<String, Set<Task>> byProcess = new HashMap<>();
    for (Map.Entry<Task, String> e : activeOwner.entrySet())
      byProcess.computeIfAbsent(g.byId.get(e.getValue()).processId(), k -> new HashSet<>()).add(e.getKey());
    for (Map.Entry<String, Set<Task>> e : standby.entrySet())
      byProcess.computeIfAbsent(g.byId.get(e.getKey()).processId(), k -> new HashSet<>()).addAll(e.getValue());
    for (int round = 0; round < 100_000; round++) {
      int max = Integer.MIN_VALUE, min = Integer.MAX_VALUE;
      for (int l : load.values()) {
        max = Math.max(max, l);
        min = Math.min(min, l);
      }
      if (max - min <= 1) return;
      String[] move = null;
      Task moved = null;
      for (int pass = 0; pass < 2 && move == null; pass++)
        for (GroupView.Member hi : g.members) {
          if (load.get(hi.id()) != max || move != null) continue;
          for (Task t : standby.get(hi.id())) {
            if (move != null) break;
            String activeRack = g.byId.get(activeOwner.get(t)).rack();
            for (GroupView.Member lo : g.members) {
              if (load.get(lo.id()) != min) continue;
              if (byProcess.getOrDefault(lo.processId(), Set.of()).contains(t)) continue;
              boolean keepsRack = lo.rack() == null || !lo.rack().equals(activeRack)
                  || (hi.rack() != null && hi.rack().equals(activeRack));
              if (pass == 0 && !keepsRack) continue;
              move = new String[] {hi.id(), lo.id()};
              moved = t;
              break;
            }
          }
        }
      if (move == null) return;
      standby.get(move[0]).remove(moved);
      standby.get(move[1]).add(moved);
      byProcess.get(g.byId.get(move[0]).processId()).remove(moved);
      byProcess.computeIfAbsent(g.byId.get(move[1]).processId(), k -> new HashSet<>()).add(moved);
      load.merge(move[0], -1, Integer::sum);
      load.merge(move[1], 1, Integer::sum);
    }
  }

  /**
   * Why {@code r} breaks the assignor's guarantees for {@code g}, or null: every task active exactly
   * once on a member of the group, every member within floor(A/M)..ceil(A/M) actives, at most
   * ceil(F/M) stateful ones (and within
   * ceil(S/M) of each sub-topology with balance_subtopology), standbys only of stateful tasks, and
   * no process holding a task twice (active and standby, or two standbys).
   */
  public static String violation(GroupView g, Result r, Strategy strategy) {
    Map<Task, String> owner = new HashMap<>();
    int a = g.tasks.size();
    int nm = g.members.size();
    for (Map.Entry<String, Set<Task>> e : r.active().entrySet()) {
      if (!g.byId.containsKey(e.getKey())) return "member " + e.getKey() + " is not in the group";
      int n = e.getValue().size();
      if (nm > 0 && (n < a / nm || n > (a + nm - 1) / nm))
        return "member " + e.getKey() + " has " + n + " active tasks, outside " + a / nm + ".." + (a + nm - 1) / nm;
      Map<String, Integer> perSub = new HashMap<>();
      long statefulHere = e.getValue().stream().filter(g.stateful::contains).count();
      if (statefulHere > (g.stateful.size() + nm - 1) / nm)
        return "member " + e.getKey() + " has " + statefulHere + " stateful active tasks, above " + (g.stateful.size() + nm - 1) / nm;
      for (Task t : e.getValue()) {
        if (!g.partitions.containsKey(t.subtopology()) || t.partition() >= g.partitions.get(t.subtopology()))
          return "task " + t + " does not exist";
        if (owner.put(t, e.getKey()) != null) return "task " + t + " is active twice";
        perSub.merge(t.subtopology(), 1, Integer::sum);
      }
      if (strategy == Strategy.BALANCE_SUBTOPOLOGY)
        for (Map.Entry<String, Integer> s : perSub.entrySet())
          if (s.getValue() > (g.partitions.get(s.getKey()) + nm - 1) / nm)
            return "member " + e.getKey() + " has " + s.getValue() + " tasks of sub-topology " + s.getKey();
    }
    if (owner.size() != a) return owner.size() + " of " + a + " tasks are active";
    Map<String, Set<Task>> byProcess = new HashMap<>();
    for (Map.Entry<Task, String> e : owner.entrySet())
      byProcess.computeIfAbsent(g.byId.get(e.getValue()).processId(), k -> new HashSet<>()).add(e.getKey());
    for (Map.Entry<String, Set<Task>> e : r.standby().entrySet()) {
      GroupView.Member m = g.byId.get(e.getKey());
      if (m == null) return "member " + e.getKey() + " is not in the group";
      for (Task t : e.getValue()) {
        if (!g.stateful.contains(t)) return "standby of stateless or unknown task " + t;
        if (!byProcess.computeIfAbsent(m.processId(), k -> new HashSet<>()).add(t))
          return "process " + m.processId() + " holds task " + t + " twice";
      }
    }
    return null;
  }
}
