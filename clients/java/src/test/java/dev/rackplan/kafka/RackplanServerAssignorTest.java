package dev.rackplan.kafka;

import static dev.rackplan.kafka.Fixtures.tp;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.MemberSubscription;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.apache.kafka.coordinator.group.api.assignor.SubscriptionType;
import org.junit.jupiter.api.Test;

class RackplanServerAssignorTest {
  static final Uuid T = Uuid.randomUuid();
  /** The plan topic: RackplanConsumer subscribes to it for a moment to bump a KIP-848 group's epoch. */
  static final Uuid P = Uuid.randomUuid();
  static Set<Uuid> subscribed = Set.of(T);
  static final String[] RACKS = {"az-a", "az-b", "az-c"};

  /** Topic t: 6 partitions, partition p's replicas in racks p%3 and (p+1)%3. */
  static final SubscribedTopicDescriber DESCRIBER = new SubscribedTopicDescriber() {
    @Override public int numPartitions(Uuid id) { return id.equals(T) ? 6 : id.equals(P) ? 1 : -1; }
    @Override public Set<String> racksForPartition(Uuid id, int p) { return Set.of(RACKS[p % 3], RACKS[(p + 1) % 3]); }
  };

  record Member(String instance, String rack, Map<Uuid, Set<Integer>> current) {}

  static GroupSpec spec(Map<String, Member> members) {
    return new GroupSpec() {
      @Override public java.util.Collection<String> memberIds() { return members.keySet(); }
      @Override public SubscriptionType subscriptionType() { return SubscriptionType.HOMOGENEOUS; }
      @Override public boolean isPartitionAssigned(Uuid t, int p) { return false; }
      @Override public boolean isPartitionAssignable(Uuid t, int p) { return true; }
      @Override public MemberSubscription memberSubscription(String m) {
        Member x = members.get(m);
        return new MemberSubscription() {
          @Override public Optional<String> rackId() { return Optional.ofNullable(x.rack()); }
          @Override public Optional<String> instanceId() { return Optional.ofNullable(x.instance()); }
          @Override public Set<Uuid> subscribedTopicIds() { return subscribed; }
        };
      }
      @Override public MemberAssignment memberAssignment(String m) { return () -> members.get(m).current(); }
    };
  }

  static Map<String, List<TopicPartition>> named(GroupAssignment g) {
    Map<String, List<TopicPartition>> out = new TreeMap<>();
    for (Map.Entry<String, MemberAssignment> e : g.members().entrySet()) {
      List<TopicPartition> l = new ArrayList<>();
      for (Map.Entry<Uuid, Set<Integer>> t : e.getValue().partitions().entrySet())
        for (int p : t.getValue()) l.add(tp(t.getKey().equals(T) ? "t" : "?", p));
      l.sort(Plans.TP_ORDER);
      out.put(e.getKey(), l);
    }
    return out;
  }

  static String fingerprint() {
    Map<String, List<Plans.PartitionRacks>> m = new TreeMap<>();
    List<Plans.PartitionRacks> rows = new ArrayList<>();
    for (int p = 0; p < 6; p++) rows.add(new Plans.PartitionRacks(DESCRIBER.racksForPartition(T, p), null, false));
    m.put("t", rows);
    return Plans.fingerprint(m, "nearest-replica");
  }

  static final Map<String, List<TopicPartition>> TARGET = Map.of(
      "i-a", List.of(tp("t", 1), tp("t", 5)), "i-b", List.of(tp("t", 0), tp("t", 2)), "i-c", List.of(tp("t", 3), tp("t", 4)));

  static Map<String, Member> three(Map<Uuid, Set<Integer>> currentOfA) {
    Map<String, Member> m = new HashMap<>();
    m.put("uuid-a", new Member("i-a", "az-a", currentOfA));
    m.put("uuid-b", new Member("i-b", "az-b", Map.of()));
    m.put("uuid-c", new Member("i-c", "az-c", Map.of()));
    return m;
  }

