package dev.rackplan.kafka;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Pattern;

/**
 * A Kafka Streams app's plan record (docs/plan-schema.json, {@code streams_app}), decoded and
 * checked: process id -> active, standby and warm-up task ids ({@code "<subtopology>_<partition>"}).
 */
public final class StreamsPlan {
  private static final Pattern HEX64 = Pattern.compile("^[0-9a-f]{64}$");
  private static final Pattern TASK = Pattern.compile("^[0-9]+_[0-9]+$");

  /** One client's tasks in the plan. */
  public static final class Tasks {
    public final List<String> active;
    public final List<String> standby;
    public final List<String> warmup;

    Tasks(List<String> active, List<String> standby, List<String> warmup) {
      this.active = active;
      this.standby = standby;
      this.warmup = warmup;
    }
  }

  public final String key;
  public final String applicationId;
  public final long generation;
  public final String clusterFingerprint;
  /** process id -> tasks, sorted by process id. */
  public final Map<String, Tasks> assignment;

  StreamsPlan(String key, String applicationId, long generation, String fp, Map<String, Tasks> assignment) {
    this.key = key;
    this.applicationId = applicationId;
    this.generation = generation;
    this.clusterFingerprint = fp;
    this.assignment = assignment;
  }

  public static String key(String applicationId) {
    return "streams/" + applicationId;
  }

  public static String appOf(String key) {
    if (key == null || !key.startsWith("streams/") || key.length() == "streams/".length()) return null;
    return key.substring("streams/".length());
  }

  public static StreamsPlan decode(String key, byte[] value) throws ConsumerPlan.PlanException {
    String app = appOf(key);
    if (app == null) throw new ConsumerPlan.PlanException("bad plan key " + key + ": expected streams/<app>");
    Object doc;
    try {
      doc = Json.parse(new String(value, StandardCharsets.UTF_8));
    } catch (Json.ParseException e) {
      throw new ConsumerPlan.PlanException(key + ": value is not JSON: " + e.getMessage());
    }
    if (!(doc instanceof Map)) throw new ConsumerPlan.PlanException(key + ": value must be a JSON object");
    Map<?, ?> v = (Map<?, ?>) doc;
    if (!Long.valueOf(1).equals(v.get("schema")))
      throw new ConsumerPlan.PlanException(key + ": unsupported schema " + v.get("schema"));
    Object gen = v.get("generation");
    if (!(gen instanceof Long) || (Long) gen < 1)
      throw new ConsumerPlan.PlanException(key + ": generation must be a positive integer");
    Object fp = v.get("cluster_fingerprint");
    if (!(fp instanceof String) || !HEX64.matcher((String) fp).matches())
      throw new ConsumerPlan.PlanException(key + ": cluster_fingerprint must be 64 hex digits");
    if (!(v.get("stats") instanceof Map) || !(v.get("streams_app") instanceof Map))
      throw new ConsumerPlan.PlanException(key + ": missing streams_app or stats");
    Map<?, ?> body = (Map<?, ?>) v.get("streams_app");
    if (!app.equals(body.get("application_id")))
      throw new ConsumerPlan.PlanException(
          key + ": streams_app.application_id " + body.get("application_id") + " does not match the key");
    if (!(body.get("assignment") instanceof Map))
      throw new ConsumerPlan.PlanException(key + ": streams_app.assignment must be an object");
    Map<String, Tasks> out = new TreeMap<>();
    for (Map.Entry<?, ?> e : ((Map<?, ?>) body.get("assignment")).entrySet()) {
      String where = key + ": streams_app.assignment[" + e.getKey() + "]";
      if (!(e.getValue() instanceof Map)) throw new ConsumerPlan.PlanException(where + " must be an object");
      Map<?, ?> t = (Map<?, ?>) e.getValue();
      out.put((String) e.getKey(),
          new Tasks(tasks(t.get("active"), where + ".active"), tasks(t.get("standby"), where + ".standby"),
              tasks(t.get("warmup"), where + ".warmup")));
    }
    return new StreamsPlan(key, app, (Long) gen, (String) fp, Collections.unmodifiableMap(out));
  }

  private static List<String> tasks(Object raw, String where) throws ConsumerPlan.PlanException {
    if (!(raw instanceof List)) throw new ConsumerPlan.PlanException(where + " must be an array of task ids");
    List<String> out = new ArrayList<>();
    for (Object o : (List<?>) raw) {
      if (!(o instanceof String) || !TASK.matcher((String) o).matches())
        throw new ConsumerPlan.PlanException(where + ": " + Json.write(o) + " is not a task id like \"0_1\"");
      out.add((String) o);
    }
    return Collections.unmodifiableList(out);
  }
}
