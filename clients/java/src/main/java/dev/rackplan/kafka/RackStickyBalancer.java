package dev.rackplan.kafka;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The KIP-848 server-side assignment on its own: balanced by Kafka's rule, then the fewest cross-rack
 * partitions, then the fewest moves (pure, int-indexed, no Kafka types: the coordinator's thread runs it).
 *
 * <p>Why a flow: members with the same rack and subscription are interchangeable for locality, and so
 * are partitions with the same replica racks, subscribers and current owner's class. On those classes
 * the choice "how many partitions of class k go to member class c" is a small transportation problem;
 * solved as a min-cost flow (cost = cross-rack x (total + 1) + moved) it gives the least cross-rack
 * count any balanced assignment with these class capacities can have, and among those the fewest moves.
 * Concrete partitions are then dealt out inside each member class, current owners first.
 *
 * <ul>
 *   <li>Homogeneous groups (one subscription): every member gets floor or ceil of total / members (Kafka's
 *       {@code uniform}); which classes get the ceils is part of the flow (a shared pool of {@code total %
 *       members} extras, at most one per member). Exact: no floor/ceil assignment, so none of {@code
 *       uniform}'s, has fewer cross-rack partitions.
 *   <li>Heterogeneous groups: each member's count comes first, from a rack-blind sticky assignment
 *       made balanced by Kafka's rule (no member holding a partition of topic t has more than one
 *       partition more than any subscriber of t); member classes are then (rack, subscription, count)
 *       with exact capacities, and a class may take a topic only where its count keeps that rule, so
 *       every flow is balanced by construction. Exact for those counts, near-exact overall: the counts
 *       are fixed before racks are looked at.
 * </ul>
 *
 * <p>Postconditions, checked as Kafka's RackAwareTaskAssignor checks its own: every partition of a
 * subscribed topic owned exactly once, by a subscriber, and Kafka's balance rule holds. A violation
 * throws {@link IllegalStateException}; the caller falls back and counts the reason.
 */
public final class RackStickyBalancer {
  private RackStickyBalancer() {}

  /** Flow networks bigger than this (very many distinct subscriptions) are not solved on the coordinator. */
  static final int MAX_CLASS_EDGES = 400_000;

  /**
   * The flow's work bound: edge steps per edge of its network (at least {@link #MIN_WORK_EDGES}
   * edges' worth). A step is a few nanoseconds, so this bounds the coordinator's thread at well under
   * a second even at {@link #MAX_CLASS_EDGES}; past it the caller falls back to Kafka's {@code uniform}.
   */
  static final long WORK_PER_EDGE = 200;
  /** The bound in use: {@link #WORK_PER_EDGE}; a test lowers it to see a group handed to {@code uniform}. */
  static volatile long workPerEdge = WORK_PER_EDGE;
  static final long MIN_WORK_EDGES = 20_000;

  /**
   * The assignment.
   *
   * @param memberRack each member's rack index ({@code -1}: none); members in a deterministic order
   * @param memberTopics each member's subscribed topic indexes (existing topics only)
   * @param numPartitions each topic's partition count
   * @param rackMask per topic, per partition, the bit set of its replicas' rack indexes (0: unknown)
   * @param current per topic, per partition, the member holding it now ({@code -1}: nobody)
   * @return per topic, per partition, its member ({@code -1}: nobody subscribes the topic)
   */
  public static int[][] assign(int[] memberRack, int[][] memberTopics, int[] numPartitions, long[][] rackMask, int[][] current) {
    return assign(memberRack, memberTopics, numPartitions, rackMask, current, null);
  }

  /**
   * The assignment weighed by traffic: among the same balanced assignments, the fewest cross-rack
   * bytes/s (the lightest partitions cross when some must), then the fewest cross-rack partitions, then
   * the fewest moves. With {@code weight} null, exactly {@link #assign(int[], int[][], int[], long[][],
   * int[][])}.
   *
   * @param weight per topic, per partition, its bytes/s (finite, >= 0); null: counts only
   */
  public static int[][] assign(
      int[] memberRack, int[][] memberTopics, int[] numPartitions, long[][] rackMask, int[][] current, double[][] weight) {
    return assign(memberRack, memberTopics, numPartitions, RackMasks.of(rackMask), current, weight);
  }