  @Test
  void appliesThePlanWhoseMembersAreTheGroupsInstanceIds() {
    PlanStore store = new PlanStore();
    store.apply("consumer/other", Fixtures.plan("other", 1, fingerprint(), Map.of("x", List.of(tp("t", 0)))));
    store.apply("consumer/g", Fixtures.plan("g", 3, fingerprint(), TARGET));
    RackplanServerAssignor a = RackplanServerAssignor.forTest(store, Map.of(T, "t"));
    Map<String, List<TopicPartition>> got = named(a.assign(spec(three(Map.of())), DESCRIBER));
    assertEquals(TARGET.get("i-a"), got.get("uuid-a"));
    assertEquals(TARGET.get("i-b"), got.get("uuid-b"));
    assertEquals(TARGET.get("i-c"), got.get("uuid-c"));
    assertEquals(1, a.planCount.get());
  }

  @Test
  void neverAssignsThePlanTopicOfAnEpochBump() {
    PlanStore store = new PlanStore();
    store.apply("consumer/g", Fixtures.plan("g", 3, fingerprint(), TARGET));
    RackplanServerAssignor a = RackplanServerAssignor.forTest(store, Map.of(T, "t", P, "_rackplan.plans"));
    subscribed = Set.of(T, P);
    try {
      Map<String, List<TopicPartition>> got = named(a.assign(spec(three(Map.of())), DESCRIBER));
      assertEquals(TARGET.get("i-a"), got.get("uuid-a"));
      assertEquals(1, a.planCount.get());
      store.apply("consumer/g", null); // no plan: the fallback must leave the plan topic out too
      got = named(a.assign(spec(three(Map.of())), DESCRIBER));
      assertEquals(6, got.values().stream().mapToInt(List::size).sum());
      for (List<TopicPartition> l : got.values()) for (TopicPartition tp : l) assertEquals("t", tp.topic());
    } finally {
      subscribed = Set.of(T);
    }
  }

  @Test
  void withoutAMatchingPlanTheRackAwareBalanceAssignsWithAReason() {
    PlanStore store = new PlanStore();
    store.apply("consumer/g", Fixtures.plan("g", 3, "e".repeat(64), TARGET));
    RackplanServerAssignor a = RackplanServerAssignor.forTest(store, Map.of(T, "t"));
    Map<String, List<TopicPartition>> got = named(a.assign(spec(three(Map.of())), DESCRIBER));
    assertTrue(a.lastReason.contains("cluster fingerprint differs"), a.lastReason);
    // Rack-aware: every partition has a replica in its member's rack (each rack holds 4 of 6).
    for (Map.Entry<String, List<TopicPartition>> e : got.entrySet()) {
      String rack = three(Map.of()).get(e.getKey()).rack();
      assertEquals(2, e.getValue().size());
      for (TopicPartition tp : e.getValue()) assertTrue(DESCRIBER.racksForPartition(T, tp.partition()).contains(rack));
    }
    Map<String, Member> noInstance = new HashMap<>(three(Map.of()));
    noInstance.put("uuid-d", new Member(null, "az-a", Map.of()));
    a.assign(spec(noInstance), DESCRIBER);
    assertTrue(a.lastReason.contains("has no group.instance.id"), a.lastReason);
    // A topic whose name is unknown (it might be a plan topic) is never assigned, not even by the fallback.
    RackplanServerAssignor unknown = RackplanServerAssignor.forTest(store, Map.of());
    GroupAssignment none = unknown.assign(spec(three(Map.of())), DESCRIBER);
    assertTrue(unknown.lastReason.contains("not known yet"), unknown.lastReason);
    for (MemberAssignment m : none.members().values()) assertTrue(m.partitions().isEmpty(), m.partitions().toString());
    assertEquals(2, a.fallbackCount.get());
  }

