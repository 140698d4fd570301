package dev.rackplan.kafka.streams;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupMemberAssignment;
import org.apache.kafka.clients.admin.StreamsGroupMemberDescription;
import org.apache.kafka.clients.admin.StreamsGroupSubtopologyDescription;
import org.apache.kafka.common.GroupState;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.streams.assignor.TopologyDescriber;
import org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor;
import org.junit.jupiter.api.Test;

class RackplanStreamsTaskAssignorTest {
  static final String A = "az-a", B = "az-b", C = "az-c";

  /** Sub-topology 0: source "in" (6 partitions, partition p only in rack p%3), changelog "store" likewise. */
  static GroupTopology topology(Set<String> members, Set<String> processes) {
    List<Set<String>> racks = List.of(Set.of(A), Set.of(B), Set.of(C), Set.of(A), Set.of(B), Set.of(C));
    return new GroupTopology("app", members, processes,
        Map.of("0", new GroupTopology.Subtopology(List.of("in"), List.of("app-store-changelog"))),
        Map.of("in", racks, "app-store-changelog", racks));
  }

  static Map<String, Groups.M> threeRacks() {
    Map<String, Groups.M> m = new TreeMap<>();
    m.put("ma", Groups.M.of("pa", A));
    m.put("mb", Groups.M.of("pb", B));
    m.put("mc", Groups.M.of("pc", C));
    return m;
  }

  static final TopologyDescriber SIX_STATEFUL = Groups.describer(Map.of("0", 6), Set.of("0"));

  static RackplanStreamsTaskAssignor withCatalog(GroupTopology... groups) {
    StreamsCatalog catalog = new StreamsCatalog();
    catalog.replace(List.of(groups));
    RackplanStreamsTaskAssignor a = new RackplanStreamsTaskAssignor(catalog, new StickyTaskAssignor());
    a.configure(Map.of("rackplan.bootstrap.servers", "127.0.0.1:1", "rackplan.streams.refresh.ms", "3600000"));
    return a;
  }

  @Test
  void describedGroupIsAssignedInItsRacksWithStandbysElsewhere() {
    Map<String, Groups.M> members = threeRacks();
    GroupSpec spec = Groups.spec(members, 1, List.of());
    try (RackplanStreamsTaskAssignor a = withCatalog(topology(Set.of("ma", "mb", "mc"), Set.of("pa", "pb", "pc")))) {
      GroupAssignment r = a.assign(spec, SIX_STATEFUL);
      assertEquals(1, a.rackAware.get());
      assertEquals(0, a.fallbackCount());
      var active = Groups.active(r);
      assertEquals(Set.of(new Task("0", 0), new Task("0", 3)), active.get("ma"));
      assertEquals(Set.of(new Task("0", 1), new Task("0", 4)), active.get("mb"));
      assertEquals(Set.of(new Task("0", 2), new Task("0", 5)), active.get("mc"));
      var standby = Groups.standby(r);
      for (String m : standby.keySet()) {
        assertEquals(2, standby.get(m).size(), m);
        for (Task t : standby.get(m)) assertTrue(!active.get(m).contains(t));
      }
    }
  }