  /** As above, the replica racks as {@link RackMasks} (any number of racks). */
  static int[][] assign(
      int[] memberRack, int[][] memberTopics, int[] numPartitions, RackMasks masks, int[][] current, double[][] weight) {
    int n = memberRack.length;
    int topics = numPartitions.length;
    // Subscriptions as ids; subscribers per topic.
    Map<String, Integer> subIds = new HashMap<>();
    int[] subOf = new int[n];
    List<int[]> subTopics = new ArrayList<>();
    int[][] subscribers = new int[topics][];
    int[] subscriberCount = new int[topics];
    Map<int[], Integer> sameArray = new java.util.IdentityHashMap<>(); // callers share one array per subscription
    for (int m = 0; m < n; m++) {
      Integer id = sameArray.get(memberTopics[m]);
      if (id == null) {
        int[] ts = memberTopics[m].clone();
        Arrays.sort(ts);
        String key = Arrays.toString(ts);
        id = subIds.get(key);
        if (id == null) {
          id = subTopics.size();
          subIds.put(key, id);
          subTopics.add(ts);
        }
        sameArray.put(memberTopics[m], id);
      }
      subOf[m] = id;
      for (int t : subTopics.get(id)) subscriberCount[t]++;
    }
    for (int t = 0; t < topics; t++) subscribers[t] = new int[subscriberCount[t]];
    int[] fill = new int[topics];
    for (int m = 0; m < n; m++) for (int t : memberTopics[m]) subscribers[t][fill[t]++] = m;
    boolean homogeneous = subTopics.size() <= 1;
    // The current assignment, kept only where it is valid (a subscriber, each partition once).
    int[][] owner = new int[topics][];
    for (int t = 0; t < topics; t++) {
      owner[t] = new int[numPartitions[t]];
      Arrays.fill(owner[t], -1);
    }
    int[][] valid = new int[topics][];
    for (int t = 0; t < topics; t++) {
      valid[t] = new int[numPartitions[t]];
      Arrays.fill(valid[t], -1);
      if (current == null || current[t] == null) continue;
      for (int p = 0; p < Math.min(numPartitions[t], current[t].length); p++) {
        int m = current[t][p];
        if (m >= 0 && m < n && Arrays.binarySearch(subTopics.get(subOf[m]), t) >= 0) valid[t][p] = m;
      }
    }
    int total = 0;
    for (int t = 0; t < topics; t++) if (subscriberCount[t] > 0) total += numPartitions[t];
    // Heterogeneous groups: each member's count first, from a rack-blind sticky assignment made balanced.
    int[] quota = null;
    if (n > 0 && !homogeneous) {
      int[][] blind = copy(valid);
      quota = counts(blind, n);
      fillLeastLoaded(blind, quota, subscribers, subscriberCount, numPartitions);
      repair(blind, quota, subscribers, numPartitions);
    }
    // Member classes: (subscription, rack) and, in a heterogeneous group, the member's count.
    Map<List<Integer>, Integer> classIds = new HashMap<>();
    List<Integer> classSub = new ArrayList<>();
    List<Integer> classRack = new ArrayList<>();
    List<Integer> classQuota = new ArrayList<>();
    int[] classOf = new int[n];
    for (int m = 0; m < n; m++) {
      int q = quota == null ? -1 : quota[m];
      List<Integer> key = List.of(subOf[m], memberRack[m], q);
      Integer c = classIds.get(key);
      if (c == null) {
        c = classSub.size();
        classIds.put(key, c);
        classSub.add(subOf[m]);
        classRack.add(memberRack[m]);
        classQuota.add(q);
      }
      classOf[m] = c;
    }
    int classes = classSub.size();
    int[] classSize = new int[classes];
    for (int m = 0; m < n; m++) classSize[classOf[m]]++;
    // Class capacities: base (must be filled) and extras from a shared pool.
    long[] base = new long[classes];
    long[] extra = new long[classes];
    long pool = 0;
    if (n > 0 && homogeneous) {
      int floor = total / n;
      pool = total % n;
      for (int c = 0; c < classes; c++) {
        base[c] = (long) classSize[c] * floor;
        extra[c] = pool > 0 ? classSize[c] : 0;
      }
    } else if (n > 0) {
      for (int c = 0; c < classes; c++) base[c] = (long) classSize[c] * classQuota.get(c);
    }
    // Partition classes: (subscribing subscriptions, rack set, current owner's class).
    Map<String, Integer> groupIds = new HashMap<>();
    int[] groupOf = new int[topics];
    List<boolean[]> groupSubs = new ArrayList<>();
    List<Integer> groupMin = new ArrayList<>(); // a heterogeneous group's least count among the subscribers
    for (int t = 0; t < topics; t++) {
      boolean[] s = new boolean[subTopics.size()];
      for (int m : subscribers[t]) s[subOf[m]] = true;
      String key = Arrays.toString(s);
      Integer g = groupIds.get(key);
      if (g == null) {
        g = groupSubs.size();
        groupIds.put(key, g);
        groupSubs.add(s);
        int min = Integer.MAX_VALUE;
        if (quota != null) for (int m : subscribers[t]) min = Math.min(min, quota[m]);
        groupMin.add(min);
      }
      groupOf[t] = g;
    }
    // Rack sets as small ids (few distinct ones), so a partition class is one long key.
    int[][] maskIdOf = masks.idOf;
    long maskKinds = masks.kinds();
    Map<Long, Integer> pIds = new HashMap<>();
    long codes = groupSubs.size() * maskKinds * (classes + 1L);
    int[] dense = null; // class id + 1 by code, when the codes are few
    if (codes <= 1 << 20) dense = new int[(int) codes];
    List<PKey> pKeys = new ArrayList<>();
    List<long[]> pMembers = new ArrayList<>(); // partitions of each class, (topic << 32 | partition)
    int[] pSize = new int[16];
    for (int t = 0; t < topics; t++) {
      if (subscriberCount[t] == 0) continue;
      for (int p = 0; p < numPartitions[t]; p++) {
        int o = valid[t][p];
        int ownerClass = o < 0 ? -1 : classOf[o];
        // < topics x partitions x (members + 1): no overflow
        long code = ((groupOf[t] * maskKinds) + maskIdOf[t][p]) * (classes + 1L) + ownerClass + 1;
        Integer k = dense != null ? (dense[(int) code] == 0 ? null : Integer.valueOf(dense[(int) code] - 1)) : pIds.get(code);
        if (k == null) {
          k = pKeys.size();
          if (dense != null) dense[(int) code] = k + 1;
          else pIds.put(code, k);
          pKeys.add(new PKey(groupOf[t], maskIdOf[t][p], ownerClass));
          pMembers.add(new long[4]);
          if (k == pSize.length) pSize = Arrays.copyOf(pSize, Math.max(16, k * 2));
        }
        long[] a = pMembers.get(k);
        if (pSize[k] == a.length) pMembers.set(k, a = Arrays.copyOf(a, a.length * 2));
        a[pSize[k]++] = ((long) t << 32) | p;
      }
    }
    int pc = pKeys.size();
    int groups = groupSubs.size();
    boolean[][] allowed = new boolean[groups][classes];
    for (int g = 0; g < groups; g++)
      for (int c = 0; c < classes; c++)
        // Kafka's rule, kept by construction: a member may hold a topic only if it holds at most one
        // partition more than the topic's least-loaded subscriber (counts are fixed in a heterogeneous group).
        allowed[g][c] = groupSubs.get(g)[classSub.get(c)] && (quota == null || classQuota.get(c) <= (long) groupMin.get(g) + 1);
    // Cells: (subscribers, rack set). A cell's local classes are the allowed ones reading its
    // partitions in-rack; it may also cross when some allowed class reads them from another rack.
    // Found through each subscriber set's allowed classes by rack: the work is the cells' local
    // classes (the local hubs' edges, bounded below), not cells x classes.
    int[][][] allowedByRack = new int[groups][][]; // [group][rack + 1]: allowed classes there (index 0: no rack)
    int[] racked = new int[groups]; // allowed classes with a rack
    int rackCount = 0;
    for (int c = 0; c < classes; c++) rackCount = Math.max(rackCount, classRack.get(c) + 1);
    for (int g = 0; g < groups; g++) {
      int[] size = new int[rackCount + 1];
      for (int c = 0; c < classes; c++) if (allowed[g][c]) size[classRack.get(c) + 1]++;
      allowedByRack[g] = new int[rackCount + 1][];
      for (int r = 0; r <= rackCount; r++) allowedByRack[g][r] = new int[size[r]];
      int[] at = new int[rackCount + 1];
      for (int c = 0; c < classes; c++) if (allowed[g][c]) allowedByRack[g][classRack.get(c) + 1][at[classRack.get(c) + 1]++] = c;
      racked[g] = 0;
      for (int r = 1; r <= rackCount; r++) racked[g] += size[r];
    }
    Map<Long, Integer> cellIds = new HashMap<>();
    int[] cellOf = new int[pc];
    List<int[]> cellLocal = new ArrayList<>();
    List<Boolean> cellCross = new ArrayList<>();
    List<Integer> cellGroup = new ArrayList<>();
    long localEdges = 0;
    for (int k = 0; k < pc; k++) {
      PKey key = pKeys.get(k);
      long code = key.group * maskKinds + key.maskId;
      Integer cell = cellIds.get(code);
      if (cell == null) {
        cellIds.put(code, cell = cellLocal.size());
        int[][] byRack = allowedByRack[key.group];
        int[] racks = masks.racks(key.maskId);
        int[] local;
        boolean crossing;
        if (racks.length == 0) { // unknown racks: nobody reads them across racks
          local = new int[0];
          for (int[] rs : byRack) local = concat(local, rs);
          crossing = false;
        } else {
          local = byRack[0]; // members without a rack are never cross
          int inMask = 0;
          for (int r : racks)
            if (r < rackCount) {
              local = concat(local, byRack[r + 1]);
              inMask += byRack[r + 1].length;
            }
          crossing = inMask < racked[key.group];
        }
        Arrays.sort(local);
        localEdges += local.length;
        if (localEdges > MAX_CLASS_EDGES)
          throw new IllegalStateException("more than " + MAX_CLASS_EDGES + " class edges to local hubs (" + classes + " member classes)");
        cellLocal.add(local);
        cellCross.add(crossing);
        cellGroup.add(key.group);
      }
      cellOf[k] = cell;
    }
    int cells = cellLocal.size();
    // The flow: source -> partition class -> member class -> sink (base) | pool -> sink (extras).
    // A partition class reaches its members through three edges, not one per member class: to its
    // current owner's class (kept: not moved), to its cell's local hub (moved, in-rack) and to its
    // subscribers' crossing hub (moved, cross-rack); the hubs fan out to the member classes at no cost.
    // Each pair (partition class, member class) keeps its cheapest route's price, so the optimum is the
    // same as with an edge per pair, on a network the size of the input.
    // Weighed by traffic, a class that may go both local and cross sends its crossing units through
    // a node of its own: partition class -> crossing node (convex: the lightest first) -> owner | hub.
    final int source = 0, sink = 1, poolNode = 2, firstClass = 3, firstP = 3 + classes;
    long big = (long) total + 1;
    int[] crossNode = new int[pc];
    Arrays.fill(crossNode, -1);
    int mixed = 0;
    for (int k = 0; weight != null && k < pc; k++)
      if (cellLocal.get(cellOf[k]).length > 0 && cellCross.get(cellOf[k])) crossNode[k] = firstP + pc + mixed++;
    int[] localHub = new int[cells];
    int nodes = firstP + pc + mixed;
    for (int h = 0; h < cells; h++) localHub[h] = cellLocal.get(h).length > 0 ? nodes++ : -1;
    int[] crossHub = new int[groups];
    Arrays.fill(crossHub, -1);
    for (int h = 0; h < cells; h++) if (cellCross.get(h) && crossHub[cellGroup.get(h)] < 0) crossHub[cellGroup.get(h)] = nodes++;
    long edges = 3L * pc + classes * 2L;
    for (int h = 0; h < cells; h++) edges += cellLocal.get(h).length;
    for (int g = 0; g < groups; g++) for (int c = 0; crossHub[g] >= 0 && c < classes; c++) if (allowed[g][c]) edges++;
    if (edges > MAX_CLASS_EDGES)
      throw new IllegalStateException(edges + " class edges (" + classes + " member classes): more than " + MAX_CLASS_EDGES);
    MinCostFlow flow = new MinCostFlow(nodes);
    flow.workLimit = workPerEdge * Math.max(edges, MIN_WORK_EDGES);
    long[][] lightFirst = new long[pc][];
    if (mixed > 0) convexEdges(flow, pKeys, pMembers, pSize, crossNode, weight, big, firstP, lightFirst, nodes);
    final long inf = Long.MAX_VALUE / 4;
    int[] direct = new int[pc], toLocal = new int[pc], toCross = new int[pc];
    for (int k = 0; k < pc; k++) {
      PKey key = pKeys.get(k);
      int o = key.ownerClass;
      flow.addEdge(source, firstP + k, pSize[k], 0);
      // the crossing's price: on the convex edge when weighed, else big per partition
      int crossFrom = crossNode[k] >= 0 ? crossNode[k] : firstP + k;
      long crossPrice = crossNode[k] >= 0 ? 0 : big;
      direct[k] = toLocal[k] = toCross[k] = -1;
      if (o >= 0 && allowed[key.group][o])
        direct[k] = masks.isCross(classRack.get(o), key.maskId)
            ? flow.addEdge(crossFrom, firstClass + o, inf, crossPrice)
            : flow.addEdge(firstP + k, firstClass + o, inf, 0);
      if (localHub[cellOf[k]] >= 0) toLocal[k] = flow.addEdge(firstP + k, localHub[cellOf[k]], inf, 1);
      if (cellCross.get(cellOf[k])) toCross[k] = flow.addEdge(crossFrom, crossHub[key.group], inf, crossPrice + 1);
    }
    int[][] localOut = new int[cells][];
    for (int h = 0; h < cells; h++) {
      int[] local = cellLocal.get(h);
      localOut[h] = new int[local.length];
      for (int i = 0; localHub[h] >= 0 && i < local.length; i++) localOut[h][i] = flow.addEdge(localHub[h], firstClass + local[i], inf, 0);
    }
    int[][] crossOut = new int[groups][classes];
    for (int g = 0; g < groups; g++)
      for (int c = 0; c < classes; c++) crossOut[g][c] = crossHub[g] >= 0 && allowed[g][c] ? flow.addEdge(crossHub[g], firstClass + c, inf, 0) : -1;
    for (int c = 0; c < classes; c++) {
      if (base[c] > 0) flow.addEdge(firstClass + c, sink, base[c], 0);
      if (extra[c] > 0) flow.addEdge(firstClass + c, poolNode, extra[c], 0);
    }
    if (pool > 0) flow.addEdge(poolNode, sink, pool, 0);
    long routed = flow.run(source, sink, total)[0];
    if (routed != total) throw new IllegalStateException("the flow routed " + routed + " of " + total + " partitions");
    Split split = new Split(pc);
    for (int k = 0; k < pc; k++) if (direct[k] >= 0) split.add(k, pKeys.get(k).ownerClass, flow.flow(direct[k]));
    int[] localOf = new int[pc], crossOf = new int[pc];
    for (int k = 0; k < pc; k++) {
      localOf[k] = toLocal[k] < 0 ? -1 : cellOf[k];
      crossOf[k] = toCross[k] < 0 ? -1 : pKeys.get(k).group;
    }
    split.pair(cells, localOf, toLocal, h -> cellLocal.get(h), h -> localOut[h], flow);
    int[] allClasses = new int[classes];
    for (int c = 0; c < classes; c++) allClasses[c] = c;
    split.pair(groups, crossOf, toCross, g -> allClasses, g -> crossOut[g], flow);
    // Deal each member class its partitions, current owners first.
    long[][] perClass = new long[classes][];
    int[] perSize = new int[classes];
    for (int c = 0; c < classes; c++) perClass[c] = new long[(int) Math.min(Integer.MAX_VALUE - 8, base[c] + extra[c])];
    for (int k = 0; k < pc; k++) {
      int cursor = 0;
      // weighed by traffic: the lightest partitions to the crossing classes, the rest to the local ones
      long[] parts = crossNode[k] >= 0 ? lightFirst[k] : pMembers.get(k);
      long[] shares = split.sorted(k, pKeys.get(k).ownerClass); // the owner's class first: a split class keeps its owners' partitions
      for (int side = crossNode[k] >= 0 ? 0 : 1; side < 2; side++)
        for (long share : shares) {
          int c = (int) (share >>> 32);
          if (crossNode[k] >= 0 && masks.isCross(classRack.get(c), pKeys.get(k).maskId) != (side == 0)) continue;
          for (long i = 0, f = (int) share; i < f; i++) perClass[c][perSize[c]++] = parts[cursor++];
        }
    }
    int[][] members = new int[classes][];
    int[] fillC = new int[classes];
    int[] position = new int[n];
    for (int c = 0; c < classes; c++) members[c] = new int[classSize[c]];
    for (int m = 0; m < n; m++) {
      position[m] = fillC[classOf[m]];
      members[classOf[m]][fillC[classOf[m]]++] = m;
    }
    int[] count = new int[n];
    for (int c = 0; c < classes; c++) deal(c, members[c], perClass[c], perSize[c], valid, owner, count, classOf, position);
    check(owner, count, subscribers, subscriberCount, subTopics, subOf, numPartitions);
    return owner;
  }

