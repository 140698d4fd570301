package dev.rackplan.kafka;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The newest valid plan of every consumer group key read from the plan topic, with generation
 * fencing: a record whose generation is not above every generation seen before for its key (a
 * deposed agent's late write, a replay out of order) is ignored with a logged reason, as is a
 * malformed record. A tombstone clears the key but keeps its highest generation. Thread-safe.
 */
public final class PlanStore {
  private static final Logger LOG = LoggerFactory.getLogger(PlanStore.class);

  /** What one record did. */
  public enum Outcome {
    APPLIED,
    TOMBSTONE,
    STALE,
    MALFORMED,
    NOT_A_GROUP,
    /** Refused: the secret is set and the record lacks the agent's valid {@link RecordMac}. */
    UNAUTHENTICATED
  }

  private final Map<String, ConsumerPlan> latest = new HashMap<>();
  private final Map<String, StreamsPlan> latestStreams = new HashMap<>();
  private final Map<String, Long> maxGeneration = new HashMap<>();
  private final List<String> ignored = new ArrayList<>();
  /** Every record ignored so far ({@link #ignored} keeps only the last 100 reasons). */
  private long ignoredCount;
  private long applied;
  private long unauthenticated;

  /**
   * One record read from {@code topic}: with a {@code secret} (rackplan.registration.secret.file) it
   * counts only if {@code mac} (its {@value RecordMac#HEADER} header) is the agent's; a forged plan or
   * tombstone is refused, logged and counted, whatever other headers it copies. Without a secret the
   * record is unauthenticated, as {@link #apply(String, byte[])}.
   */
  public synchronized Outcome apply(String topic, String key, byte[] value, byte[] mac, byte[] secret) {
    if (ConsumerPlan.groupOf(key) == null && StreamsPlan.appOf(key) == null) return Outcome.NOT_A_GROUP;
    byte[] keyBytes = key == null ? null : key.getBytes(java.nio.charset.StandardCharsets.UTF_8);
    String refused = RecordMac.refusal(secret, topic, keyBytes, value, mac);
    if (refused != null) {
      unauthenticated++;
      ignore("plan record refused (" + refused + "): " + key + (value == null ? " (tombstone)" : "")
          + " has no valid " + RecordMac.HEADER + " header: not written by the agent");
      return Outcome.UNAUTHENTICATED;
    }
    return apply(key, value);
  }

  /** Records refused for a missing or wrong MAC. */
  public synchronized long unauthenticatedCount() {
    return unauthenticated;
  }

  public synchronized Outcome apply(String key, byte[] value) {
    boolean streams = StreamsPlan.appOf(key) != null;
    if (ConsumerPlan.groupOf(key) == null && !streams) return Outcome.NOT_A_GROUP; // junk key
    if (value == null) {
      latest.remove(key);
      latestStreams.remove(key);
      return Outcome.TOMBSTONE;
    }
    ConsumerPlan plan = null;
    StreamsPlan splan = null;
    try {
      if (streams) splan = StreamsPlan.decode(key, value);
      else plan = ConsumerPlan.decode(key, value);
    } catch (ConsumerPlan.PlanException e) {
      ignore("malformed plan record ignored: " + e.getMessage());
      return Outcome.MALFORMED;
    }
    long generation = streams ? splan.generation : plan.generation;
    long max = maxGeneration.getOrDefault(key, 0L);
    if (generation <= max) {
      ignore("stale plan record ignored: " + key + " generation " + generation
          + " is not above " + max + " (generation fencing)");
      return Outcome.STALE;
    }
    maxGeneration.put(key, generation);
    if (streams) latestStreams.put(key, splan);
    else latest.put(key, plan);
    applied++;
    return Outcome.APPLIED;
  }

  public synchronized StreamsPlan latestStreams(String key) {
    return latestStreams.get(key);
  }

  private void ignore(String reason) {
    LOG.warn(reason);
    ignoredCount++;
    ignored.add(reason);
    if (ignored.size() > 100) ignored.remove(0);
  }

  public synchronized ConsumerPlan latest(String key) {
    return latest.get(key);
  }

  /** Every live plan (for the server-side assignor, which does not know its group's id). */
  public synchronized List<ConsumerPlan> all() {
    return new ArrayList<>(latest.values());
  }

  /** The highest generation seen for a key (0: none). */
  public synchronized long maxGeneration(String key) {
    return maxGeneration.getOrDefault(key, 0L);
  }

  /** Reasons of the most recently ignored records (newest last, at most 100). */
  public synchronized List<String> ignored() {
    return new ArrayList<>(ignored);
  }

  /** Records ignored so far (malformed, stale, unauthenticated), all of them. */
  public synchronized long ignoredCount() {
    return ignoredCount;
  }

  public synchronized long appliedCount() {
    return applied;
  }
}