  @Test
  void standbysGoToAnotherRackThenToOtherClientTagValues() {
    // four members, two of them in az-a: every task active in az-a has its standby outside az-a
    Map<String, Groups.M> members = new TreeMap<>(threeRacks());
    members.put("ma2", Groups.M.of("pa2", A));
    GroupSpec spec = Groups.spec(members, 1, List.of());
    GroupView v = GroupView.of(spec, Groups.describer(Map.of("0", 8), Set.of("0")), 0);
    RackAwareTaskAssignment.Result r = RackAwareTaskAssignment.assign(v, TaskRacks.NONE, RackAwareTaskAssignment.Strategy.MIN_TRAFFIC);
    assertNull(RackAwareTaskAssignment.violation(v, r, RackAwareTaskAssignment.Strategy.MIN_TRAFFIC));
    Map<Task, String> activeRack = new TreeMap<>();
    for (var e : r.active().entrySet()) for (Task t : e.getValue()) activeRack.put(t, members.get(e.getKey()).rack());
    for (var e : r.standby().entrySet())
      for (Task t : e.getValue()) assertTrue(!members.get(e.getKey()).rack().equals(activeRack.get(t)), e.getKey() + " " + t);
    // no racks, but rack.aware.assignment.tags=[zone]: a standby goes to another zone than its active
    Map<String, Groups.M> tagged = new TreeMap<>();
    String[] zones = {"z1", "z1", "z2", "z3"};
    for (int i = 0; i < 4; i++) tagged.put("t" + i, Groups.M.of("q" + i, null).withTags(Map.of("zone", zones[i])));
    GroupSpec tspec = Groups.spec(tagged, 1, List.of("zone"));
    GroupView tv = GroupView.of(tspec, Groups.describer(Map.of("0", 8), Set.of("0")), 0);
    RackAwareTaskAssignment.Result tr = RackAwareTaskAssignment.assign(tv, TaskRacks.NONE, RackAwareTaskAssignment.Strategy.MIN_TRAFFIC);
    Map<Task, String> activeZone = new TreeMap<>();
    for (var e : tr.active().entrySet()) for (Task t : e.getValue()) activeZone.put(t, tagged.get(e.getKey()).tags().get("zone"));
    int standbys = 0;
    for (var e : tr.standby().entrySet())
      for (Task t : e.getValue()) {
        standbys++;
        assertTrue(!tagged.get(e.getKey()).tags().get("zone").equals(activeZone.get(t)), e.getKey() + " " + t);
      }
    assertEquals(8, standbys);
  }

  @Test
  void unknownGroupFallsBackToKafkasStickyAndCountsWhy() {
    Map<String, Groups.M> members = threeRacks();
    GroupSpec spec = Groups.spec(members, 1, List.of());
    // described members are others: a new group, or one not described yet
    try (RackplanStreamsTaskAssignor a = withCatalog(topology(Set.of("x1", "x2"), Set.of("px")))) {
      GroupAssignment r = a.assign(spec, SIX_STATEFUL);
      assertEquals(new StickyTaskAssignor().assign(spec, SIX_STATEFUL), r);
      assertEquals(Map.of("unknown-group", 1L), a.fallbacksByKind());
      assertEquals(0, a.rackAware.get());
      assertTrue(a.lastReason.contains("no described Streams group has these members"), a.lastReason);
    }
  }

  /** The JMX bean counts every instance's assignments (a broker's rebuilds), by kind for the fallbacks. */
  @Test
  void theJmxBeanCountsEveryInstancesAssignments() throws Exception {
    RackplanStreamsTaskAssignor.registerMBean();
    javax.management.MBeanServer server = java.lang.management.ManagementFactory.getPlatformMBeanServer();
    javax.management.ObjectName name = new javax.management.ObjectName("dev.rackplan:type=RackplanStreamsTaskAssignor");
    GroupSpec spec = Groups.spec(threeRacks(), 1, List.of());
    long rackAware = (Long) server.getAttribute(name, "RackAwareAssignments");
    long fallbacks = (Long) server.getAttribute(name, "FallbackAssignments");
    try (RackplanStreamsTaskAssignor first = withCatalog(topology(Set.of("ma", "mb", "mc"), Set.of("pa", "pb", "pc")));
        RackplanStreamsTaskAssignor rebuilt = withCatalog(topology(Set.of("ma", "mb", "mc"), Set.of("pa", "pb", "pc")));
        RackplanStreamsTaskAssignor unconfigured = new RackplanStreamsTaskAssignor(new StreamsCatalog(), new StickyTaskAssignor())) {
      unconfigured.configure(Map.of());
      first.assign(spec, SIX_STATEFUL);
      rebuilt.assign(spec, SIX_STATEFUL);
      unconfigured.assign(spec, SIX_STATEFUL);
      assertEquals(rackAware + 2, (Long) server.getAttribute(name, "RackAwareAssignments"));
      assertEquals(fallbacks + 1, (Long) server.getAttribute(name, "FallbackAssignments"));
      String byKind = (String) server.getAttribute(name, "FallbacksByKind");
      assertTrue(byKind.contains("unconfigured="), byKind);
      assertEquals(1, first.rackAware.get(), "each instance still counts its own");
    }
  }