  private record PKey(int group, int maskId, int ownerClass) {}

  /**
   * The convex edge partition class -> crossing node of every class that may go both ways, priced by
   * its partitions' bytes/s lightest first ({@link TrafficRuns}): a unit costs its weight level x
   * big^2 + big, so bytes/s come first, then cross-rack partitions, then moves (at most {@code big - 1}
   * each). Fills {@code lightFirst} of those classes.
   */
  private static void convexEdges(
      MinCostFlow flow, List<PKey> pKeys, List<long[]> pMembers, int[] pSize, int[] crossNode, double[][] weight,
      long big, int firstP, long[][] lightFirst, int nodes) {
    List<long[]> sorted = new ArrayList<>();
    double max = 0;
    for (int k = 0; k < pKeys.size(); k++) {
      if (crossNode[k] < 0) continue;
      lightFirst[k] = TrafficRuns.lightestFirst(pMembers.get(k), pSize[k], weight);
      sorted.add(lightFirst[k]);
      if (pSize[k] > 0) max = Math.max(max, TrafficRuns.weightOf(weight, lightFirst[k][pSize[k] - 1]));
    }
    if (big > 3_000_000_000L) throw new IllegalStateException(big - 1 + " partitions: too many to weigh by traffic");
    long scale = big * big;
    int q = TrafficRuns.quanta(sorted, weight, max, scale, nodes);
    if (q < 1) throw new IllegalStateException("traffic cannot be priced without overflow for " + (big - 1) + " partitions");
    for (int k = 0; k < pKeys.size(); k++) {
      if (crossNode[k] < 0) continue;
      long[][] runs = TrafficRuns.runs(lightFirst[k], weight, max, q);
      long[] price = new long[runs[0].length];
      for (int i = 0; i < price.length; i++) price[i] = runs[0][i] * scale + big;
      flow.addConvex(firstP + k, crossNode[k], price, runs[1]);
    }
  }

