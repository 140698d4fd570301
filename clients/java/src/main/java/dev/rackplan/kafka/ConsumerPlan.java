package dev.rackplan.kafka;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Pattern;
import org.apache.kafka.common.TopicPartition;

/**
 * A consumer group's plan record (docs/plan-schema.json), decoded and checked.
 *
 * <p>{@link #decode} applies the rules of the agent's own {@code agent.plans.decode_record}, plus
 * what a follower needs before acting on a record: the cluster fingerprint is 64 hex digits and the
 * state is one the schema names. Anything else is a {@link PlanException} naming the field.
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
    Object state = v.get("state");
    if (state == null) state = PROPOSED;
    if (!PROPOSED.equals(state) && !REVOKING.equals(state))
      throw new PlanException(key + ": state must be proposed or revoking, not " + state);
    Object fp = v.get("cluster_fingerprint");
    if (!(fp instanceof String) || !HEX64.matcher((String) fp).matches())
      throw new PlanException(key + ": cluster_fingerprint must be 64 hex digits");
    if (!(v.get("stats") instanceof Map)) throw new PlanException(key + ": missing consumer_group or stats");
    Object body = v.get("consumer_group");
    if (!(body instanceof Map)) throw new PlanException(key + ": missing consumer_group or stats");
    Map<?, ?> cg = (Map<?, ?>) body;
    if (!group.equals(cg.get("group_id")))
      throw new PlanException(
          key + ": consumer_group.group_id " + cg.get("group_id") + " does not match the key");
    Map<String, List<TopicPartition>> assignment =
        partitions(cg.get("assignment"), key + ": consumer_group.assignment", true);
    partitions(cg.get("revoked"), key + ": consumer_group.revoked", false);
    String fetchMode = "nearest-replica";
    Object loc = v.get("locality");
    if (loc instanceof Map && ((Map<?, ?>) loc).get("fetch_mode") instanceof String)
      fetchMode = (String) ((Map<?, ?>) loc).get("fetch_mode");
    return new ConsumerPlan(key, group, (Long) gen, (String) state, (String) fp, fetchMode, assignment);
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
