package dev.rackplan.kafka;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.common.TopicPartition;

/** Pure checks shared by the client-side and server-side assignors: does a plan fit the live group. */
public final class Plans {
  private Plans() {}

  public static final Comparator<TopicPartition> TP_ORDER =
      Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition);

  /** One partition's replica racks (sorted, racks of replicas without a rack left out) and leader rack. */
  public static final class PartitionRacks {
    final List<String> replicaRacks;
    final String leaderRack;
    final boolean leaderKnown;

    public PartitionRacks(Collection<String> replicaRacks, String leaderRack, boolean leaderKnown) {
      this.replicaRacks = new ArrayList<>(new TreeSet<>(replicaRacks));
      this.leaderRack = leaderRack;
      this.leaderKnown = leaderKnown;
    }
  }

  /**
   * The agent's {@code scope_fingerprint}: sha256 of the canonical JSON {topic: [racks per partition]}
   * (nearest-replica) or {topic: [[racks, leader rack] per partition]} (leader); a topic without
   * metadata is null.
   */
  public static String fingerprint(Map<String, List<PartitionRacks>> topics, String fetchMode) {
    Map<String, Object> doc = new TreeMap<>();
    for (Map.Entry<String, List<PartitionRacks>> e : topics.entrySet()) {
      if (e.getValue() == null) {
        doc.put(e.getKey(), null);
        continue;
      }
      List<Object> rows = new ArrayList<>();
      for (PartitionRacks p : e.getValue()) {
        if ("leader".equals(fetchMode)) {
          List<Object> row = new ArrayList<>();
          row.add(p.replicaRacks);
          row.add(p.leaderKnown ? p.leaderRack : null);
          rows.add(row);
        } else {
          rows.add(p.replicaRacks);
        }
      }
      doc.put(e.getKey(), rows);
    }
    return sha256(Json.canonical(doc));
  }

  static String sha256(String text) {
    try {
      byte[] d = MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8));
      StringBuilder b = new StringBuilder();
      for (byte x : d) b.append(String.format("%02x", x & 0xff));
      return b.toString();
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * Why ``plan`` does not fit the live group, or null when it does.
   *
   * @param members stable member id -> subscribed topics (the live group)
   * @param partitionCounts topic -> partition count, for every subscribed topic
   * @param liveFingerprint the fingerprint of the live metadata in the plan's fetch mode (null: not
   *     computable, not checked)
   */
  public static String mismatch(
      ConsumerPlan plan,
      Map<String, Set<String>> members,
      Map<String, Integer> partitionCounts,
      String liveFingerprint) {
    if (plan == null) return "no plan for the group";
    if (!ConsumerPlan.PROPOSED.equals(plan.state))
      return "plan generation " + plan.generation + " is in state " + plan.state;
    if (!plan.assignment.keySet().equals(members.keySet()))
      return "plan generation " + plan.generation + " members " + plan.assignment.keySet()
          + " differ from the live members " + new TreeSet<>(members.keySet());
    Map<TopicPartition, String> owner = new HashMap<>();
    Set<String> planTopics = new HashSet<>();
    for (Map.Entry<String, List<TopicPartition>> e : plan.assignment.entrySet()) {
      Set<String> subscribed = members.get(e.getKey());
      for (TopicPartition tp : e.getValue()) {
        if (!subscribed.contains(tp.topic()))
          return "plan gives " + tp + " to " + e.getKey() + ", which is not subscribed to " + tp.topic();
        Integer n = partitionCounts.get(tp.topic());
        if (n == null || tp.partition() >= n)
          return "plan names " + tp + ", which the live metadata does not have";
        if (owner.put(tp, e.getKey()) != null) return "plan gives " + tp + " twice";
        planTopics.add(tp.topic());
      }
    }
    int total = 0;
    for (Map.Entry<String, Integer> e : partitionCounts.entrySet()) total += e.getValue();
    if (owner.size() != total)
      return "plan assigns " + owner.size() + " partitions, the live subscription has " + total
          + " (topics " + new TreeSet<>(planTopics) + " vs " + new TreeSet<>(partitionCounts.keySet()) + ")";
    if (liveFingerprint != null && !liveFingerprint.equals(plan.clusterFingerprint))
      return "plan generation " + plan.generation
          + " was computed for other replica racks (cluster fingerprint differs): stale";
    return null;
  }

  /**
   * Cooperative rules over a plan's target: a partition that another member still owns (or that
   * more than one member claims) is withheld this round; its owner loses it now and it is given
   * out in the follow-up rebalance. Returns member -> partitions of this round.
   */
  public static Map<String, List<TopicPartition>> cooperative(
      Map<String, List<TopicPartition>> target, Map<String, List<TopicPartition>> owned) {
    Map<TopicPartition, Set<String>> claimedBy = new HashMap<>();
    for (Map.Entry<String, List<TopicPartition>> e : owned.entrySet())
      for (TopicPartition tp : e.getValue()) claimedBy.computeIfAbsent(tp, k -> new HashSet<>()).add(e.getKey());
    Map<String, List<TopicPartition>> out = new TreeMap<>();
    for (Map.Entry<String, List<TopicPartition>> e : target.entrySet()) {
      List<TopicPartition> now = new ArrayList<>();
      for (TopicPartition tp : e.getValue()) {
        Set<String> claim = claimedBy.get(tp);
        boolean free = claim == null || (claim.size() == 1 && claim.contains(e.getKey()));
        if (free) now.add(tp);
      }
      out.put(e.getKey(), now);
    }
    return out;
  }
}