  @Test
  void unconfiguredPluginFallsBackToKafkasSticky() {
    GroupSpec spec = Groups.spec(threeRacks(), 1, List.of());
    try (RackplanStreamsTaskAssignor a = new RackplanStreamsTaskAssignor(new StreamsCatalog(), new StickyTaskAssignor())) {
      a.configure(Map.of());
      assertEquals(new StickyTaskAssignor().assign(spec, SIX_STATEFUL), a.assign(spec, SIX_STATEFUL));
      assertEquals(Map.of("unconfigured", 1L), a.fallbacksByKind());
    }
  }

  @Test
  void changedTopologyIsNotAssignedWithTheOldDescription() {
    GroupSpec spec = Groups.spec(threeRacks(), 0, List.of());
    TopologyDescriber eight = Groups.describer(Map.of("0", 8), Set.of("0")); // partitions added since described
    try (RackplanStreamsTaskAssignor a = withCatalog(topology(Set.of("ma", "mb", "mc"), Set.of("pa", "pb", "pc")))) {
      a.assign(spec, eight);
      assertEquals(Map.of("unknown-group", 1L), a.fallbacksByKind());
      assertTrue(a.lastReason.contains("other sub-topologies or partition counts"), a.lastReason);
    }
  }

  @Test
  void withoutKafkasStickyTheFallbackIsRackplansWithoutRacks() {
    Map<String, Groups.M> members = threeRacks();
    GroupSpec spec = Groups.spec(members, 1, List.of());
    try (RackplanStreamsTaskAssignor a = new RackplanStreamsTaskAssignor(new StreamsCatalog(), null)) {
      a.configure(Map.of());
      GroupAssignment r = a.assign(spec, SIX_STATEFUL);
      GroupView v = GroupView.of(spec, SIX_STATEFUL, 0);
      var result = new RackAwareTaskAssignment.Result(Groups.active(r), Groups.standby(r));
      assertNull(RackAwareTaskAssignment.violation(v, result, RackAwareTaskAssignment.Strategy.MIN_TRAFFIC));
      assertEquals(1, a.fallbackCount());
    }
  }

  @Test
  void aFailingAssignmentFallsBackInsteadOfFailingTheGroup() {
    GroupSpec spec = Groups.spec(threeRacks(), 1, List.of());
    TaskRacks broken = new TaskRacks() {
      @Override public int activeCross(Task task, String rack) { throw new IllegalStateException("boom"); }
      @Override public int standbyCross(Task task, String rack) { return 0; }
    };
    RackplanStreamsTaskAssignor a = new RackplanStreamsTaskAssignor(new StreamsCatalog(), new StickyTaskAssignor());
    GroupAssignment r = a.assignWith(broken, GroupView.of(spec, SIX_STATEFUL, 0), spec, SIX_STATEFUL);
    assertEquals(new StickyTaskAssignor().assign(spec, SIX_STATEFUL), r);
    assertEquals(Map.of("error", 1L), a.fallbacksByKind());
  }

  @Test
  void matchingPrefersTheGroupSharingMostMembersAndRefusesTies() {
    StreamsCatalog c = new StreamsCatalog();
    GroupTopology g1 = topology(Set.of("ma", "mb"), Set.of("pa", "pb"));
    GroupTopology g2 = new GroupTopology("other", Set.of("mc"), Set.of("pc"), g1.subtopologies(), g1.topicRacks());
    c.replace(List.of(g1, g2));
    Map<String, Integer> six = Map.of("0", 6);
    assertEquals("app", c.match(Set.of("ma", "mb", "mc"), Set.of("pa", "pb", "pc"), six).topology().groupId());
    // a restarted instance: new member id, same process id
    assertEquals("other", c.match(Set.of("new"), Set.of("pc"), six).topology().groupId());
    StreamsCatalog.Match tie = c.match(Set.of("ma", "mc"), Set.of(), six);
    assertNull(tie.topology());
    assertTrue(tie.reason().contains("several groups"), tie.reason());
  }

