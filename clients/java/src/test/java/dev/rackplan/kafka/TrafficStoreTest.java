package dev.rackplan.kafka;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** The plugin's traffic records: authenticated, well formed, newest measurement, fresh, the right size. */
class TrafficStoreTest {
  static final String TOPIC = "_rackplan.traffic";
  static final byte[] SECRET = "s3cret".getBytes(StandardCharsets.UTF_8);
  static final long NOW = 1_800_000_000_000L;

  static byte[] v(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }

  static byte[] record(double a, double b, long at) {
    return TrafficBalanceTest.value("orders", new double[] {a, b}, 300, at);
  }

  /** The agent's record, byte for byte (tests/agent/traffic/test_publish.py: KNOWN_VALUE, KNOWN_MAC). */
  @Test
  void readsTheAgentsRecord() {
    byte[] value = v("{\"schema\":1,\"topic\":\"orders\",\"bytes_per_s\":[1200.0,35.5,0.0],\"window_s\":300.0,"
        + "\"measured_at_ms\":1795000000000}");
    byte[] mac = v("hmac-sha256:2d5c8b4b162c5b20a09250d564cdc2c400b423bd22edb7ffc03389ccb3f5be19");
    TrafficStore s = new TrafficStore(0);
    assertEquals(TrafficStore.Outcome.APPLIED, s.apply(TOPIC, "traffic/orders", value, mac, v("k"), NOW));
    assertArrayEquals(new double[] {1200, 35.5, 0}, s.weights("orders", 3, NOW));
  }

  /**
   * A plan reader whose pattern also matches the traffic topic (rackplan.plan.topic.pattern) leaves its
   * records alone: not a group's key, nothing applied, no malformed plan counted.
   */
  @Test
  void planReadersLeaveTrafficRecordsAlone() {
    byte[] value = record(7, 8, NOW);
    byte[] key = v("traffic/orders");
    PlanStore plans = new PlanStore();
    assertEquals(PlanStore.Outcome.NOT_A_GROUP, plans.apply(TOPIC, "traffic/orders", value, RecordMac.of(SECRET, TOPIC, key, value), SECRET));
    assertEquals(PlanStore.Outcome.NOT_A_GROUP, plans.apply(TOPIC, "traffic/orders", value, null, null));
    assertEquals(0, plans.appliedCount());
    assertEquals(0, plans.ignored().size());
    assertEquals(0, plans.all().size());
  }

  @Test
  void appliedWhenWellFormedAndFresh() {
    TrafficStore s = new TrafficStore(0);
    assertEquals(TrafficStore.Outcome.APPLIED, s.apply(TOPIC, "traffic/orders", record(1200, 35.5, NOW), null, null, NOW));
    assertArrayEquals(new double[] {1200, 35.5}, s.weights("orders", 2, NOW + 1000));
    assertNull(s.weights("orders", 3, NOW), "another partition count: not used");
    assertNull(s.weights("payments", 2, NOW));
    // three windows (900 s) by default, then stale
    assertArrayEquals(new double[] {1200, 35.5}, s.weights("orders", 2, NOW + 900_000));
    assertNull(s.weights("orders", 2, NOW + 900_001));
    TrafficStore short_ = new TrafficStore(10_000);
    short_.apply(TOPIC, "traffic/orders", record(1, 2, NOW), null, null, NOW);
    assertNull(short_.weights("orders", 2, NOW + 10_001), "rackplan.traffic.max.age.ms");
  }

  /**
   * A very long window (found by a hunt: window_s above about 3e15 made three windows overflow to a
   * negative age limit, so the figures were never fresh) keeps them fresh, as a long window means.
   */
  @Test
  void aVeryLongWindowDoesNotOverflowTheAgeLimit() {
    for (String window : new String[] {"4.0E15", "1.0E300"}) {
      TrafficStore s = new TrafficStore(0);
      byte[] value = v("{\"schema\":1,\"topic\":\"orders\",\"bytes_per_s\":[1.0,2.0],\"window_s\":" + window
          + ",\"measured_at_ms\":" + NOW + "}");
      assertEquals(TrafficStore.Outcome.APPLIED, s.apply(TOPIC, "traffic/orders", value, null, null, NOW));
      assertArrayEquals(new double[] {1, 2}, s.weights("orders", 2, NOW + 86_400_000L), "window_s " + window);
    }
  }