  /**
   * A broker assigns with whichever instance its last configuration rebuild made: the JMX bean counts
   * every instance's assignments, not the first one's (it stopped moving once the broker switched).
   */
  @Test
  void theJmxBeanCountsEveryInstancesAssignments() throws Exception {
    RackplanServerAssignor.registerMBean();
    javax.management.MBeanServer server = java.lang.management.ManagementFactory.getPlatformMBeanServer();
    javax.management.ObjectName name = new javax.management.ObjectName("dev.rackplan:type=RackplanServerAssignor");
    java.util.function.Supplier<Long> plans = () -> {
      try {
        return (Long) server.getAttribute(name, "PlanAssignments");
      } catch (Exception e) {
        throw new AssertionError(e);
      }
    };
    PlanStore store = new PlanStore();
    store.apply("consumer/g", Fixtures.plan("g", 3, fingerprint(), TARGET));
    RackplanServerAssignor first = RackplanServerAssignor.forTest(store, Map.of(T, "t"));
    RackplanServerAssignor rebuilt = RackplanServerAssignor.forTest(store, Map.of(T, "t"));
    long before = plans.get();
    first.assign(spec(three(Map.of())), DESCRIBER);
    rebuilt.assign(spec(three(Map.of())), DESCRIBER);
    rebuilt.assign(spec(three(Map.of())), DESCRIBER);
    assertEquals(before + 3, plans.get());
    assertEquals(1, first.planCount.get(), "each instance still counts its own");
    assertEquals(2, rebuilt.planCount.get());
    store.apply("consumer/g", Fixtures.plan("g", 4, "e".repeat(64), TARGET));
    long fallbacks = (Long) server.getAttribute(name, "FallbackAssignments");
    rebuilt.assign(spec(three(Map.of())), DESCRIBER);
    assertEquals(fallbacks + 1, (Long) server.getAttribute(name, "FallbackAssignments"));
    String reason = (String) server.getAttribute(name, "LastFallbackReason");
    assertTrue(reason.contains("cluster fingerprint differs"), reason);
  }

  /**
   * A group the balancer declines (here: its flow past a work bound lowered to nothing) is assigned by
   * Kafka's own {@code uniform}, counted apart with its reason: balanced by Kafka's rule (the previous
   * rack-aware fallback was not, on some heterogeneous groups), every partition once, never the plan
   * topic, the same answer twice. With the bound as shipped the same group (70 racks) is the balancer's.
   */
  @Test
  void aDeclinedGroupIsAssignedByKafkasUniformBalancedWithoutThePlanTopic() {
    java.util.Random rnd = new java.util.Random(70);
    String[] racks = new String[70];
    for (int i = 0; i < racks.length; i++) racks[i] = String.format("rack-%02d", i);
    CoordinatorGroups.Topics topics = CoordinatorGroups.topics(rnd, 12, 40, racks, 3, false);
    List<Uuid> ids = topics.ids();
    Map<Uuid, String> names = new HashMap<>(topics.names());
    names.put(ids.get(0), "_rackplan.plans"); // one subscribed topic is the plan topic
    RackplanServerAssignor a = RackplanServerAssignor.forTest(new PlanStore(), names);
    Map<String, CoordinatorGroups.Member> members = new TreeMap<>();
    for (int i = 0; i < 90; i++) {
      Set<Uuid> subs = new HashSet<>();
      for (Uuid id : ids) if (rnd.nextInt(3) > 0) subs.add(id);
      subs.add(ids.get(0));
      members.put(String.format("m%03d", i), new CoordinatorGroups.Member(racks[i % racks.length], subs));
    }
    GroupSpec spec = CoordinatorGroups.spec(members, Map.of());
    Map<String, Map<Uuid, Set<Integer>>> balanced = CoordinatorGroups.plain(a.assign(spec, topics));
    assertEquals(0, a.safeFallbackCount.get(), a.lastSafeReason);
    Map<String, Map<Uuid, Set<Integer>>> got;
    RackStickyBalancer.workPerEdge = 0;
    try {
      got = CoordinatorGroups.plain(a.assign(spec, topics));
      assertEquals(got, CoordinatorGroups.plain(a.assign(spec, topics)));
    } finally {
      RackStickyBalancer.workPerEdge = RackStickyBalancer.WORK_PER_EDGE;
    }
    assertEquals(2, a.safeFallbackCount.get());
    assertTrue(a.lastSafeReason.contains("work bound"), a.lastSafeReason);
    assertTrue(CoordinatorGroups.crossRack(members, topics, balanced) < CoordinatorGroups.crossRack(members, topics, got));
    for (Map<Uuid, Set<Integer>> m : got.values()) assertTrue(!m.containsKey(ids.get(0)), "the plan topic was assigned");
    Map<String, CoordinatorGroups.Member> withoutPlanTopic = new TreeMap<>();
    for (Map.Entry<String, CoordinatorGroups.Member> e : members.entrySet()) {
      Set<Uuid> subs = new HashSet<>(e.getValue().topics());
      subs.remove(ids.get(0));
      withoutPlanTopic.put(e.getKey(), new CoordinatorGroups.Member(e.getValue().rack(), subs));
    }
    Map<Uuid, List<Set<String>>> rest = new HashMap<>(topics.racks());
    rest.remove(ids.get(0));
    assertEquals(null, CoordinatorGroups.violation(withoutPlanTopic, new CoordinatorGroups.Topics(rest, names), got));
    assertEquals(null, CoordinatorGroups.violation(withoutPlanTopic, new CoordinatorGroups.Topics(rest, names), balanced));
  }

