package dev.rackplan.kafka;

import static dev.rackplan.kafka.Fixtures.tp;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Assignment;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigException;
import org.junit.jupiter.api.Test;

class RackplanAssignorTest {
  static final Node[] NODES = {
    new Node(1, "h", 1, "az-a"), new Node(2, "h", 2, "az-b"), new Node(3, "h", 3, "az-c")
  };

  /** Topic t: 6 partitions, partition p on brokers (p%3)+1 and ((p+1)%3)+1. */
  static Cluster cluster() {
    List<PartitionInfo> parts = new ArrayList<>();
    for (int p = 0; p < 6; p++) {
      Node[] r = {NODES[p % 3], NODES[(p + 1) % 3]};
      parts.add(new PartitionInfo("t", p, r[0], r, r));
    }
    return new Cluster("c", List.of(NODES), parts, Set.of(), Set.of());
  }

  static String liveFingerprint() {
    return Plans.fingerprint(RackplanAssignor.racksOf(cluster(), Set.of("t")), "nearest-replica");
  }

  static final Map<String, List<TopicPartition>> TARGET = Map.of(
      "a", List.of(tp("t", 0), tp("t", 5)), "b", List.of(tp("t", 1), tp("t", 2)), "c", List.of(tp("t", 3), tp("t", 4)));

  /** Each member's subscription as its own RackplanAssignor encodes it; consumer member ids m-a, m-b, m-c. */
  static GroupSubscription group(Map<String, List<TopicPartition>> owned, String... ids) {
    Map<String, Subscription> subs = new HashMap<>();
    for (String id : ids) {
      RackplanAssignor member = RackplanAssignor.forTest("g", id, "cooperative-sticky", true, new PlanStore());
      ByteBuffer ud = member.subscriptionUserData(Set.of("t"));
      subs.put("m-" + id, new Subscription(List.of("t"), ud, owned.getOrDefault(id, List.of()), 1, Optional.of("az-a")));
    }
    return new GroupSubscription(subs);
  }

  static Map<String, List<TopicPartition>> run(RackplanAssignor a, GroupSubscription g) {
    Map<String, List<TopicPartition>> out = new TreeMap<>();
    for (Map.Entry<String, Assignment> e : a.assign(cluster(), g).groupAssignment().entrySet())
      out.put(e.getKey().substring(2), e.getValue().partitions());
    return out;
  }

  static void assertNoDoubleOwnership(Map<String, List<TopicPartition>> a) {
    Set<TopicPartition> seen = new HashSet<>();
    for (List<TopicPartition> ps : a.values()) for (TopicPartition tp : ps) assertTrue(seen.add(tp), "twice: " + tp);
  }

  @Test
  void appliesAMatchingPlanFromScratch() {
    PlanStore store = new PlanStore();
    store.apply("consumer/g", Fixtures.plan("g", 4, liveFingerprint(), TARGET));
    RackplanAssignor leader = RackplanAssignor.forTest("g", "a", "cooperative-sticky", true, store);
    assertEquals(new TreeMap<>(TARGET), run(leader, group(Map.of(), "a", "b", "c")));
    assertEquals(1, leader.stats().getPlanAssignments());
    assertEquals(4, leader.stats().getAppliedPlanGeneration());
  }

  @Test
  void cooperativeRevokesFirstThenGivesOutInTheFollowUp() {
    PlanStore store = new PlanStore();
    store.apply("consumer/g", Fixtures.plan("g", 4, liveFingerprint(), TARGET));
    RackplanAssignor leader = RackplanAssignor.forTest("g", "a", "cooperative-sticky", true, store);
    Map<String, List<TopicPartition>> owned = Map.of(
        "a", List.of(tp("t", 0), tp("t", 1)), "b", List.of(tp("t", 2), tp("t", 3)), "c", List.of(tp("t", 4), tp("t", 5)));
    Map<String, List<TopicPartition>> first = run(leader, group(owned, "a", "b", "c"));
    // t-1 (a -> b), t-3 (b -> c), t-5 (c -> a) change owner: nobody gets them this round.
    assertEquals(List.of(tp("t", 0)), first.get("a"));
    assertEquals(List.of(tp("t", 2)), first.get("b"));
    assertEquals(List.of(tp("t", 4)), first.get("c"));
    // Follow-up: members own what the first round left them.
    Map<String, List<TopicPartition>> second = run(leader, group(first, "a", "b", "c"));
    assertEquals(new TreeMap<>(TARGET), second);
    assertNoDoubleOwnership(second);
  }

