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

  /** More distinct racks than a rack mask holds: the caller falls back. */
  public static final int MAX_RACKS = 63;

  /** Flow networks bigger than this (very many distinct subscriptions) are not solved on the coordinator. */
  static final int MAX_CLASS_EDGES = 400_000;

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
      repair(blind, quota, subscribers, numPartitions, memberRack, rackMask);
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
    // Partition classes: (subscribing subscriptions, rack mask, current owner's class).
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
    // Rack masks as small ids (few distinct ones), so a partition class is one long key.
    Map<Long, Integer> maskIds = new HashMap<>();
    long[] seenMasks = new long[16]; // the first few masks, looked up by a scan
    int[][] maskIdOf = new int[topics][];
    for (int t = 0; t < topics; t++) {
      maskIdOf[t] = new int[numPartitions[t]];
      long lastMask = 0;
      int lastId = -1;
      for (int p = 0; p < numPartitions[t]; p++) {
        long mask = rackMask[t][p];
        if (lastId < 0 || mask != lastMask) {
          int id = -1;
          for (int i = 0; i < Math.min(seenMasks.length, maskIds.size()); i++) if (seenMasks[i] == mask) id = i;
          if (id < 0) {
            Integer known = maskIds.get(mask);
            if (known == null) {
              maskIds.put(mask, known = maskIds.size());
              if (known < seenMasks.length) seenMasks[known] = mask;
            }
            id = known;
          }
          lastMask = mask;
          lastId = id;
        }
        maskIdOf[t][p] = lastId;
      }
    }
    long maskKinds = maskIds.size();
    Map<Long, Integer> pIds = new HashMap<>();
    long codes = groupSubs.size() * maskKinds * (classes + 1L);
    int[] dense = null; // class id + 1 by code, when the codes are few
    if (codes <= 1 << 20) dense = new int[(int) codes];
    List<PKey> pKeys = new ArrayList<>();
    List<long[]> pMembers = new ArrayList<>(); // partitions of each class, (topic << 32 | partition)
    int[] pSize = new int[0];
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
          pKeys.add(new PKey(groupOf[t], rackMask[t][p], ownerClass));
          pMembers.add(new long[4]);
          pSize = Arrays.copyOf(pSize, k + 1);
        }
        long[] a = pMembers.get(k);
        if (pSize[k] == a.length) pMembers.set(k, a = Arrays.copyOf(a, a.length * 2));
        a[pSize[k]++] = ((long) t << 32) | p;
      }
    }
    int pc = pKeys.size();
    long edges = 0;
    boolean[][] allowed = new boolean[groupSubs.size()][classes];
    for (int g = 0; g < groupSubs.size(); g++)
      for (int c = 0; c < classes; c++)
        // Kafka's rule, kept by construction: a member may hold a topic only if it holds at most one
        // partition more than the topic's least-loaded subscriber (counts are fixed in a heterogeneous group).
        allowed[g][c] = groupSubs.get(g)[classSub.get(c)] && (quota == null || classQuota.get(c) <= (long) groupMin.get(g) + 1);
    for (int k = 0; k < pc; k++) for (int c = 0; c < classes; c++) if (allowed[pKeys.get(k).group][c]) edges++;
    if (edges > MAX_CLASS_EDGES)
      throw new IllegalStateException(edges + " class edges (" + classes + " member classes): more than " + MAX_CLASS_EDGES);
    // The flow: source -> partition class -> member class -> sink (base) | pool -> sink (extras).
    // Weighed by traffic, a class that may go both local and cross sends its crossing units through
    // a node of its own: partition class -> crossing node (convex: the lightest first) -> member class.
    final int source = 0, sink = 1, poolNode = 2, firstClass = 3, firstP = 3 + classes;
    long big = (long) total + 1;
    int[] crossNode = new int[pc];
    Arrays.fill(crossNode, -1);
    int mixed = 0;
    for (int k = 0; weight != null && k < pc; k++) {
      boolean local = false, crossing = false;
      for (int c = 0; c < classes; c++)
        if (allowed[pKeys.get(k).group][c]) {
          if (isCross(classRack.get(c), pKeys.get(k).mask)) crossing = true;
          else local = true;
        }
      if (local && crossing) crossNode[k] = firstP + pc + mixed++;
    }
    MinCostFlow flow = new MinCostFlow(firstP + pc + mixed);
    long[][] lightFirst = new long[pc][];
    int[] convexEdge = new int[pc];
    Arrays.fill(convexEdge, -1);
    if (mixed > 0) convexEdges(flow, pKeys, pMembers, pSize, crossNode, weight, big, firstP, lightFirst, convexEdge);
    int[][] edgeOf = new int[pc][classes];
    for (int k = 0; k < pc; k++) {
      PKey key = pKeys.get(k);
      flow.add(source, firstP + k, pSize[k], 0);
      for (int c = 0; c < classes; c++) {
        edgeOf[k][c] = -1;
        if (!allowed[key.group][c]) continue;
        boolean cross = isCross(classRack.get(c), key.mask);
        long moved = key.ownerClass == c ? 0 : 1;
        if (crossNode[k] >= 0) // the crossing's price is on the convex edge
          edgeOf[k][c] = flow.add(cross ? crossNode[k] : firstP + k, firstClass + c, Long.MAX_VALUE / 4, moved);
        else
          edgeOf[k][c] = flow.add(firstP + k, firstClass + c, Long.MAX_VALUE / 4, (cross ? big : 0) + moved);
      }
    }
    for (int c = 0; c < classes; c++) {
      if (base[c] > 0) flow.add(firstClass + c, sink, base[c], 0);
      if (extra[c] > 0) flow.add(firstClass + c, poolNode, extra[c], 0);
    }
    if (pool > 0) flow.add(poolNode, sink, pool, 0);
    long routed = flow.run(source, sink);
    if (routed != total) throw new IllegalStateException("the flow routed " + routed + " of " + total + " partitions");
    // Deal each member class its partitions, current owners first.
    long[][] perClass = new long[classes][];
    int[] perSize = new int[classes];
    for (int c = 0; c < classes; c++) perClass[c] = new long[(int) Math.min(Integer.MAX_VALUE - 8, base[c] + extra[c])];
    int[] order = new int[classes];
    for (int k = 0; k < pc; k++) {
      int cursor = 0;
      long[] parts = pMembers.get(k);
      int ownerClass = pKeys.get(k).ownerClass;
      // the owner's class takes its share first, so a split class keeps the most of its owners' partitions
      for (int c = 0; c < classes; c++) order[c] = c;
      if (ownerClass >= 0) {
        order[ownerClass] = 0;
        order[0] = ownerClass;
      }
      // weighed by traffic: the lightest partitions to the crossing classes, the rest to the local ones
      if (crossNode[k] >= 0) parts = lightFirst[k];
      for (int side = crossNode[k] >= 0 ? 0 : 1; side < 2; side++)
        for (int c : order) {
          if (edgeOf[k][c] < 0) continue;
          if (crossNode[k] >= 0 && isCross(classRack.get(c), pKeys.get(k).mask) != (side == 0)) continue;
          long f = flow.flowOn(edgeOf[k][c]);
          for (long i = 0; i < f; i++) perClass[c][perSize[c]++] = parts[cursor++];
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

  private record PKey(int group, long mask, int ownerClass) {}

  /** A member of rack {@code rack} reads a partition with replicas in {@code mask} from another rack (unknown: no). */
  static boolean isCross(int rack, long mask) {
    return rack >= 0 && mask != 0 && (mask & (1L << rack)) == 0;
  }

  /**
   * The convex edge partition class -> crossing node of every class that may go both ways, priced by
   * its partitions' bytes/s lightest first ({@link TrafficRuns}): a unit costs its weight level x
   * big^2 + big, so bytes/s come first, then cross-rack partitions, then moves (at most {@code big - 1}
   * each). Fills {@code lightFirst} and {@code convexEdge} of those classes.
   */
  private static void convexEdges(
      MinCostFlow flow, List<PKey> pKeys, List<long[]> pMembers, int[] pSize, int[] crossNode, double[][] weight,
      long big, int firstP, long[][] lightFirst, int[] convexEdge) {
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
    int q = TrafficRuns.quanta(sorted, weight, max, scale, crossNode.length + firstP + sorted.size());
    if (q < 1) throw new IllegalStateException("traffic cannot be priced without overflow for " + (big - 1) + " partitions");
    for (int k = 0; k < pKeys.size(); k++) {
      if (crossNode[k] < 0) continue;
      long[][] runs = TrafficRuns.runs(lightFirst[k], weight, max, q);
      long[] price = new long[runs[0].length];
      for (int i = 0; i < price.length; i++) price[i] = runs[0][i] * scale + big;
      convexEdge[k] = flow.addConvex(firstP + k, crossNode[k], price, runs[1]);
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
   * than some subscriber of t, one of its t partitions moves to the least-loaded subscriber (one in that
   * subscriber's rack if there is one). Each move lowers the sum of squared counts: it ends.
   */
  static void repair(int[][] owner, int[] count, int[][] subscribers, int[] numPartitions, int[] memberRack, long[][] rackMask) {
    boolean changed = true;
    while (changed) {
      changed = false;
      for (int t = 0; t < owner.length; t++) {
        if (subscribers[t].length < 2) continue;
        while (true) {
          int low = -1;
          for (int m : subscribers[t]) if (low < 0 || count[m] < count[low]) low = m;
          int high = -1;
          for (int p = 0; p < numPartitions[t]; p++) {
            int o = owner[t][p];
            if (o >= 0 && (high < 0 || count[o] > count[high])) high = o;
          }
          if (high < 0 || count[high] <= count[low] + 1) break;
          int pick = -1;
          for (int p = 0; p < numPartitions[t]; p++) {
            if (owner[t][p] != high) continue;
            if (pick < 0) pick = p;
            int r = memberRack[low];
            if (r >= 0 && (rackMask[t][p] & (1L << r)) != 0) {
              pick = p;
              break;
            }
          }
          owner[t][pick] = low;
          count[high]--;
          count[low]++;
          changed = true;
        }
      }
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
   * Successive shortest paths (Bellman-Ford queue) on a small graph: a few hundred nodes at most.
   *
   * <p>An edge may be convex ({@link #addConvex}): its units cost ascending run prices, the cheapest
   * first. Its residual edges show one run at a time (the next unit's price forward, the last unit's
   * refund backward) and are updated after each augmentation, so a convex cost never needs an edge
   * per unit; successive shortest paths stay exact with convex costs.
   */
  static final class MinCostFlow {
    private final int nodes;
    private int[] head, next, to;
    private long[] cap, cost, orig;
    private int edges;
    /** Forward edge id -> its convex cost (runs); the others are linear. */
    private final Map<Integer, Convex> convex = new HashMap<>();
    /** Augmenting paths found by {@link #run}. */
    long augmentations;

    /** A convex edge's runs: {@code count[i]} units at {@code price[i]}, prices ascending; {@code flow} so far. */
    private static final class Convex {
      final long[] price;
      final long[] end; // cumulative counts
      long flow;

      Convex(long[] price, long[] count) {
        this.price = price;
        this.end = new long[count.length];
        long sum = 0;
        for (int i = 0; i < count.length; i++) end[i] = sum += count[i];
      }

      /** The run holding unit {@code u} (0-based). */
      int runOf(long u) {
        int i = Arrays.binarySearch(end, u + 1);
        return i >= 0 ? i : -i - 1;
      }
    }

    MinCostFlow(int nodes) {
      this.nodes = nodes;
      head = new int[nodes];
      Arrays.fill(head, -1);
      int c = 64;
      next = new int[c];
      to = new int[c];
      cap = new long[c];
      cost = new long[c];
      orig = new long[c];
    }

    private void push(int u, int v, long c, long w) {
      if (edges == to.length) {
        int c2 = edges * 2;
        next = Arrays.copyOf(next, c2);
        to = Arrays.copyOf(to, c2);
        cap = Arrays.copyOf(cap, c2);
        cost = Arrays.copyOf(cost, c2);
        orig = Arrays.copyOf(orig, c2);
      }
      to[edges] = v;
      cap[edges] = c;
      orig[edges] = c;
      cost[edges] = w;
      next[edges] = head[u];
      head[u] = edges++;
    }

    /** An edge u -> v; returns its id (for {@link #flowOn}). */
    int add(int u, int v, long capacity, long w) {
      int id = edges;
      push(u, v, capacity, w);
      push(v, u, 0, -w);
      return id;
    }

    /**
     * A convex edge u -> v: {@code count[i]} units at {@code price[i]} each, prices ascending (the
     * cheapest units are used first). Returns its id (for {@link #flowOn}).
     */
    int addConvex(int u, int v, long[] price, long[] count) {
      int id = add(u, v, 0, 0);
      Convex c = new Convex(price, count);
      convex.put(id, c);
      refresh(id, c);
      return id;
    }

    /** A convex edge's residual pair after its flow changed: the next unit's price, the last unit's refund. */
    private void refresh(int e, Convex c) {
      long total = c.end.length == 0 ? 0 : c.end[c.end.length - 1];
      if (c.flow < total) {
        int i = c.runOf(c.flow);
        cap[e] = c.end[i] - c.flow;
        cost[e] = c.price[i];
      } else {
        cap[e] = 0;
      }
      if (c.flow > 0) {
        int j = c.runOf(c.flow - 1);
        cap[e ^ 1] = c.flow - (j == 0 ? 0 : c.end[j - 1]);
        cost[e ^ 1] = -c.price[j];
      } else {
        cap[e ^ 1] = 0;
      }
    }

    long flowOn(int edge) {
      Convex c = convex.get(edge);
      return c != null ? c.flow : orig[edge] - cap[edge];
    }

    long run(int s, int t) {
      long total = 0;
      long[] dist = new long[nodes];
      int[] via = new int[nodes];
      boolean[] queued = new boolean[nodes];
      int[] queue = new int[nodes + 1];
      while (true) {
        Arrays.fill(dist, Long.MAX_VALUE);
        Arrays.fill(via, -1);
        dist[s] = 0;
        int qh = 0, qt = 0;
        queue[qt++] = s;
        queued[s] = true;
        while (qh != qt) {
          int u = queue[qh++];
          if (qh == queue.length) qh = 0;
          queued[u] = false;
          for (int e = head[u]; e >= 0; e = next[e]) {
            if (cap[e] <= 0) continue;
            long d = dist[u] + cost[e];
            int v = to[e];
            if (d < dist[v]) {
              dist[v] = d;
              via[v] = e;
              if (!queued[v]) {
                queued[v] = true;
                queue[qt++] = v;
                if (qt == queue.length) qt = 0;
              }
            }
          }
        }
        if (dist[t] == Long.MAX_VALUE) return total;
        long push = Long.MAX_VALUE;
        for (int v = t; v != s; v = to[via[v] ^ 1]) push = Math.min(push, cap[via[v]]);
        for (int v = t; v != s; v = to[via[v] ^ 1]) {
          int e = via[v];
          Convex c = convex.isEmpty() ? null : convex.get(e & ~1);
          if (c != null) {
            c.flow += (e & 1) == 0 ? push : -push;
            refresh(e & ~1, c);
            continue;
          }
          cap[e] -= push;
          cap[e ^ 1] += push;
        }
        total += push;
        augmentations++;
      }
    }
  }
}