  /**
   * Inside a starting broker no broker answers yet: the topic-name admin client must not rebootstrap on
   * every pass of its loop (thousands of log lines a second), and must back off between attempts.
   */
  @Test
  void topicAdminWaitsQuietlyForTheCluster() {
    Map<String, Object> ac =
        RackplanServerAssignor.adminConfig(new RackplanConfig(Map.of("rackplan.bootstrap.servers", "127.0.0.1:1")));
    org.apache.kafka.clients.admin.AdminClientConfig parsed = new org.apache.kafka.clients.admin.AdminClientConfig(ac);
    assertEquals("none", parsed.getString("metadata.recovery.strategy"));
    assertTrue(parsed.getLong("reconnect.backoff.ms") >= 1000, "reconnect backoff");
    assertTrue(parsed.getLong("reconnect.backoff.max.ms") >= 10_000, "reconnect backoff max");
    assertEquals("127.0.0.1:1", String.join(",", parsed.getList("bootstrap.servers")));
  }

  static int assigned(GroupAssignment g, Uuid topic) {
    int n = 0;
    for (MemberAssignment m : g.members().values()) n += m.partitions().getOrDefault(topic, Set.of()).size();
    return n;
  }

  /**
   * Without rackplan.bootstrap.servers the plugin reads no plan and knows no topic name: the group is
   * still assigned on its own, every partition of its topics (by id).
   */
  @Test
  void aBrokerWithoutRackplanBootstrapStillAssignsEveryPartition() {
    RackplanServerAssignor a = new RackplanServerAssignor();
    a.configure(Map.of("broker.id", "1"));
    GroupAssignment g = a.assign(spec(three(Map.of())), DESCRIBER);
    assertEquals(6, assigned(g, T));
    assertEquals(1, a.fallbackCount.get());
    assertTrue(a.lastReason.contains("rackplan.bootstrap.servers"), a.lastReason);
  }

  /**
   * Topics whose names cannot be resolved (no Describe ACL for the broker's rackplan principal) are
   * assigned by id once the plan topics' ids, looked up by name after those topics were first met, do
   * not include them; the plan topic, found by that lookup, never is. Before any lookup they are withheld.
   */
  @Test
  void topicsWithoutANameAreAssignedByIdButThePlanTopicNever() {
    RackplanServerAssignor a = RackplanServerAssignor.forTest(new PlanStore(), Map.of());
    subscribed = Set.of(T, P);
    try {
      assertEquals(0, assigned(a.assign(spec(three(Map.of())), DESCRIBER), T), "plan topics' ids not known yet");
      a.readers().planTopicIds = new ServerReaders.PlanTopicIds(Set.of(P), Long.MAX_VALUE);
      GroupAssignment g = a.assign(spec(three(Map.of())), DESCRIBER);
      assertEquals(6, assigned(g, T));
      assertEquals(0, assigned(g, P));
      a.readers().planTopicIds = new ServerReaders.PlanTopicIds(Set.of(P), 0); // looked up before they were met
      assertEquals(0, assigned(a.assign(spec(three(Map.of())), DESCRIBER), T));
    } finally {
      subscribed = Set.of(T);
    }
  }