  @Test
  void aCaughtUpStandbyTakesTheActiveWhenRacksTie() {
    // sub-topology 0: 2 partitions, all replicas in every rack: only stickiness and state decide
    GroupTopology t = new GroupTopology("app", Set.of("m1", "m2", "m3"), Set.of("p1", "p2", "p3"),
        Map.of("0", new GroupTopology.Subtopology(List.of("in"), List.of("log"))),
        Map.of("in", List.of(Set.of(A, B, C), Set.of(A, B, C)), "log", List.of(Set.of(A, B, C), Set.of(A, B, C))));
    TopologyDescriber two = Groups.describer(Map.of("0", 2), Set.of("0"));
    Map<String, Groups.M> members = new TreeMap<>();
    // m1 owned both tasks; it must give one up (balance). m3 reports offsets of task 0_1 within the lag,
    // m2 none: 0_1 goes to m3 (no restore), 0_0 stays.
    members.put("m1", Groups.M.of("p1", A).withActive(Map.of("0", Set.of(0, 1)))
        .withOffsets(Map.of("0", Map.of(0, 1_000L, 1, 1_000L)), Map.of("0", Map.of(0, 1_000L, 1, 1_000L))));
    members.put("m2", Groups.M.of("p2", B));
    members.put("m3", Groups.M.of("p3", C).withOffsets(Map.of("0", Map.of(1, 990L)), Map.of()));
    GroupSpec spec = Groups.spec(members, 0, List.of());
    try (RackplanStreamsTaskAssignor a = withCatalog(t)) {
      var active = Groups.active(a.assign(spec, two));
      assertEquals(Set.of(new Task("0", 0)), active.get("m1"));
      assertEquals(Set.of(new Task("0", 1)), active.get("m3"));
      assertEquals(Set.of(), active.get("m2"));
    }
    GroupView v = GroupView.of(spec, two, 5);
    assertEquals(GroupView.SOME_STATE, v.tier(new Task("0", 1), "m3")); // 10 behind: beyond a lag of 5
    assertEquals(GroupView.CAUGHT_UP, GroupView.of(spec, two, 10).tier(new Task("0", 1), "m3"));
  }

  @Test
  void reassigningItsOwnResultMovesNothing() {
    Random rnd = new Random(7);
    for (int i = 0; i < 100; i++) {
      KafkaStickyParityTest.Case c = KafkaStickyParityTest.randomCase(rnd);
      for (RackAwareTaskAssignment.Strategy s : RackAwareTaskAssignment.Strategy.values()) {
        GroupView v = GroupView.of(c.spec(), c.describer(), 0);
        RackAwareTaskAssignment.Result r = RackAwareTaskAssignment.assign(v, c.app().topology(), s);
        assertNull(RackAwareTaskAssignment.violation(v, r, s), "case " + i + " " + s);
        Map<String, Groups.M> again = new TreeMap<>();
        for (Map.Entry<String, Groups.M> e : c.members().entrySet())
          again.put(e.getKey(), e.getValue().withActive(Groups.compact(r.active().get(e.getKey())))
              .withStandby(Groups.compact(r.standby().get(e.getKey()))));
        GroupSpec spec2 = Groups.spec(again, v.numStandbys, v.tagKeys);
        RackAwareTaskAssignment.Result r2 = RackAwareTaskAssignment.assign(GroupView.of(spec2, c.describer(), 0), c.app().topology(), s);
        assertEquals(r.active(), r2.active(), "case " + i + " " + s);
      }
    }
  }

