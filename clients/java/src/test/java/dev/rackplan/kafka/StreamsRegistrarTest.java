package dev.rackplan.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.streams.processor.assignment.ApplicationState;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsState;
import org.apache.kafka.streams.processor.assignment.ProcessId;
import org.apache.kafka.streams.processor.internals.StreamsLeaderState;
import org.junit.jupiter.api.Test;

/** The leader registers the app's live clients (docs/registration-schema.json, Streams client records). */
class StreamsRegistrarTest {
  static Map<?, ?> value(byte[] raw) throws Exception {
    return (Map<?, ?>) Json.parse(new String(raw, StandardCharsets.UTF_8));
  }

  @Test
  void oneRecordPerLiveClientWithTheAppsTopologyAndSettings() throws Exception {
    for (long seed = 1; seed <= 50; seed++) {
      StreamsLeaderState s = StreamsLeaderState.random(seed);
      RackplanConfig config = new RackplanConfig(Map.of("rackplan.fetch.mode", "leader"));
      Map<String, byte[]> records = StreamsRegistrar.records("shop/eu%1", s.view, config, 1234L);
      Map<ProcessId, KafkaStreamsState> clients = s.view.kafkaStreamsStates(false);
      assertEquals(clients.size(), records.size());
      for (Map.Entry<ProcessId, KafkaStreamsState> c : clients.entrySet()) {
        String pid = c.getKey().id().toString();
        Map<?, ?> v = value(records.get("streams/shop%2Feu%251/" + pid));
        assertEquals(1L, v.get("schema"));
        assertEquals("shop/eu%1", v.get("application_id"));
        assertEquals(pid, v.get("process_id"));
        assertEquals(c.getValue().rackId().orElse(null), v.get("rack"));
        assertEquals((long) c.getValue().numProcessingThreads(), v.get("threads"));
        assertEquals(c.getValue().clientTags(), v.get("tags"));
        // Every thread consumer of the client, sorted: the agent matches live group members with them.
        List<String> consumers = new ArrayList<>(c.getValue().consumerClientIds());
        assertTrue(!consumers.isEmpty() && consumers.stream().allMatch(x -> x.startsWith(pid + "-StreamThread-")),
            consumers.toString());
        assertEquals(consumers, v.get("consumer_client_ids"), "seed " + seed);
        assertEquals(1234L, v.get("timestamp_ms"));
        assertEquals("leader", v.get("fetch_mode"));
        assertEquals((long) s.configs.numStandbyReplicas(), v.get("num_standby_replicas"));
        assertEquals(s.configs.acceptableRecoveryLag(), v.get("acceptable_recovery_lag"));
        assertEquals((long) s.configs.maxWarmupReplicas(), v.get("max_warmup_replicas"));
        assertEquals(s.configs.rackAwareAssignmentTags(), v.get("rack_aware_assignment_tags"));
        Map<?, ?> ra = (Map<?, ?>) v.get("rack_aware");
        assertEquals(s.configs.rackAwareAssignmentStrategy(), ra.get("strategy"));
        assertEquals(s.configs.rackAwareTrafficCost().isPresent() ? (long) s.configs.rackAwareTrafficCost().getAsInt() : null,
            ra.get("traffic_cost"));
        // The topology as generated: sub-topology ids, source and changelog topics, stores.
        List<Object> want = new ArrayList<>();
        for (Map.Entry<Integer, List<Object>> t : s.topology.entrySet()) {
          Map<String, Object> sub = new LinkedHashMap<>();
          sub.put("id", t.getKey().toString());
          sub.put("source_topics", List.of(t.getValue().get(0)));
          sub.put("changelog_topics", t.getValue().get(1).equals("") ? List.of() : List.of(t.getValue().get(1)));
          sub.put("stateful", t.getValue().get(2));
          want.add(sub);
        }
        assertEquals(want, v.get("subtopologies"), "seed " + seed + " " + s.summary);
      }
    }
  }

  @Test
  void signedWithTheSharedSecret() throws Exception {
    Path secret = Files.createTempFile("rackplan", ".secret");
    Files.writeString(secret, "s3cret\n");
    RackplanConfig config = new RackplanConfig(Map.of("rackplan.registration.secret.file", secret.toString()));
    StreamsLeaderState s = StreamsLeaderState.random(7);
    for (byte[] raw : StreamsRegistrar.records("clicks", s.view, config, 99L).values()) {
      Map<String, Object> v = new LinkedHashMap<>();
      for (Map.Entry<?, ?> e : value(raw).entrySet()) v.put((String) e.getKey(), e.getValue());
      String sig = (String) v.get("signature");
      assertTrue(sig.startsWith("hmac-sha256:"), sig);
      assertEquals(RackplanClient.sign(v, "s3cret".getBytes(StandardCharsets.US_ASCII)), sig);
      // The signature covers the consumers too: a record whose consumer ids were changed does not verify.
      List<?> consumers = (List<?>) v.get("consumer_client_ids");
      assertTrue(consumers != null && !consumers.isEmpty(), v.toString());
      v.put("consumer_client_ids", List.of("forged-StreamThread-1-consumer"));
      assertTrue(!sig.equals(RackplanClient.sign(v, "s3cret".getBytes(StandardCharsets.US_ASCII))));
    }
    Files.delete(secret);
  }