  @Test
  void fallsBackWithAReasonWhenThePlanDoesNotFit() {
    PlanStore store = new PlanStore();
    RackplanAssignor leader = RackplanAssignor.forTest("g", "a", "cooperative-sticky", true, store);
    Map<String, List<TopicPartition>> none = run(leader, group(Map.of(), "a", "b", "c"));
    assertEquals(6, none.values().stream().mapToInt(List::size).sum());
    assertNoDoubleOwnership(none);
    assertTrue(leader.stats().getLastFallbackReason().contains("no plan"));

    store.apply("consumer/g", Fixtures.plan("g", 1, liveFingerprint(), TARGET));
    run(leader, group(Map.of(), "a", "b", "c", "d"));
    assertTrue(leader.stats().getLastFallbackReason().contains("differ from the live members"));

    store.apply("consumer/g", Fixtures.plan("g", 2, "f".repeat(64), TARGET));
    Map<String, List<TopicPartition>> stale = run(leader, group(Map.of(), "a", "b", "c"));
    assertTrue(leader.stats().getLastFallbackReason().contains("cluster fingerprint differs"));
    assertEquals(3, leader.stats().getFallbackAssignments());
    assertEquals(0, leader.stats().getPlanAssignments());
    assertNoDoubleOwnership(stale);
  }

  @Test
  void aPlanRefusedOnlyForTheLeadersOwnMetadataIsTriedAgainWithBackoffThenGivenUp() {
    PlanStore store = new PlanStore();
    RackplanAssignor leader = RackplanAssignor.forTest("g", "a", "cooperative-sticky", true, store);
    long now = System.currentTimeMillis();
    assertFalse(leader.staleRetryDue(now + 100_000), "nothing refused yet");
    store.apply("consumer/g", Fixtures.plan("g", 2, "f".repeat(64), TARGET));
    run(leader, group(Map.of(), "a", "b", "c"));
    assertFalse(leader.staleRetryDue(now), "not at once");
    long t = now + 2_500;
    int retries = 0;
    for (int i = 0; i < 200; i++, t += 1_000) if (leader.staleRetryDue(t)) retries++;
    assertEquals(RackplanAssignor.MAX_STALE_RETRIES, retries, "bounded");

    store.apply("consumer/g", Fixtures.plan("g", 3, "f".repeat(64), TARGET));
    run(leader, group(Map.of(), "a", "b", "c"));
    store.apply("consumer/g", Fixtures.plan("g", 4, liveFingerprint(), TARGET));
    run(leader, group(Map.of(), "a", "b", "c"));
    assertFalse(leader.staleRetryDue(t + 100_000), "a plan applied: no retry left");

    store.apply("consumer/g", Fixtures.plan("g", 5, liveFingerprint(), TARGET));
    run(leader, group(Map.of(), "a", "b", "c", "d"));
    assertFalse(leader.staleRetryDue(t + 200_000), "members differ: no retry, a rebalance will come");
  }

  @Test
  void rangeFallbackIsMadeCooperativeToo() {
    RackplanAssignor leader = RackplanAssignor.forTest("g", "a", "range", true, new PlanStore());
    // c owns everything; range wants to spread it: nothing may go to a or b while c still owns it.
    List<TopicPartition> all = new ArrayList<>();
    for (int p = 0; p < 6; p++) all.add(tp("t", p));
    Map<String, List<TopicPartition>> first = run(leader, group(Map.of("c", all), "a", "b", "c"));
    assertEquals(List.of(), first.get("a"));
    assertEquals(List.of(), first.get("b"));
    assertEquals(2, first.get("c").size());
  }

