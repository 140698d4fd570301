package dev.rackplan.kafka;

import static dev.rackplan.kafka.Fixtures.tp;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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

  /**
   * The schema's generation maximum is 2^53-1 (the agent's decoder refuses more, "out_of_range"): a
   * forged 2^63-1 is refused, not adopted, so it cannot fence the agent's next real plan.
   */
  @Test
  void aGenerationAboveTwoToThe53MinusOneIsRefusedAndFencesNothing() {
    PlanStore s = new PlanStore();
    String good = new String(Fixtures.plan("g", 2, Fixtures.FP, A), StandardCharsets.UTF_8);
    assertEquals(PlanStore.Outcome.MALFORMED, s.apply("consumer/g",
        good.replace("\"generation\":2", "\"generation\":9223372036854775807").getBytes(StandardCharsets.UTF_8)));
    assertEquals(PlanStore.Outcome.MALFORMED, s.apply("consumer/g",
        good.replace("\"generation\":2", "\"generation\":9007199254740992").getBytes(StandardCharsets.UTF_8)));
    assertTrue(s.ignored().get(0).contains("generation"), s.ignored().get(0));
    assertEquals(PlanStore.Outcome.APPLIED, s.apply("consumer/g", Fixtures.plan("g", 8, Fixtures.FP, A)));
    assertEquals(PlanStore.Outcome.APPLIED, s.apply("consumer/g", Fixtures.plan("g", 9007199254740991L, Fixtures.FP, A)));
  }

  /** The schema's oneOf (and the agent's decoder): a consumer plan that carries streams_app too is no plan. */
  @Test
  void aConsumerPlanCarryingStreamsAppIsRefused() {
    String good = new String(Fixtures.plan("g", 3, Fixtures.FP, A), StandardCharsets.UTF_8);
    assertTrue(reason("consumer/g", good.replace("\"stats\":{}",
        "\"stats\":{},\"streams_app\":{\"application_id\":\"g\",\"assignment\":{}}")).contains("streams_app"));
  }

  /** No partition owned twice: a plan giving one to two members is refused, naming it (the agent's decoder too). */
  @Test
  void aPartitionAssignedToTwoMembersIsRefusedNamingIt() throws Exception {
    Map<String, List<org.apache.kafka.common.TopicPartition>> twice = Map.of("m1", List.of(tp("t", 0), tp("t", 1)), "m2", List.of(tp("t", 1)));
    String doubled = new String(Fixtures.plan("g", 3, Fixtures.FP, twice), StandardCharsets.UTF_8);
    assertTrue(reason("consumer/g", doubled).contains("partition t-1 is assigned to both"), reason("consumer/g", doubled));
    Map<String, List<org.apache.kafka.common.TopicPartition>> once = Map.of("m1", List.of(tp("t", 0)), "m2", List.of(tp("t", 1)));
    assertEquals(2, ConsumerPlan.decode("consumer/g", Fixtures.plan("g", 3, Fixtures.FP, once)).assignment.size());
  }

  /**
   * locality.fetch_mode, as the agent's decoder reads it: nearest-replica or leader when present (a string
   * of another value, or no string, is refused), nearest-replica when missing; locality itself an object.
   */
  @Test
  void fetchModeIsTheSchemasOrTheDefault() throws Exception {
    String good = new String(Fixtures.plan("g", 3, Fixtures.FP, A), StandardCharsets.UTF_8);
    String mode = "\"fetch_mode\":\"nearest-replica\"";
    assertTrue(reason("consumer/g", good.replace(mode, "\"fetch_mode\":\"bogus\"")).contains("locality.fetch_mode"));
    assertTrue(reason("consumer/g", good.replace(mode, "\"fetch_mode\":7")).contains("locality.fetch_mode"));
    assertTrue(reason("consumer/g", good.replace(mode, "\"fetch_mode\":null")).contains("locality.fetch_mode"));
    assertTrue(reason("consumer/g", good.replaceAll("\"locality\":\\{.*?\\}\\},", "\"locality\":[],"))
        .contains("locality must be an object"));
    assertEquals("leader", ConsumerPlan.decode("consumer/g",
        good.replace(mode, "\"fetch_mode\":\"leader\"").getBytes(StandardCharsets.UTF_8)).fetchMode);
    String missing = good.replace(mode + ",", "");
    assertFalse(missing.contains("fetch_mode"));
    assertEquals("nearest-replica", ConsumerPlan.decode("consumer/g", missing.getBytes(StandardCharsets.UTF_8)).fetchMode);
  }
}
