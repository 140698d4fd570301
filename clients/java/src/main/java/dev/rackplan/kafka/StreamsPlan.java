package dev.rackplan.kafka;

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
  /** proposed, or revoking (a handover's first phase: not applied, {@code RackplanTaskAssignor}). */
  public final String state;
  public final String clusterFingerprint;
  /** process id -> tasks, sorted by process id. */
  public final Map<String, Tasks> assignment;

  StreamsPlan(String key, String applicationId, long generation, String state, String fp, Map<String, Tasks> assignment) {
    this.key = key;
    this.applicationId = applicationId;
    this.generation = generation;
    this.state = state;
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
    Map<?, ?> v = ConsumerPlan.checkedValue(key, value, "streams_app", "application_id", app, "consumer_group");
    Map<?, ?> body = (Map<?, ?>) v.get("streams_app");
    if (!(body.get("assignment") instanceof Map))
      throw new ConsumerPlan.PlanException(key + ": streams_app.assignment must be an object");
    if (body.containsKey("probing_rebalance_needed") && !(body.get("probing_rebalance_needed") instanceof Boolean))
      throw new ConsumerPlan.PlanException(key + ": streams_app.probing_rebalance_needed must be a boolean");
    Map<String, Tasks> out = new TreeMap<>();
    for (Map.Entry<?, ?> e : ((Map<?, ?>) body.get("assignment")).entrySet()) {
      String where = key + ": streams_app.assignment[" + e.getKey() + "]";
      if (!(e.getValue() instanceof Map)) throw new ConsumerPlan.PlanException(where + " must be an object");
      Map<?, ?> t = (Map<?, ?>) e.getValue();
      out.put((String) e.getKey(),
          new Tasks(tasks(t.get("active"), where + ".active"), tasks(t.get("standby"), where + ".standby"),
              tasks(t.get("warmup"), where + ".warmup")));
    }
    return new StreamsPlan(key, app, (Long) v.get("generation"), ConsumerPlan.state(v),
        (String) v.get("cluster_fingerprint"), Collections.unmodifiableMap(out));
  }

  /**
   * Task ids {@code "<subtopology>_<partition>"}, both parts within an int (Kafka Streams' {@code
   * TaskId}): a plan whose ids Streams cannot parse is refused here, never at assignment.
   */
  private static List<String> tasks(Object raw, String where) throws ConsumerPlan.PlanException {
    if (!(raw instanceof List)) throw new ConsumerPlan.PlanException(where + " must be an array of task ids");
    List<String> out = new ArrayList<>();
    for (Object o : (List<?>) raw) {
      if (!(o instanceof String) || !TASK.matcher((String) o).matches())
        throw new ConsumerPlan.PlanException(where + ": " + ConsumerPlan.brief(o) + " is not a task id like \"0_1\"");
      String id = (String) o;
      int cut = id.indexOf('_');
      if (!fitsAnInt(id.substring(0, cut)) || !fitsAnInt(id.substring(cut + 1)))
        throw new ConsumerPlan.PlanException(
            where + ": task id " + ConsumerPlan.brief(o) + " has a sub-topology or partition beyond " + Integer.MAX_VALUE);
      out.add(id);
    }
    return Collections.unmodifiableList(out);
  }

  private static boolean fitsAnInt(String digits) {
    try {
      Integer.parseInt(digits);
      return true;
    } catch (NumberFormatException e) {
      return false;
    }
  }
}