  /** One member class's partitions to its members: floor or ceil each, the ceils to those keeping most. */
  private static void deal(int c, int[] members, long[] parts, int size, int[][] valid, int[][] owner, int[] count, int[] classOf, int[] position) {
    int n = members.length;
    if (n == 0) return;
    int[] keeps = new int[n];
    for (int j = 0; j < size; j++) {
      int o = valid[(int) (parts[j] >>> 32)][(int) parts[j]];
      if (o >= 0 && classOf[o] == c) keeps[position[o]]++;
    }
    int floor = size / n;
    int extras = size % n;
    int[] quota = new int[n];
    Arrays.fill(quota, floor);
    if (extras > 0) {
      Integer[] byKeeps = new Integer[n];
      for (int i = 0; i < n; i++) byKeeps[i] = i;
      Arrays.sort(byKeeps, (a, b) -> keeps[a] != keeps[b] ? Integer.compare(keeps[b], keeps[a]) : Integer.compare(a, b));
      for (int i = 0; i < extras; i++) quota[byKeeps[i]]++;
    }
    int[] got = new int[n];
    long[] rest = new long[size];
    int restSize = 0;
    for (int j = 0; j < size; j++) {
      int t = (int) (parts[j] >>> 32), p = (int) parts[j];
      int o = valid[t][p];
      int i = o >= 0 && classOf[o] == c ? position[o] : -1;
      if (i >= 0 && got[i] < quota[i]) {
        got[i]++;
        owner[t][p] = members[i];
      } else {
        rest[restSize++] = parts[j];
      }
    }
    int i = 0;
    for (int j = 0; j < restSize; j++) {
      while (got[i] >= quota[i]) i++;
      got[i]++;
      owner[(int) (rest[j] >>> 32)][(int) rest[j]] = members[i];
    }
    for (int j = 0; j < n; j++) count[members[j]] += got[j];
  }

