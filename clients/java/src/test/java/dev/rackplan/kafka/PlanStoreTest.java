package dev.rackplan.kafka;

import static dev.rackplan.kafka.Fixtures.tp;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class PlanStoreTest {
  static final Map<String, List<org.apache.kafka.common.TopicPartition>> A = Map.of("m", List.of(tp("t", 1), tp("t", 0)));

  @Test
  void decodesThePlanRecord() throws Exception {
    ConsumerPlan p = ConsumerPlan.decode("consumer/g", Fixtures.plan("g", 7, Fixtures.FP, A));
    assertEquals(7, p.generation);
    assertEquals(List.of(tp("t", 0), tp("t", 1)), p.assignment.get("m"));
    assertEquals("nearest-replica", p.fetchMode);
  }

  static String reason(String key, String value) {
    return assertThrows(ConsumerPlan.PlanException.class,
        () -> ConsumerPlan.decode(key, value.getBytes(StandardCharsets.UTF_8))).getMessage();
  }

  @Test
  void malformedRecordsNameTheField() {
    String good = new String(Fixtures.plan("g", 2, Fixtures.FP, A), StandardCharsets.UTF_8);
    assertTrue(reason("consumer/g", "{x").contains("not JSON"));
    assertTrue(reason("consumer/g", "[]").contains("JSON object"));
    assertTrue(reason("consumer/g", good.replace("\"schema\":1", "\"schema\":2")).contains("schema"));
    assertTrue(reason("consumer/g", good.replace("\"generation\":2", "\"generation\":0")).contains("generation"));
    assertTrue(reason("consumer/g", good.replace(Fixtures.FP, "abc")).contains("cluster_fingerprint"));
    assertTrue(reason("consumer/h", good).contains("does not match the key"));
    assertTrue(reason("consumer/g", good.replace("[\"t\",1]", "[\"t\",-1]")).contains("is not [topic, partition]"));
    assertTrue(reason("consumer/g", good.replace("\"proposed\"", "\"done\"")).contains("state"));
    assertTrue(reason("streams/g", good).contains("bad plan key"));
  }

  @Test
  void fencesGenerationsAndKeepsThemAcrossTombstones() {
    PlanStore s = new PlanStore();
    assertEquals(PlanStore.Outcome.APPLIED, s.apply("consumer/g", Fixtures.plan("g", 5, Fixtures.FP, A)));
    assertEquals(PlanStore.Outcome.STALE, s.apply("consumer/g", Fixtures.plan("g", 5, Fixtures.FP, Map.of())));
    assertEquals(PlanStore.Outcome.STALE, s.apply("consumer/g", Fixtures.plan("g", 4, Fixtures.FP, Map.of())));
    assertEquals(PlanStore.Outcome.MALFORMED, s.apply("consumer/g", "nope".getBytes(StandardCharsets.UTF_8)));
    assertEquals(5, s.latest("consumer/g").generation);
    assertEquals(A.keySet(), s.latest("consumer/g").assignment.keySet());
    assertEquals(PlanStore.Outcome.TOMBSTONE, s.apply("consumer/g", null));
    assertNull(s.latest("consumer/g"));
    assertEquals(PlanStore.Outcome.STALE, s.apply("consumer/g", Fixtures.plan("g", 5, Fixtures.FP, A)));
    assertEquals(PlanStore.Outcome.APPLIED, s.apply("consumer/g", Fixtures.plan("g", 6, Fixtures.FP, A)));
    assertEquals(PlanStore.Outcome.MALFORMED, s.apply("streams/app", new byte[0]));
    assertEquals(PlanStore.Outcome.NOT_A_GROUP, s.apply("leader", new byte[0]));
    assertEquals(5, s.ignored().size());
    assertTrue(s.ignored().get(0).contains("generation 5 is not above 5"));
  }
}
