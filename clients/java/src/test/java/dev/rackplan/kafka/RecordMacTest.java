package dev.rackplan.kafka;

import static dev.rackplan.kafka.Fixtures.tp;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** Issue 24, item 8: Java followers refuse plan records the agent did not write, by content (the MAC). */
class RecordMacTest {
  static final byte[] SECRET = "s3cret".getBytes(StandardCharsets.UTF_8);
  static final String PLANS = "_rackplan.plans";

  static byte[] b(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  @Test
  void knownAnswerSharedWithThePythonAgent() {
    // The same constants are in tests/agent/test_forgery.py (KNOWN_PLAN, KNOWN_TOMBSTONE).
    assertEquals("hmac-sha256:348c75f57dd087181261002e08ae8c19a075d55ee688e7fb70562ebec6117374",
        new String(RecordMac.of(b("k"), PLANS, b("consumer/g"), b("{}")), StandardCharsets.US_ASCII));
    assertEquals("hmac-sha256:4b6e5b8fedcf7e4b6f5908f45447a0fc9e3b6689d6b164aab3aa3bff97e4254c",
        new String(RecordMac.of(b("k"), PLANS, b("consumer/g"), null), StandardCharsets.US_ASCII));
  }

  @Test
  void withTheSecretForgedPlansAndTombstonesAreRefusedWhateverHeadersTheyCopy() {
    Map<String, List<org.apache.kafka.common.TopicPartition>> mine = Map.of("m", List.of(tp("t", 0), tp("t", 1)));
    byte[] good = Fixtures.plan("g", 3, Fixtures.FP, mine);
    PlanStore s = new PlanStore();
    byte[] mac = RecordMac.of(SECRET, PLANS, b("consumer/g"), good);
    assertEquals(PlanStore.Outcome.APPLIED, s.apply(PLANS, "consumer/g", good, mac, SECRET));

    byte[] forged = Fixtures.plan("g", 50, Fixtures.FP, Map.of("x", List.of(tp("t", 0), tp("t", 1))));
    assertEquals(PlanStore.Outcome.UNAUTHENTICATED, s.apply(PLANS, "consumer/g", forged, null, SECRET));
    assertEquals(PlanStore.Outcome.UNAUTHENTICATED, s.apply(PLANS, "consumer/g", forged, mac, SECRET));
    assertEquals(PlanStore.Outcome.UNAUTHENTICATED, s.apply(PLANS, "consumer/g", null, null, SECRET));
    // another key's or topic's MAC does not carry over
    byte[] other = RecordMac.of(SECRET, PLANS, b("consumer/h"), forged);
    assertEquals(PlanStore.Outcome.UNAUTHENTICATED, s.apply(PLANS, "consumer/g", forged, other, SECRET));
    byte[] lease = RecordMac.of(SECRET, "_rackplan.lease", b("consumer/g"), forged);
    assertEquals(PlanStore.Outcome.UNAUTHENTICATED, s.apply(PLANS, "consumer/g", forged, lease, SECRET));
    assertEquals(5, s.unauthenticatedCount());
    assertEquals(3, s.latest("consumer/g").generation, "the agent's plan stays the plan");
    assertEquals(3, s.maxGeneration("consumer/g"), "a forged generation never raises the fence");
    assertTrue(s.ignored().get(0).contains("not written by the agent"));

    byte[] next = Fixtures.plan("g", 4, Fixtures.FP, mine);
    assertEquals(PlanStore.Outcome.APPLIED,
        s.apply(PLANS, "consumer/g", next, RecordMac.of(SECRET, PLANS, b("consumer/g"), next), SECRET));
    assertEquals(PlanStore.Outcome.TOMBSTONE,
        s.apply(PLANS, "consumer/g", null, RecordMac.of(SECRET, PLANS, b("consumer/g"), null), SECRET));
    assertNull(s.latest("consumer/g"));
  }

  @Test
  void withoutASecretRecordsAreUnauthenticatedAsDocumented() {
    PlanStore s = new PlanStore();
    byte[] forged = Fixtures.plan("g", 50, Fixtures.FP, Map.of());
    assertEquals(PlanStore.Outcome.APPLIED, s.apply(PLANS, "consumer/g", forged, null, null));
    assertEquals(0, s.unauthenticatedCount());
  }
}