  /** Unowned partitions to the least-loaded subscriber, topics with the fewest subscribers first (a heap per topic). */
  private static void fillLeastLoaded(int[][] owner, int[] count, int[][] subscribers, int[] subscriberCount, int[] numPartitions) {
    Integer[] order = new Integer[owner.length];
    for (int t = 0; t < owner.length; t++) order[t] = t;
    Arrays.sort(order, (a, b) -> subscriberCount[a] != subscriberCount[b] ? Integer.compare(subscriberCount[a], subscriberCount[b]) : Integer.compare(a, b));
    for (int t : order) {
      if (subscriberCount[t] == 0) continue;
      // (count << 32 | member): the least-loaded subscriber first, ties by member index
      java.util.PriorityQueue<Long> heap = null;
      for (int p = 0; p < numPartitions[t]; p++) {
        if (owner[t][p] >= 0) continue;
        if (heap == null) {
          heap = new java.util.PriorityQueue<>(subscribers[t].length);
          for (int m : subscribers[t]) heap.add(((long) count[m] << 32) | m);
        }
        long top = heap.poll();
        int best = (int) top;
        owner[t][p] = best;
        count[best]++;
        heap.add(((long) count[best] << 32) | best);
      }
    }
  }

  /**
   * Kafka's balance rule, restored by moves: while a holder of topic t has more than one partition more
   * than some subscriber of t, one of its t partitions moves to the least-loaded subscriber. Each move
   * lowers the sum of squared counts: it ends.
   *
   * <p>Only the counts come out of it (the caller keeps {@code count}, not the partitions: racks are
   * looked at later), so it moves counts per (topic, subscriber), with a heap of the subscribers by
   * count and one of the holders: a move costs a log, not a scan of the topic's subscribers and
   * partitions. The scans cost seconds before (found in session 34: 5,000 members, one of them holding
   * all 50,000 partitions of a topic, 4-16 s). Ties: the first subscriber in order.
   */
  static void repair(int[][] owner, int[] count, int[][] subscribers, int[] numPartitions) {
    int topics = owner.length;
    int[] position = new int[count.length];
    Arrays.fill(position, -1);
    int[][] held = new int[topics][]; // per topic, per subscriber (its position in subscribers[t]): partitions held
    for (int t = 0; t < topics; t++) {
      int[] subs = subscribers[t];
      held[t] = new int[subs.length];
      for (int i = 0; i < subs.length; i++) position[subs[i]] = i;
      for (int p = 0; p < numPartitions[t]; p++) if (owner[t][p] >= 0) held[t][position[owner[t][p]]]++;
      for (int m : subs) position[m] = -1;
    }
    boolean changed = true;
    while (changed) {
      changed = false;
      for (int t = 0; t < topics; t++) if (subscribers[t].length > 1) changed |= balance(subscribers[t], held[t], count);
    }
  }