  @Test
  void violationsAreNamed() {
    GroupView v = GroupView.of(Groups.spec(threeRacks(), 1, List.of()), SIX_STATEFUL, 0);
    var s = RackAwareTaskAssignment.Strategy.MIN_TRAFFIC;
    Map<String, Set<Task>> active = Map.of("ma", Set.of(new Task("0", 0), new Task("0", 1)),
        "mb", Set.of(new Task("0", 2), new Task("0", 3)), "mc", Set.of(new Task("0", 4), new Task("0", 5)));
    Map<String, Set<Task>> none = Map.of("ma", Set.of(), "mb", Set.of(), "mc", Set.of());
    assertNull(RackAwareTaskAssignment.violation(v, new RackAwareTaskAssignment.Result(active, none), s));
    var twice = Map.of("ma", Set.of(new Task("0", 0), new Task("0", 1)), "mb", Set.of(new Task("0", 1), new Task("0", 3)),
        "mc", Set.of(new Task("0", 4), new Task("0", 5)));
    assertTrue(RackAwareTaskAssignment.violation(v, new RackAwareTaskAssignment.Result(twice, none), s).contains("active twice"));
    var uneven = Map.of("ma", Set.of(new Task("0", 0), new Task("0", 1), new Task("0", 2)), "mb", Set.of(new Task("0", 3)),
        "mc", Set.of(new Task("0", 4), new Task("0", 5)));
    assertTrue(RackAwareTaskAssignment.violation(v, new RackAwareTaskAssignment.Result(uneven, none), s).contains("outside 2..2"));
    var sameProcess = Map.of("ma", Set.of(new Task("0", 0)), "mb", Set.<Task>of(), "mc", Set.<Task>of());
    assertTrue(RackAwareTaskAssignment.violation(v, new RackAwareTaskAssignment.Result(active, sameProcess), s).contains("twice"));
  }

  @Test
  void describedGroupsBecomeTopologiesWithRepartitionSourcesAndChangelogs() {
    var sub = new StreamsGroupSubtopologyDescription("0", List.of("in"), List.of("app-rep"),
        Map.of("app-store-changelog", new StreamsGroupSubtopologyDescription.TopicInfo(6, 3, Map.of())),
        Map.of());
    var sub1 = new StreamsGroupSubtopologyDescription("1", List.of(), List.of(),
        Map.of(), Map.of("app-rep", new StreamsGroupSubtopologyDescription.TopicInfo(4, 3, Map.of())));
    var empty = new StreamsGroupMemberAssignment(List.of(), List.of(), List.of());
    var member = new StreamsGroupMemberDescription("m1", 3, java.util.Optional.empty(), java.util.Optional.of(A), "c", "h", 1,
        "p1", java.util.Optional.empty(), Map.of(), List.of(), List.of(), empty, empty, false);
    var d = new StreamsGroupDescription("app", 3, 3, 1, List.of(sub, sub1), List.of(member), GroupState.STABLE, new org.apache.kafka.common.Node(1, "h", 9092), Set.of());
    Map<String, List<Set<String>>> racks = Map.of("in", List.of(Set.of(A)), "app-store-changelog", List.of(Set.of(B)),
        "app-rep", List.of(Set.of(C)), "unrelated", List.of(Set.of(A)));
    GroupTopology t = StreamsCatalogReader.topology(d, racks);
    assertEquals(Set.of("m1"), t.memberIds());
    assertEquals(Set.of("p1"), t.processIds());
    assertEquals(new GroupTopology.Subtopology(List.of("in"), List.of("app-store-changelog")), t.subtopologies().get("0"));
    assertEquals(new GroupTopology.Subtopology(List.of("app-rep"), List.of()), t.subtopologies().get("1"));
    assertEquals(Set.of("in", "app-store-changelog", "app-rep"), t.topicRacks().keySet());
    assertEquals(2, t.activeCross(new Task("0", 0), C)); // "in" in A, the changelog in B
    assertEquals(1, t.standbyCross(new Task("0", 0), A));
    assertEquals(0, t.activeCross(new Task("0", 0), null));
  }