  @Test
  void newestMeasurementWinsAndTombstoneForgets() {
    TrafficStore s = new TrafficStore(0);
    s.apply(TOPIC, "traffic/orders", record(5, 5, NOW), null, null, NOW);
    assertEquals(TrafficStore.Outcome.STALE, s.apply(TOPIC, "traffic/orders", record(1, 1, NOW - 1), null, null, NOW + 5));
    assertArrayEquals(new double[] {5, 5}, s.weights("orders", 2, NOW));
    assertEquals(TrafficStore.Outcome.TOMBSTONE, s.apply(TOPIC, "traffic/orders", null, null, null, NOW));
    assertNull(s.weights("orders", 2, NOW));
  }

  @Test
  void malformedAndForeignRecordsAreIgnored() {
    TrafficStore s = new TrafficStore(0);
    s.apply(TOPIC, "traffic/orders", record(5, 5, NOW), null, null, NOW);
    for (String bad : new String[] {
        "not json", "[]", "{\"schema\": 2, \"topic\": \"orders\", \"bytes_per_s\": [1, 2], \"window_s\": 300, \"measured_at_ms\": 1}",
        "{\"schema\": 1, \"topic\": \"payments\", \"bytes_per_s\": [1, 2], \"window_s\": 300, \"measured_at_ms\": 1}",
        "{\"schema\": 1, \"topic\": \"orders\", \"bytes_per_s\": [1, -2], \"window_s\": 300, \"measured_at_ms\": 1}",
        "{\"schema\": 1, \"topic\": \"orders\", \"bytes_per_s\": [1, \"x\"], \"window_s\": 300, \"measured_at_ms\": 1}",
        "{\"schema\": 1, \"topic\": \"orders\", \"bytes_per_s\": [1, 2], \"window_s\": 0, \"measured_at_ms\": 1}",
        "{\"schema\": 1, \"topic\": \"orders\", \"bytes_per_s\": [1, 2], \"window_s\": 300}"})
      assertEquals(TrafficStore.Outcome.MALFORMED, s.apply(TOPIC, "traffic/orders", v(bad), null, null, NOW), bad);
    assertArrayEquals(new double[] {5, 5}, s.weights("orders", 2, NOW), "the last good record holds");
    assertEquals(TrafficStore.Outcome.NOT_TRAFFIC, s.apply(TOPIC, "racks/orders", v("{}"), null, null, NOW));
    assertEquals(TrafficStore.Outcome.NOT_TRAFFIC, s.apply(TOPIC, "traffic/", v("{}"), null, null, NOW));
  }

  @Test
  void withASecretOnlyTheAgentsRecordsCount() {
    TrafficStore s = new TrafficStore(0);
    byte[] value = record(7, 8, NOW);
    byte[] key = v("traffic/orders");
    assertEquals(TrafficStore.Outcome.UNAUTHENTICATED, s.apply(TOPIC, "traffic/orders", value, null, SECRET, NOW));
    byte[] forged = RecordMac.of(v("other"), TOPIC, key, value);
    assertEquals(TrafficStore.Outcome.UNAUTHENTICATED, s.apply(TOPIC, "traffic/orders", value, forged, SECRET, NOW));
    assertEquals(TrafficStore.Outcome.UNAUTHENTICATED,
        s.apply(TOPIC, "traffic/orders", null, RecordMac.of(v("other"), TOPIC, key, null), SECRET, NOW), "a forged tombstone");
    assertNull(s.weights("orders", 2, NOW));
    assertEquals(TrafficStore.Outcome.APPLIED, s.apply(TOPIC, "traffic/orders", value, RecordMac.of(SECRET, TOPIC, key, value), SECRET, NOW));
    assertArrayEquals(new double[] {7, 8}, s.weights("orders", 2, NOW));
    assertEquals(3, s.unauthenticatedCount());
  }
}
