package dev.rackplan.kafka;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.kafka.common.TopicPartition;

/** Plan record values as the agent writes them. */
final class Fixtures {
  private Fixtures() {}

  static final String FP = "0".repeat(64);

  static byte[] plan(String group, long generation, String fingerprint, Map<String, List<TopicPartition>> assignment) {
    return plan(group, generation, fingerprint, assignment, "proposed");
  }

  static byte[] plan(
      String group, long generation, String fingerprint, Map<String, List<TopicPartition>> assignment, String state) {
    Map<String, Object> a = new LinkedHashMap<>();
    for (Map.Entry<String, List<TopicPartition>> e : assignment.entrySet()) {
      List<Object> tps = new ArrayList<>();
      for (TopicPartition tp : e.getValue()) tps.add(List.of(tp.topic(), (long) tp.partition()));
      a.put(e.getKey(), tps);
    }
    Map<String, Object> v = new LinkedHashMap<>();
    v.put("schema", 1L);
    v.put("generation", generation);
    v.put("state", state);
    v.put("cluster_fingerprint", fingerprint);
    v.put("reason", "test");
    v.put("created_at", "2026-11-24T00:00:00Z");
    v.put("moved", 0L);
    Map<String, Object> locality = new LinkedHashMap<>(); // an order the tests that edit the record's text can rely on
    locality.put("fetch_mode", "nearest-replica");
    locality.put("after", Map.of("cross_rack", 0L, "total", 0L, "fraction", 0.0));
    v.put("locality", locality);
    v.put("consumer_group", Map.of("group_id", group, "assignment", a, "revoked", Map.of()));
    v.put("stats", Map.of());
    return Json.write(v).getBytes(StandardCharsets.UTF_8);
  }

  static TopicPartition tp(String t, int p) {
    return new TopicPartition(t, p);
  }
}