  /**
   * A plan topic pattern that matches ordinary topic names (a hunt configured {@code .*}: accepted, and then
   * no topic was ever assigned to a KIP-848 group, silently) is refused when the broker configures it,
   * naming the key; a pattern for the agent's plan topics is accepted.
   */
  @Test
  void aPlanTopicPatternMatchingOrdinaryTopicsIsRefused() {
    for (String bad : List.of(".*", ".+", "[a-z].*", "(?i).*s", "orders|_rackplan.*")) {
      org.apache.kafka.common.config.ConfigException e = org.junit.jupiter.api.Assertions.assertThrows(
          org.apache.kafka.common.config.ConfigException.class,
          () -> new RackplanServerAssignor().configure(Map.of("rackplan.plan.topic.pattern", bad)));
      assertTrue(e.getMessage().contains("rackplan.plan.topic.pattern") && e.getMessage().contains("ordinary topic names"), e.getMessage());
    }
    for (String ok : List.of("_rackplan\\.plans.*", "_rackplan\\..*", "rackplan-plans-(eu|us)"))
      assertEquals(ok, new RackplanConfig(Map.of("rackplan.plan.topic.pattern", ok)).planTopicRegex.pattern());
  }

  /** A plan topic pattern that is no regex: a ConfigException naming the key when the broker configures it. */
  @Test
  void aBadPlanTopicPatternIsRefusedNamingTheKey() {
    org.apache.kafka.common.config.ConfigException e = org.junit.jupiter.api.Assertions.assertThrows(
        org.apache.kafka.common.config.ConfigException.class,
        () -> new RackplanServerAssignor().configure(Map.of("rackplan.plan.topic.pattern", "([")));
    assertTrue(e.getMessage().contains("rackplan.plan.topic.pattern"), e.getMessage());
  }

  /**
   * A secured listener: the broker's client security settings (ssl.*, sasl.*, security.protocol) reach the
   * plugin's clients, as the Streams plugin's; the broker's other properties do not.
   */
  @Test
  void theBrokersClientSecuritySettingsReachThePluginsClients() {
    Map<String, Object> broker = new HashMap<>(Map.of("rackplan.plan.topic", "security-test.plans",
        "security.protocol", "SASL_SSL", "sasl.mechanism", "SCRAM-SHA-512", "ssl.truststore.type", "PKCS12",
        "log.dirs", "/tmp/x"));
    RackplanServerAssignor a = new RackplanServerAssignor();
    a.configure(broker); // no rackplan.bootstrap.servers: no clients started, the settings kept
    assertEquals("SASL_SSL", a.config().originals.get("security.protocol"));
    assertEquals("SCRAM-SHA-512", a.config().originals.get("sasl.mechanism"));
    assertEquals("PKCS12", a.config().originals.get("ssl.truststore.type"));
    assertTrue(!a.config().originals.containsKey("log.dirs"));
    broker.put("rackplan.bootstrap.servers", "127.0.0.1:1");
    Map<String, Object> ac = RackplanServerAssignor.adminConfig(new RackplanConfig(RackplanConfig.ofPlugin(broker)));
    assertEquals("SASL_SSL", ac.get("security.protocol"));
    assertEquals("SCRAM-SHA-512", new RackplanConfig(RackplanConfig.ofPlugin(broker)).readerConfig("x").get("sasl.mechanism"));
    assertTrue(!ac.containsKey("log.dirs"));
  }
}