  @Test
  void eagerAppliesThePlanAtOnce() {
    PlanStore store = new PlanStore();
    store.apply("consumer/g", Fixtures.plan("g", 4, liveFingerprint(), TARGET));
    RackplanAssignor leader = RackplanAssignor.forTest("g", "a", "cooperative-sticky", false, store);
    assertEquals(new TreeMap<>(TARGET), run(leader, group(Map.of("a", List.of(tp("t", 1))), "a", "b", "c")));
  }

  @Test
  void userDataRoundTripsAndMarksTheConsideredGeneration() throws Exception {
    RackplanAssignor m = RackplanAssignor.forTest("g", "id/with%", "cooperative-sticky", true, new PlanStore());
    Object[] dec = RackplanAssignor.decodeSubscription(m.subscriptionUserData(Set.of("t")));
    assertEquals("id/with%", dec[0]);
    assertEquals(7, RackplanAssignor.consideredGeneration(RackplanAssignor.assignmentUserData(7)));
    assertEquals(0, RackplanAssignor.consideredGeneration(ByteBuffer.wrap(new byte[] {1, 2})));
    // A member that saw generation 3 rebalances once; an assignment that considered 3 clears it.
    RackplanAssignor follower = RackplanAssignor.forTest("g", "b", "cooperative-sticky", true, new PlanStore());
    assertEquals(0, follower.rebalanceNeeded());
    follower.onPlan(ConsumerPlan.decode("consumer/g", Fixtures.plan("g", 3, Fixtures.FP, TARGET)));
    follower.onPlan(ConsumerPlan.decode("consumer/other", Fixtures.plan("other", 9, Fixtures.FP, TARGET)));
    assertEquals(3, follower.rebalanceNeeded());
    follower.onAssignment(new Assignment(List.of(), RackplanAssignor.assignmentUserData(2)), new org.apache.kafka.clients.consumer.ConsumerGroupMetadata("g"));
    assertEquals(3, follower.rebalanceNeeded(), "the leader considered an older plan: still needed");
    follower.onAssignment(new Assignment(List.of(), RackplanAssignor.assignmentUserData(3)), new org.apache.kafka.clients.consumer.ConsumerGroupMetadata("g"));
    assertEquals(0, follower.rebalanceNeeded());
  }

  @Test
  void configureRefusesMissingIdsAndUnknownKeys() {
    RackplanAssignor a = new RackplanAssignor();
    ConfigException e = assertThrows(ConfigException.class,
        () -> a.configure(Map.of("group.id", "g", "bootstrap.servers", "127.0.0.1:1")));
    assertTrue(e.getMessage().contains("rackplan.member.id"));
    e = assertThrows(ConfigException.class,
        () -> a.configure(Map.of("group.id", "g", "group.instance.id", "i", "rackplan.plan.topik", "x")));
    assertTrue(e.getMessage().contains("rackplan.plan.topik"));
    e = assertThrows(ConfigException.class,
        () -> a.configure(Map.of("group.id", "g", "group.instance.id", "i", "rackplan.fallback", "sticky")));
    assertTrue(e.getMessage().contains("rackplan.fallback"));
    e = assertThrows(ConfigException.class, () -> a.configure(Map.of("group.id", "g", "group.instance.id", "i")));
    assertTrue(e.getMessage().contains("rackplan.bootstrap.servers"), e.getMessage());
  }

  /** A plan topic pattern that is no regex is refused with the settings, naming the key (not on a reader thread later). */
  @Test
  void aBadPlanTopicPatternIsRefusedNamingTheKey() {
    ConfigException e = assertThrows(ConfigException.class,
        () -> new RackplanConfig(Map.of("rackplan.plan.topic.pattern", "([")));
    assertTrue(e.getMessage().contains("rackplan.plan.topic.pattern"), e.getMessage());
    assertEquals("_rackplan\\..*", new RackplanConfig(Map.of("rackplan.plan.topic.pattern", "_rackplan\\..*")).planTopicRegex.pattern());
  }

