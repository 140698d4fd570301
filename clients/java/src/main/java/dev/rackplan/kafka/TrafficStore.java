package dev.rackplan.kafka;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The newest traffic record of every topic read from the agent's traffic topic (docs/java.md,
 * "Traffic"): key {@code traffic/<topic>}, value {@code {"schema": 1, "topic": T, "bytes_per_s":
 * [one per partition], "window_s": W, "measured_at_ms": M}}. {@code assign} reads it from memory only.
 *
 * <p>A record counts only if it is the agent's ({@link RecordMac}, when the secret is set), well
 * formed, and not older ({@code measured_at_ms}) than the one held; a tombstone forgets the topic. A
 * record is used while younger than {@code rackplan.traffic.max.age.ms} by its Kafka timestamp (the
 * topic is LogAppendTime: the brokers' clock), by default three of its own windows (the agent publishes
 * once a window), and only for a topic with as many partitions as it has figures. Thread-safe.
 */
public final class TrafficStore {
  private static final Logger LOG = LoggerFactory.getLogger(TrafficStore.class);

  static final String PREFIX = "traffic/";

  /** What one record did. */
  public enum Outcome {
    APPLIED,
    TOMBSTONE,
    STALE,
    MALFORMED,
    /** Another kind of key: left alone (later record kinds). */
    NOT_TRAFFIC,
    UNAUTHENTICATED
  }

  /** One topic's figures: bytes/s per partition, the window they were measured over, when. */
  record Entry(double[] bytesPerS, long windowMs, long measuredAtMs, long timestampMs) {}

  private final Map<String, Entry> latest = new HashMap<>();
  private final long maxAgeMs;
  private final List<String> ignored = new ArrayList<>();
  private long unauthenticated;

  /** @param maxAgeMs a record's age after which it is not used; 0: three of its windows */
  public TrafficStore(long maxAgeMs) {
    this.maxAgeMs = maxAgeMs;
  }

  /**
   * One record read from {@code topic} with Kafka timestamp {@code timestampMs}; with a {@code secret}
   * it counts only with the agent's {@code mac} (its {@value RecordMac#HEADER} header).
   */
  public synchronized Outcome apply(String topic, String key, byte[] value, byte[] mac, byte[] secret, long timestampMs) {
    if (key == null || !key.startsWith(PREFIX) || key.length() == PREFIX.length()) return Outcome.NOT_TRAFFIC;
    String name = key.substring(PREFIX.length());
    String refused = RecordMac.refusal(secret, topic, key.getBytes(StandardCharsets.UTF_8), value, mac);
    if (refused != null) {
      unauthenticated++;
      ignore("traffic record refused (" + refused + "): " + key + " has no valid " + RecordMac.HEADER + " header");
      return Outcome.UNAUTHENTICATED;
    }
    if (value == null) {
      latest.remove(name);
      return Outcome.TOMBSTONE;
    }
    Entry e;
    try {
      e = decode(name, value, timestampMs);
    } catch (IllegalArgumentException bad) {
      ignore("malformed traffic record ignored: " + key + ": " + bad.getMessage());
      return Outcome.MALFORMED;
    }
    Entry held = latest.get(name);
    if (held != null && e.measuredAtMs < held.measuredAtMs) {
      ignore("stale traffic record ignored: " + key + " measured at " + e.measuredAtMs + ", before " + held.measuredAtMs);
      return Outcome.STALE;
    }
    latest.put(name, e);
    return Outcome.APPLIED;
  }

  static Entry decode(String topic, byte[] value, long timestampMs) {
    Object doc;
    try {
      doc = Json.parse(new String(value, StandardCharsets.UTF_8));
    } catch (Json.ParseException e) {
      throw new IllegalArgumentException("value is not JSON: " + e.getMessage());
    }
    if (!(doc instanceof Map<?, ?> v)) throw new IllegalArgumentException("value must be a JSON object");
    if (!Long.valueOf(1).equals(v.get("schema"))) throw new IllegalArgumentException("unsupported schema " + v.get("schema"));
    if (!topic.equals(v.get("topic"))) throw new IllegalArgumentException("topic " + v.get("topic") + " does not match the key");
    if (!(v.get("bytes_per_s") instanceof List<?> rows)) throw new IllegalArgumentException("bytes_per_s must be a list");
    double[] rates = new double[rows.size()];
    for (int i = 0; i < rates.length; i++) {
      double x = rows.get(i) instanceof Number n ? n.doubleValue() : Double.NaN;
      if (!Double.isFinite(x) || x < 0) throw new IllegalArgumentException("bytes_per_s[" + i + "] must be a finite number >= 0");
      rates[i] = x;
    }
    double window = v.get("window_s") instanceof Number n ? n.doubleValue() : Double.NaN;
    if (!Double.isFinite(window) || window <= 0) throw new IllegalArgumentException("window_s must be a positive number");
    if (!(v.get("measured_at_ms") instanceof Long at)) throw new IllegalArgumentException("measured_at_ms must be an integer");
    return new Entry(rates, Math.round(window * 1000), at, timestampMs);
  }

  /** A topic's bytes/s per partition, or null: none, stale at {@code nowMs}, or another partition count. */
  public synchronized double[] weights(String topic, int numPartitions, long nowMs) {
    Entry e = topic == null ? null : latest.get(topic);
    if (e == null || e.bytesPerS.length != numPartitions) return null;
    // three windows, saturated: a window above about 3e15 s overflowed to a negative age limit (never fresh)
    long limit = maxAgeMs > 0 ? maxAgeMs : Math.min(e.windowMs, Long.MAX_VALUE / 3) * 3;
    return nowMs - e.timestampMs > limit ? null : e.bytesPerS.clone();
  }

  /** Topics held (fresh or not). */
  public synchronized int size() {
    return latest.size();
  }

  public synchronized long unauthenticatedCount() {
    return unauthenticated;
  }

  /** Reasons of the most recently ignored records (newest last, at most 100). */
  public synchronized List<String> ignored() {
    return new ArrayList<>(ignored);
  }

  private void ignore(String reason) {
    LOG.warn(reason);
    ignored.add(reason);
    if (ignored.size() > 100) ignored.remove(0);
  }
}
