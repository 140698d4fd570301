package dev.rackplan.kafka;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Pattern;
import org.apache.kafka.common.TopicPartition;

/**
 * A consumer group's plan record (docs/plan-schema.json), decoded and checked.
 *
 * <p>{@link #decode} applies the rules of the agent's own {@code decode_record} to the fields a
 * follower reads ({@link #checkedValue}), plus what a follower needs before acting on a record: the
 * cluster fingerprint is 64 hex digits. Anything else is a {@link PlanException} naming the field.
 */
public final class ConsumerPlan {
  public static final String PROPOSED = "proposed";
  public static final String REVOKING = "revoking";
  private static final Pattern HEX64 = Pattern.compile("^[0-9a-f]{64}$");

  public final String key;
  public final String groupId;
  public final long generation;
  public final String state;
  public final String clusterFingerprint;
  public final String fetchMode;
  /** member id -> partitions, each list sorted; the map sorted by member id. */
  public final Map<String, List<TopicPartition>> assignment;

  ConsumerPlan(
      String key,
      String groupId,
      long generation,
      String state,
      String clusterFingerprint,
      String fetchMode,
      Map<String, List<TopicPartition>> assignment) {
    this.key = key;
    this.groupId = groupId;
    this.generation = generation;
    this.state = state;
    this.clusterFingerprint = clusterFingerprint;
    this.fetchMode = fetchMode;
    this.assignment = assignment;
  }

  /** A record value could not be used; the message names the field. */
  public static final class PlanException extends Exception {
    public PlanException(String msg) {
      super(msg);
    }
  }

  public static String key(String groupId) {
    return "consumer/" + groupId;
  }

  /** The group id of a plan key, or null when the key is not a consumer group's. */
  public static String groupOf(String key) {
    if (key == null || !key.startsWith("consumer/") || key.length() == "consumer/".length()) return null;
    return key.substring("consumer/".length());
  }

  public static ConsumerPlan decode(String key, byte[] value) throws PlanException {
    String group = groupOf(key);
    if (group == null) throw new PlanException("bad plan key " + key + ": expected consumer/<group>");
    Map<?, ?> v = checkedValue(key, value, "consumer_group", "group_id", group, "streams_app");
    Map<?, ?> cg = (Map<?, ?>) v.get("consumer_group");
    Map<String, List<TopicPartition>> assignment =
        partitions(cg.get("assignment"), key + ": consumer_group.assignment", true);
    ownedOnce(assignment, key + ": consumer_group.assignment");
    partitions(cg.get("revoked"), key + ": consumer_group.revoked", false);
    return new ConsumerPlan(key, group, (Long) v.get("generation"), state(v), (String) v.get("cluster_fingerprint"),
        fetchMode(v), assignment);
  }

  /** The largest generation a plan may have (plan-schema.json; 2^53-1, what every JSON reader keeps exact). */
  static final long MAX_GENERATION = 9_007_199_254_740_991L;

  /**
   * The value of plan key {@code key} as a JSON object whose envelope has docs/plan-schema.json's shape,
   * as the agent's {@code decode_record} checks it: schema 1, a generation in [1, 2^53-1], the body
   * (an object with {@code nameField} equal to {@code name}) and {@code stats}, no {@code otherBody}
   * (a plan is of one kind), {@code state} proposed or revoking and {@code locality.fetch_mode}
   * nearest-replica or leader when present (missing: their defaults), and a {@code
   * cluster_fingerprint} of 64 hex digits, which a follower needs before it acts. Numbers are finite
   * ({@link Json}). Anything else is a {@link PlanException} naming the field.
   */
  static Map<?, ?> checkedValue(String key, byte[] value, String body, String nameField, String name, String otherBody)
      throws PlanException {
    Object doc;
    try {
      doc = Json.parse(new String(value, StandardCharsets.UTF_8));
    } catch (Json.ParseException e) {
      throw new PlanException(key + ": value is not JSON: " + e.getMessage());
    }
    if (!(doc instanceof Map)) throw new PlanException(key + ": value must be a JSON object");
    Map<?, ?> v = (Map<?, ?>) doc;
    if (!Long.valueOf(1).equals(v.get("schema")))
      throw new PlanException(key + ": unsupported schema " + v.get("schema"));
    Object gen = v.get("generation");
    if (!(gen instanceof Long) || (Long) gen < 1)
      throw new PlanException(key + ": generation must be a positive integer");
    if ((Long) gen > MAX_GENERATION)
      throw new PlanException(key + ": generation " + gen + " exceeds 2**53-1, the bound on counters");
    if (v.containsKey("state") && !PROPOSED.equals(v.get("state")) && !REVOKING.equals(v.get("state")))
      throw new PlanException(key + ": state must be proposed or revoking, not " + brief(v.get("state")));
    Object fp = v.get("cluster_fingerprint");
    if (!(fp instanceof String) || !HEX64.matcher((String) fp).matches())
      throw new PlanException(key + ": cluster_fingerprint must be 64 hex digits");
    if (!(v.get(body) instanceof Map) || !(v.get("stats") instanceof Map))
      throw new PlanException(key + ": missing " + body + " or stats");
    Object named = ((Map<?, ?>) v.get(body)).get(nameField);
    if (!name.equals(named))
      throw new PlanException(key + ": " + body + "." + nameField + " " + brief(named) + " does not match the key");
    if (v.containsKey(otherBody)) throw new PlanException(key + ": a " + body + " plan carries " + otherBody + " too");
    if (v.containsKey("locality")) {
      if (!(v.get("locality") instanceof Map)) throw new PlanException(key + ": locality must be an object");
      Map<?, ?> loc = (Map<?, ?>) v.get("locality");
      if (loc.containsKey("fetch_mode") && !"nearest-replica".equals(loc.get("fetch_mode"))
          && !"leader".equals(loc.get("fetch_mode")))
        throw new PlanException(key + ": locality.fetch_mode must be nearest-replica or leader, not "
            + brief(loc.get("fetch_mode")));
    }
    return v;
  }