  /** One topic's moves (see {@link #repair}); whether any was made. */
  private static boolean balance(int[] subs, int[] held, int[] count) {
    int min = Integer.MAX_VALUE, max = Integer.MIN_VALUE;
    for (int i = 0; i < subs.length; i++) {
      min = Math.min(min, count[subs[i]]);
      if (held[i] > 0) max = Math.max(max, count[subs[i]]);
    }
    if (max <= min + 1) return false;
    // (count << 32 | position): the least-loaded first; holders by (-count): the most loaded first
    java.util.PriorityQueue<Long> lows = new java.util.PriorityQueue<>(subs.length);
    java.util.PriorityQueue<Long> highs = new java.util.PriorityQueue<>(subs.length);
    for (int i = 0; i < subs.length; i++) {
      lows.add(((long) count[subs[i]] << 32) | i);
      if (held[i] > 0) highs.add(((long) (Integer.MAX_VALUE - count[subs[i]]) << 32) | i);
    }
    boolean moved = false;
    while (true) {
      while ((int) (lows.peek() >>> 32) != count[subs[(int) (long) lows.peek()]]) lows.poll(); // stale
      while (true) {
        long top = highs.peek();
        int i = (int) top;
        if (held[i] > 0 && Integer.MAX_VALUE - (int) (top >>> 32) == count[subs[i]]) break;
        highs.poll();
      }
      int lo = (int) (long) lows.peek(), hi = (int) (long) highs.peek();
      if (count[subs[hi]] <= count[subs[lo]] + 1) return moved;
      held[hi]--;
      held[lo]++;
      count[subs[hi]]--;
      count[subs[lo]]++;
      moved = true;
      lows.add(((long) count[subs[lo]] << 32) | lo);
      lows.add(((long) count[subs[hi]] << 32) | hi);
      highs.add(((long) (Integer.MAX_VALUE - count[subs[lo]]) << 32) | lo);
      if (held[hi] > 0) highs.add(((long) (Integer.MAX_VALUE - count[subs[hi]]) << 32) | hi);
    }
  }