  /** JMX IgnoredPlanRecords counts every ignored record, not the 100 reasons the store keeps. */
  @Test
  void ignoredPlanRecordsCountsEveryIgnoredRecord() {
    PlanStore store = new PlanStore();
    RackplanAssignor a = RackplanAssignor.forTest("g", "a", "cooperative-sticky", true, store);
    for (int i = 0; i < 150; i++) store.apply("consumer/g", "not json".getBytes(java.nio.charset.StandardCharsets.UTF_8));
    assertEquals(150, a.stats.getIgnoredPlanRecords());
    assertEquals(100, store.ignored().size());
  }

  @Test
  void signedRegistrationsCarryTheAgentsSignature() throws Exception {
    RackplanConfig cfg = new RackplanConfig(Map.of("rackplan.plan.assignor", "rack-optimal"));
    RackplanClient.Member m = new RackplanClient.Member("pay/ments", "m\u00e9%1", "az-a", null);
    Map<String, Object> v = new java.util.LinkedHashMap<>();
    for (Map.Entry<?, ?> e : ((Map<?, ?>) Json.parse(new String(
        RackplanClient.registrationValue(m, Set.of("b", "a"), 42L, cfg), "UTF-8"))).entrySet())
      v.put((String) e.getKey(), e.getValue());
    // Expected: agent.registry.sign_registration(the same value, b"k3y\n") in Python.
    assertEquals("hmac-sha256:b3fadd2ea66c762175e350a235873c206d47f21fd2112e4596fa29e22d237c94",
        RackplanClient.sign(v, "k3y\n".getBytes("UTF-8")));
    // A rack with DEL (0x7f), which the agent's canonical_payload escapes: its sign_registration of this value.
    Map<String, Object> del = new java.util.LinkedHashMap<>();
    del.put("schema", 1L);
    del.put("group_id", "g");
    del.put("member_id", "m");
    del.put("rack", "az\u007fa");
    del.put("topics", List.of("t"));
    del.put("group_instance_id", "m");
    del.put("timestamp_ms", 1L);
    assertEquals("hmac-sha256:ae98ce9726e92988717d7a1297061181f115c92d9d8a93411573814c9e950159",
        RackplanClient.sign(del, "secret".getBytes("UTF-8")));
    java.nio.file.Path f = java.nio.file.Files.createTempFile("secret", "");
    try {
      java.nio.file.Files.writeString(f, "  s3cret\n");
      RackplanConfig signed = new RackplanConfig(Map.of("rackplan.registration.secret.file", f.toString()));
      Map<?, ?> rec = (Map<?, ?>) Json.parse(new String(RackplanClient.registrationValue(m, Set.of("a"), 1L, signed), "UTF-8"));
      Map<String, Object> body = new java.util.LinkedHashMap<>();
      for (Map.Entry<?, ?> e : rec.entrySet()) body.put((String) e.getKey(), e.getValue());
      assertEquals(RackplanClient.sign(body, "s3cret".getBytes("UTF-8")), rec.get("signature"));
      java.nio.file.Files.writeString(f, " \n");
      ConfigException e = assertThrows(ConfigException.class,
          () -> new RackplanConfig(Map.of("rackplan.registration.secret.file", f.toString())));
      assertTrue(e.getMessage().contains("is empty"));
    } finally {
      java.nio.file.Files.delete(f);
    }
  }

  @Test
  void registrationRecordMatchesTheSchema() throws Exception {
    RackplanConfig cfg = new RackplanConfig(Map.of("rackplan.plan.assignor", "rack-optimal"));
    RackplanClient.Member m = new RackplanClient.Member("pay/ments", "m%1", "az-a", "m%1");
    assertEquals("consumer/pay%2Fments/m%251", RackplanClient.registrationKey(m));
    Map<?, ?> v = (Map<?, ?>) Json.parse(new String(RackplanClient.registrationValue(m, Set.of("b", "a"), 42L, cfg), "UTF-8"));
    assertEquals(1L, v.get("schema"));
    assertEquals("pay/ments", v.get("group_id"));
    assertEquals("m%1", v.get("member_id"));
    assertEquals(List.of("a", "b"), v.get("topics"));
    assertEquals("az-a", v.get("rack"));
    assertEquals(42L, v.get("timestamp_ms"));
    assertEquals("rack-optimal", v.get("assignor"));
  }
}