  @Test
  void aGroupIsLoggedWhenFirstDescribedAndWhenItsMembersChange() {
    GroupTopology one = topology(Set.of("m1"), Set.of("p1"));
    GroupTopology two = topology(Set.of("m1", "m2"), Set.of("p1", "p2"));
    assertEquals(List.of("rackplan: Streams group app described: 1 member, 1 sub-topology, replica racks of 2 topics"),
        StreamsCatalogReader.news(List.of(), List.of(one)));
    assertEquals(List.of(), StreamsCatalogReader.news(List.of(one), List.of(one)));
    assertEquals(List.of(), StreamsCatalogReader.news(List.of(two), List.of(topology(Set.of("m2", "m1"), Set.of("p1")))));
    assertEquals(List.of("rackplan: Streams group app described: 2 members, 1 sub-topology, replica racks of 2 topics"),
        StreamsCatalogReader.news(List.of(one), List.of(two)));
    assertEquals(List.of(), StreamsCatalogReader.news(List.of(one, two), List.of()));
  }

  @Test
  void badSettingsAreRefusedByName() {
    RackplanStreamsTaskAssignor a = new RackplanStreamsTaskAssignor(new StreamsCatalog(), null);
    ConfigException e = assertThrows(ConfigException.class, () -> a.configure(Map.of("rackplan.streams.strategy", "fastest")));
    assertTrue(e.getMessage().contains("rackplan.streams.strategy"), e.getMessage());
    e = assertThrows(ConfigException.class, () -> a.configure(Map.of("rackplan.streams.refresh.ms", "0")));
    assertTrue(e.getMessage().contains("rackplan.streams.refresh.ms"), e.getMessage());
    assertNotNull(new dev.rackplan.kafka.RackplanConfig(Map.of("rackplan.streams.strategy", "balance_subtopology")));
  }

  /**
   * A topic whose describe is not answered in time (a slow broker) counts as racks unknown, like one that
   * fails: the round keeps the other topics' racks instead of failing as a whole.
   */
  @Test
  void aTopicNotDescribedInTimeCountsAsRacksUnknown() throws Exception {
    var answered = new org.apache.kafka.common.internals.KafkaFutureImpl<org.apache.kafka.clients.admin.TopicDescription>();
    org.apache.kafka.common.Node n = new org.apache.kafka.common.Node(1, "h", 9092, A);
    answered.complete(new org.apache.kafka.clients.admin.TopicDescription("in", false, List.of(
        new org.apache.kafka.common.TopicPartitionInfo(0, n, List.of(n), List.of(n)))));
    var failed = new org.apache.kafka.common.internals.KafkaFutureImpl<org.apache.kafka.clients.admin.TopicDescription>();
    failed.completeExceptionally(new org.apache.kafka.common.errors.UnknownTopicOrPartitionException("not yet"));
    var silent = new org.apache.kafka.common.internals.KafkaFutureImpl<org.apache.kafka.clients.admin.TopicDescription>();
    Map<String, List<Set<String>>> racks = StreamsCatalogReader.racks(
        Map.of("in", answered, "new", failed, "slow", silent), 50);
    assertEquals(Map.of("in", List.of(Set.of(A))), racks);
  }

  /** The catalog's admin client takes the broker's client security settings, and nothing else of the broker's. */
  @Test
  void theCatalogAdminTakesTheBrokersClientSecuritySettings() {
    Map<String, Object> ac = RackplanStreamsTaskAssignor.adminConfig(Map.of("rackplan.bootstrap.servers", "127.0.0.1:1",
        "security.protocol", "SASL_SSL", "sasl.mechanism", "PLAIN", "ssl.truststore.type", "PKCS12", "log.dirs", "/tmp/x"));
    assertEquals("SASL_SSL", ac.get("security.protocol"));
    assertEquals("PLAIN", ac.get("sasl.mechanism"));
    assertEquals("PKCS12", ac.get("ssl.truststore.type"));
    assertEquals("rackplan-streams-assignor-catalog", ac.get("client.id"));
    assertEquals("none", ac.get("metadata.recovery.strategy"));
    assertNull(ac.get("log.dirs"));
  }
}