  /** The postconditions; throws with the first violation. */
  static void check(int[][] owner, int[] count, int[][] subscribers, int[] subscriberCount, List<int[]> subTopics, int[] subOf, int[] numPartitions) {
    int[] recount = new int[count.length];
    for (int t = 0; t < owner.length; t++) {
      int minSub = Integer.MAX_VALUE;
      for (int m : subscribers[t]) minSub = Math.min(minSub, count[m]);
      for (int p = 0; p < numPartitions[t]; p++) {
        int o = owner[t][p];
        if (subscriberCount[t] == 0) {
          if (o >= 0) throw new IllegalStateException("topic " + t + " partition " + p + " assigned with no subscriber");
          continue;
        }
        if (o < 0) throw new IllegalStateException("topic " + t + " partition " + p + " not assigned");
        if (Arrays.binarySearch(subTopics.get(subOf[o]), t) < 0)
          throw new IllegalStateException("topic " + t + " partition " + p + " to member " + o + " which does not subscribe it");
        if (count[o] > minSub + 1)
          throw new IllegalStateException("unbalanced: member " + o + " holds " + count[o] + " with topic " + t + ", a subscriber holds " + minSub);
        recount[o]++;
      }
    }
    if (!Arrays.equals(recount, count)) throw new IllegalStateException("member counts do not add up");
  }