  @Test
  void theLeaderTombstonesClientsThatLeft() {
    List<String> sent = new ArrayList<>();
    RackplanConfig config = new RackplanConfig(Map.of());
    StreamsRegistrar r = new StreamsRegistrar(config, (k, v) -> sent.add((v == null ? "tombstone " : "record ") + k));
    RackplanTaskAssignor a = RackplanTaskAssignor.forTest("clicks", new PlanStore(), 60_000);
    a.registrar = r;
    ApplicationState three = RackplanTaskAssignorTest.app(RackplanTaskAssignorTest.P1, RackplanTaskAssignorTest.P2,
        RackplanTaskAssignorTest.P3);
    a.assign(three);
    Set<String> keys = new TreeSet<>();
    for (ProcessId p : List.of(RackplanTaskAssignorTest.P1, RackplanTaskAssignorTest.P2, RackplanTaskAssignorTest.P3))
      keys.add("streams/clicks/" + p.id());
    assertEquals(keys, r.registered("clicks"));
    assertEquals(3, sent.size());
    sent.clear();
    a.assign(RackplanTaskAssignorTest.app(RackplanTaskAssignorTest.P1, RackplanTaskAssignorTest.P2)); // P3 left
    assertEquals(List.of("record streams/clicks/" + RackplanTaskAssignorTest.P1.id(),
        "record streams/clicks/" + RackplanTaskAssignorTest.P2.id(),
        "tombstone streams/clicks/" + RackplanTaskAssignorTest.P3.id()), sent);
  }

  @Test
  void aLeaderNewToTheAppTombstonesThePlannedClientsThatAreGone() {
    // This JVM registered nothing (it just became the leader): the plan is where the gone client is named.
    List<String> sent = new ArrayList<>();
    StreamsRegistrar r = new StreamsRegistrar(new RackplanConfig(Map.of()),
        (k, v) -> sent.add((v == null ? "tombstone " : "record ") + k));
    PlanStore store = new PlanStore();
    assertEquals(PlanStore.Outcome.APPLIED,
        store.apply("streams/clicks", RackplanTaskAssignorTest.plan("clicks", 2, RackplanTaskAssignorTest.GOOD)));
    RackplanTaskAssignor a = RackplanTaskAssignor.forTest("clicks", store, 60_000);
    a.registrar = r;
    a.assign(RackplanTaskAssignorTest.app(RackplanTaskAssignorTest.P1, RackplanTaskAssignorTest.P2)); // P3 left
    assertEquals(List.of("record streams/clicks/" + RackplanTaskAssignorTest.P1.id(),
        "record streams/clicks/" + RackplanTaskAssignorTest.P2.id(),
        "tombstone streams/clicks/" + RackplanTaskAssignorTest.P3.id()), sent);
    sent.clear();
    a.assign(RackplanTaskAssignorTest.app(RackplanTaskAssignorTest.P1, RackplanTaskAssignorTest.P2, RackplanTaskAssignorTest.P3));
    assertEquals(3, sent.size(), "a planned client that is live is registered, never tombstoned: " + sent);
    assertTrue(sent.stream().allMatch(x -> x.startsWith("record ")), sent.toString());
  }

  @Test
  void namedTopologiesAreNotRegistered() {
    ApplicationState named = new ApplicationState() {
      final ApplicationState base = RackplanTaskAssignorTest.app(RackplanTaskAssignorTest.P1);

      @Override public Map<ProcessId, KafkaStreamsState> kafkaStreamsStates(boolean lags) { return base.kafkaStreamsStates(lags); }
      @Override public org.apache.kafka.streams.processor.assignment.AssignmentConfigs assignmentConfigs() { return base.assignmentConfigs(); }
      @Override public Map<org.apache.kafka.streams.processor.TaskId, org.apache.kafka.streams.processor.assignment.TaskInfo> allTasks() {
        Map<org.apache.kafka.streams.processor.TaskId, org.apache.kafka.streams.processor.assignment.TaskInfo> m = new TreeMap<>();
        org.apache.kafka.streams.processor.TaskId id = new org.apache.kafka.streams.processor.TaskId(0, 0, "orders");
        m.put(id, new org.apache.kafka.streams.processor.assignment.TaskInfo() {
          @Override public org.apache.kafka.streams.processor.TaskId id() { return id; }
          @Override public boolean isStateful() { return false; }
          @Override public Set<String> stateStoreNames() { return Set.of(); }
          @Override public Set<org.apache.kafka.streams.processor.assignment.TaskTopicPartition> topicPartitions() { return Set.of(); }
        });
        return m;
      }
    };
    assertNull(StreamsRegistrar.records("clicks", named, new RackplanConfig(Map.of()), 1L));
  }

  @Test
  void theFollowUpRebalanceComesWithinAThirdOfTheRegistrationTtl() {
    RackplanTaskAssignor a = new RackplanTaskAssignor();
    // no bootstrap.servers: no plan reader, no registrar (no I/O); the follow-up is still capped
    a.configure(Map.of("application.id", "clicks", "rackplan.streams.followup.ms", "60000",
        "rackplan.registration.ttl.ms", "30000"));
    java.time.Instant before = java.time.Instant.now();
    for (org.apache.kafka.streams.processor.assignment.KafkaStreamsAssignment x
        : a.assign(RackplanTaskAssignorTest.app(RackplanTaskAssignorTest.P1)).assignment()) {
      java.time.Instant d = x.followupRebalanceDeadline().orElseThrow();
      assertTrue(!d.isBefore(before.plusMillis(9_000)) && !d.isAfter(java.time.Instant.now().plusMillis(10_000)), d.toString());
    }
  }
}