  /** A JSON value in a message, at most 40 characters of it. */
  static String brief(Object v) {
    String w = Json.write(v);
    return w.length() > 40 ? w.substring(0, 40) + "..." : w;
  }

  /** The state of a value {@link #checkedValue} passed (missing: proposed). */
  static String state(Map<?, ?> v) {
    return v.containsKey("state") ? (String) v.get("state") : PROPOSED;
  }

  /** The fetch mode of a value {@link #checkedValue} passed (missing: nearest-replica). */
  static String fetchMode(Map<?, ?> v) {
    Object loc = v.get("locality");
    return loc instanceof Map && ((Map<?, ?>) loc).containsKey("fetch_mode")
        ? (String) ((Map<?, ?>) loc).get("fetch_mode") : "nearest-replica";
  }

  /**
   * No partition is ever owned twice (Kafka's rule, and the agent's decoder's): an assignment giving one
   * partition to two members is no plan. Only the assignment: {@code revoked} names a partition's old holder.
   */
  static void ownedOnce(Map<String, List<TopicPartition>> assignment, String where) throws PlanException {
    Map<TopicPartition, String> owner = new HashMap<>();
    for (Map.Entry<String, List<TopicPartition>> e : assignment.entrySet())
      for (TopicPartition tp : e.getValue()) {
        String other = owner.putIfAbsent(tp, e.getKey());
        if (other != null && !other.equals(e.getKey()))
          throw new PlanException(where + ": partition " + tp + " is assigned to both " + other + " and " + e.getKey());
      }
  }

  private static Map<String, List<TopicPartition>> partitions(Object raw, String where, boolean required)
      throws PlanException {
    Map<String, List<TopicPartition>> out = new TreeMap<>();
    if (raw == null && !required) return out;
    if (!(raw instanceof Map)) throw new PlanException(where + " must be an object");
    for (Map.Entry<?, ?> e : ((Map<?, ?>) raw).entrySet()) {
      if (!(e.getValue() instanceof List)) throw new PlanException(where + "[" + e.getKey() + "] must be an array");
      List<TopicPartition> tps = new ArrayList<>();
      for (Object tp : (List<?>) e.getValue()) {
        if (!(tp instanceof List)
            || ((List<?>) tp).size() != 2
            || !(((List<?>) tp).get(0) instanceof String)
            || !(((List<?>) tp).get(1) instanceof Long)
            || (Long) ((List<?>) tp).get(1) < 0
            || (Long) ((List<?>) tp).get(1) > Integer.MAX_VALUE)
          throw new PlanException(where + "[" + e.getKey() + "]: " + Json.write(tp) + " is not [topic, partition]");
        tps.add(new TopicPartition((String) ((List<?>) tp).get(0), ((Long) ((List<?>) tp).get(1)).intValue()));
      }
      tps.sort(Plans.TP_ORDER);
      out.put((String) e.getKey(), Collections.unmodifiableList(tps));
    }
    return Collections.unmodifiableMap(out);
  }

  @Override
  public String toString() {
    return key + "@" + generation + "(" + state + ")";
  }
}