  private static int[] concat(int[] a, int[] b) {
    if (b.length == 0) return a;
    int[] out = Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, out, a.length, b.length);
    return out;
  }

  private static int[][] copy(int[][] a) {
    int[][] b = new int[a.length][];
    for (int i = 0; i < a.length; i++) b[i] = a[i].clone();
    return b;
  }

  private static int[] counts(int[][] owner, int n) {
    int[] c = new int[n];
    for (int[] row : owner) for (int o : row) if (o >= 0) c[o]++;
    return c;
  }

  /**
   * Each partition class's shares, (member class, units): its flow to its owner's class, and its flow
   * into a hub paired with the hub's flow out to member classes. Any pairing keeps the optimum: a
   * pair's own price is at most its route's, and the route's total is already the least possible.
   * Partition classes and member classes are paired in index order: deterministic.
   */
  private static final class Split {
    private final long[][] shares;
    private final int[] size;

    Split(int pc) {
      shares = new long[pc][2];
      size = new int[pc];
    }

    void add(int k, int c, long units) {
      if (units <= 0) return;
      if (size[k] == shares[k].length) shares[k] = Arrays.copyOf(shares[k], size[k] * 2);
      shares[k][size[k]++] = ((long) c << 32) | units;
    }

    /**
     * Pairs, at each of {@code hubs} hubs, the units entering it (partition class k through edge
     * {@code in[k]} when {@code hubOf[k]} is the hub) with those leaving it to {@code classes(h)[i]}
     * through edge {@code out(h)[i]}.
     */
    void pair(int hubs, int[] hubOf, int[] in, java.util.function.IntFunction<int[]> classes,
        java.util.function.IntFunction<int[]> out, MinCostFlow flow) {
      int[] start = new int[hubs + 1];
      for (int h : hubOf) if (h >= 0) start[h + 1]++;
      for (int h = 0; h < hubs; h++) start[h + 1] += start[h];
      int[] byHub = new int[start[hubs]];
      int[] fill = start.clone();
      for (int k = 0; k < hubOf.length; k++) if (hubOf[k] >= 0) byHub[fill[hubOf[k]]++] = k;
      for (int h = 0; h < hubs; h++) {
        int[] cs = classes.apply(h), es = out.apply(h);
        int i = 0;
        long left = 0; // units still to leave through class cs[i]
        for (int j = start[h]; j < start[h + 1]; j++) {
          int k = byHub[j];
          long units = flow.flow(in[k]);
          while (units > 0) {
            while (left == 0) {
              left = es[i] >= 0 ? flow.flow(es[i]) : 0;
              if (left == 0) i++;
            }
            long u = Math.min(units, left);
            add(k, cs[i], u);
            units -= u;
            left -= u;
            if (left == 0) i++;
          }
        }
      }
    }

    /** Partition class k's shares by member class, merged, the owner's class first, then by class. */
    long[] sorted(int k, int ownerClass) {
      long[] s = Arrays.copyOf(shares[k], size[k]);
      Arrays.sort(s);
      int n = 0;
      for (long x : s) {
        if (n > 0 && (s[n - 1] >>> 32) == (x >>> 32)) s[n - 1] += (int) x;
        else s[n++] = x;
      }
      s = Arrays.copyOf(s, n);
      for (int i = 0; i < n; i++)
        if ((int) (s[i] >>> 32) == ownerClass) {
          long o = s[i];
          System.arraycopy(s, 0, s, 1, i);
          s[0] = o;
        }
      return s;
    }
  }
}
