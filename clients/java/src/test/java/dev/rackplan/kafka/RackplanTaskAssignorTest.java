package dev.rackplan.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.SortedSet;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.assignment.ApplicationState;
import org.apache.kafka.streams.processor.assignment.AssignmentConfigs;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsAssignment;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsAssignment.AssignedTask;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsState;
import org.apache.kafka.streams.processor.assignment.ProcessId;
import org.apache.kafka.streams.processor.assignment.TaskInfo;
import org.apache.kafka.streams.processor.assignment.TaskTopicPartition;
import org.apache.kafka.streams.state.HostInfo;
import org.junit.jupiter.api.Test;

class RackplanTaskAssignorTest {
  static final ProcessId P1 = new ProcessId(new UUID(0, 1));
  static final ProcessId P2 = new ProcessId(new UUID(0, 2));
  static final ProcessId P3 = new ProcessId(new UUID(0, 3));

  static TaskInfo task(String id, boolean stateful) {
    return new TaskInfo() {
      @Override public TaskId id() { return TaskId.parse(id); }
      @Override public boolean isStateful() { return stateful; }
      @Override public Set<String> stateStoreNames() { return stateful ? Set.of("counts") : Set.of(); }
      @Override public Set<TaskTopicPartition> topicPartitions() { return Set.of(); }
    };
  }

  static KafkaStreamsState client(ProcessId pid) {
    return new KafkaStreamsState() {
      @Override public ProcessId processId() { return pid; }
      @Override public int numProcessingThreads() { return 1; }
      @Override public SortedSet<String> consumerClientIds() { return new TreeSet<>(Set.of(pid + "-c")); }
      @Override public SortedSet<TaskId> previousActiveTasks() { return new TreeSet<>(); }
      @Override public SortedSet<TaskId> previousStandbyTasks() { return new TreeSet<>(); }
      @Override public long lagFor(TaskId t) { return 0; }
      @Override public SortedSet<TaskId> prevTasksByLag(String c) { return new TreeSet<>(); }
      @Override public Map<TaskId, Long> statefulTasksToLagSums() { return Map.of(); }
      @Override public Optional<HostInfo> hostInfo() { return Optional.empty(); }
      @Override public Map<String, String> clientTags() { return Map.of(); }
      @Override public Optional<String> rackId() { return Optional.empty(); }
    };
  }

  static ApplicationState app(ProcessId... pids) {
    Map<TaskId, TaskInfo> tasks = new TreeMap<>();
    for (String t : List.of("0_0", "0_1", "0_2")) tasks.put(TaskId.parse(t), task(t, true));
    tasks.put(TaskId.parse("1_0"), task("1_0", false));
    Map<ProcessId, KafkaStreamsState> clients = new TreeMap<>();
    for (ProcessId p : pids) clients.put(p, client(p));
    return new ApplicationState() {
      @Override public Map<ProcessId, KafkaStreamsState> kafkaStreamsStates(boolean lags) { return clients; }
      @Override public AssignmentConfigs assignmentConfigs() {
        return new AssignmentConfigs(10_000L, 2, 1, 600_000L, List.of(), 10, 1, "none");
      }
      @Override public Map<TaskId, TaskInfo> allTasks() { return tasks; }
    };
  }

  static byte[] plan(String appId, long gen, Map<ProcessId, List<List<String>>> a) {
    Map<String, Object> assignment = new LinkedHashMap<>();
    for (Map.Entry<ProcessId, List<List<String>>> e : a.entrySet())
      assignment.put(e.getKey().id().toString(),
          Map.of("active", e.getValue().get(0), "standby", e.getValue().get(1), "warmup", e.getValue().get(2)));
    Map<String, Object> v = new LinkedHashMap<>();
    v.put("schema", 1L);
    v.put("generation", gen);
    v.put("state", "proposed");
    v.put("cluster_fingerprint", Fixtures.FP);
    v.put("streams_app", Map.of("application_id", appId, "assignment", assignment));
    v.put("stats", Map.of());
    return Json.write(v).getBytes(StandardCharsets.UTF_8);
  }

  static final Map<ProcessId, List<List<String>>> GOOD = Map.of(
      P1, List.of(List.of("0_0", "1_0"), List.of("0_1"), List.of()),
      P2, List.of(List.of("0_1"), List.of("0_2"), List.of()),
      P3, List.of(List.of("0_2"), List.of(), List.of("0_0")));

  static Map<ProcessId, Map<TaskId, AssignedTask.Type>> byClient(List<KafkaStreamsAssignment> out) {
    Map<ProcessId, Map<TaskId, AssignedTask.Type>> m = new TreeMap<>();
    for (KafkaStreamsAssignment a : out) {
      Map<TaskId, AssignedTask.Type> t = new TreeMap<>();
      for (AssignedTask x : a.tasks().values()) t.put(x.id(), x.type());
      m.put(a.processId(), t);
    }
    return m;
  }

  @Test
  void appliesAFittingPlanWithAFollowUpRebalance() {
    PlanStore store = new PlanStore();
    assertEquals(PlanStore.Outcome.APPLIED, store.apply("streams/clicks", plan("clicks", 2, GOOD)));
    RackplanTaskAssignor a = RackplanTaskAssignor.forTest("clicks", store, 30_000);
    Instant before = Instant.now();
    List<KafkaStreamsAssignment> out = List.copyOf(a.assign(app(P1, P2, P3)).assignment());
    Map<ProcessId, Map<TaskId, AssignedTask.Type>> got = byClient(out);
    assertEquals(Map.of(TaskId.parse("0_0"), AssignedTask.Type.ACTIVE, TaskId.parse("1_0"), AssignedTask.Type.ACTIVE,
        TaskId.parse("0_1"), AssignedTask.Type.STANDBY), got.get(P1));
    assertEquals(AssignedTask.Type.STANDBY, got.get(P3).get(TaskId.parse("0_0")), "a warm-up is a standby");
    for (KafkaStreamsAssignment x : out)
      assertFalse(x.followupRebalanceDeadline().orElseThrow().isBefore(before.plusMillis(29_000)));
    assertEquals(1, a.planCount.get());
  }

  @Test
  void mismatchesNameTheReason() {
    Map<TaskId, TaskInfo> tasks = app().allTasks();
    Set<ProcessId> three = Set.of(P1, P2, P3);
    assertNull(RackplanTaskAssignor.mismatch(decode(GOOD), three, tasks));
    assertTrue(RackplanTaskAssignor.mismatch(null, three, tasks).contains("no plan"));
    assertTrue(RackplanTaskAssignor.mismatch(decode(GOOD), Set.of(P1, P2), tasks).contains("differ from the live clients"));
    Map<ProcessId, List<List<String>>> bad = new HashMap<>(GOOD);
    bad.put(P3, List.of(List.of("0_2"), List.of("0_2"), List.of()));
    assertTrue(RackplanTaskAssignor.mismatch(decode(bad), three, tasks).contains("active and standby"));
    bad.put(P3, List.of(List.of("0_2"), List.of("1_0"), List.of()));
    assertTrue(RackplanTaskAssignor.mismatch(decode(bad), three, tasks).contains("stateless"));
    bad.put(P3, List.of(List.of("0_2", "0_1"), List.of(), List.of()));
    assertTrue(RackplanTaskAssignor.mismatch(decode(bad), three, tasks).contains("active twice"));
    bad.put(P3, List.of(List.of(), List.of(), List.of()));
    assertTrue(RackplanTaskAssignor.mismatch(decode(bad), three, tasks).contains("the app has 4"));
    bad.put(P3, List.of(List.of("0_2", "7_0"), List.of(), List.of()));
    assertTrue(RackplanTaskAssignor.mismatch(decode(bad), three, tasks).contains("does not have"));
  }

  static StreamsPlan decode(Map<ProcessId, List<List<String>>> a) {
    try {
      return StreamsPlan.decode("streams/clicks", plan("clicks", 1, a));
    } catch (ConsumerPlan.PlanException e) {
      throw new AssertionError(e);
    }
  }

  @Test
  void fallsBackToKafkasHighAvailabilityAssignor() {
    PlanStore store = new PlanStore();
    store.apply("streams/clicks", plan("clicks", 1, GOOD));
    RackplanTaskAssignor a = RackplanTaskAssignor.forTest("clicks", store, 30_000);
    List<KafkaStreamsAssignment> out = List.copyOf(a.assign(app(P1, P2)).assignment()); // P3 is gone
    assertTrue(a.lastReason.contains("differ from the live clients"), a.lastReason);
    assertEquals("HighAvailabilityTaskAssignor", a.lastFallbackAssignor);
    Map<TaskId, Integer> actives = new TreeMap<>();
    for (Map.Entry<ProcessId, Map<TaskId, AssignedTask.Type>> c : byClient(out).entrySet())
      for (Map.Entry<TaskId, AssignedTask.Type> t : c.getValue().entrySet())
        if (t.getValue() == AssignedTask.Type.ACTIVE) actives.merge(t.getKey(), 1, Integer::sum);
    assertEquals(4, actives.size());
    assertTrue(actives.values().stream().allMatch(n -> n == 1));
    for (KafkaStreamsAssignment x : out) assertTrue(x.followupRebalanceDeadline().isPresent());
    assertEquals(1, a.fallbackCount.get());
  }

  @Test
  void malformedStreamsRecordsAreRefused() {
    PlanStore store = new PlanStore();
    String good = new String(plan("clicks", 3, GOOD), StandardCharsets.UTF_8);
    assertEquals(PlanStore.Outcome.MALFORMED, store.apply("streams/clicks",
        good.replace("\"0_1\"", "\"zero\"").getBytes(StandardCharsets.UTF_8)));
    assertEquals(PlanStore.Outcome.MALFORMED, store.apply("streams/other", good.getBytes(StandardCharsets.UTF_8)));
    assertEquals(PlanStore.Outcome.APPLIED, store.apply("streams/clicks", good.getBytes(StandardCharsets.UTF_8)));
    assertEquals(PlanStore.Outcome.STALE, store.apply("streams/clicks", plan("clicks", 3, GOOD)));
    assertTrue(store.ignored().get(0).contains("is not a task id"));
    assertTrue(store.ignored().get(1).contains("does not match the key"));
  }

  /**
   * A task id of the plan's format whose sub-topology overflows an int ("99999999999_0") is one Kafka
   * Streams cannot parse: the record is refused when read, naming it, and assign falls back (never throws).
   */
  @Test
  void aTaskIdBeyondAnIntIsRefusedWhenReadAndAssignFallsBack() {
    PlanStore store = new PlanStore();
    Map<ProcessId, List<List<String>>> bad = new HashMap<>(GOOD);
    bad.put(P3, List.of(List.of("0_2", "99999999999_0"), List.of(), List.of("0_0")));
    assertEquals(PlanStore.Outcome.MALFORMED, store.apply("streams/clicks", plan("clicks", 2, bad)));
    assertTrue(store.ignored().get(0).contains("99999999999_0"), store.ignored().get(0));
    bad.put(P3, List.of(List.of("0_2"), List.of("0_4294967296"), List.of("0_0")));
    assertEquals(PlanStore.Outcome.MALFORMED, store.apply("streams/clicks", plan("clicks", 3, bad)));
    RackplanTaskAssignor a = RackplanTaskAssignor.forTest("clicks", store, 30_000);
    a.assign(app(P1, P2, P3));
    assertEquals(1, a.fallbackCount.get());
  }

  /**
   * state, as the agent's decoder reads it: proposed or revoking when present (anything else, null
   * included, is refused), proposed when missing. A revoking plan (a handover's first phase) is read but
   * not applied: the app falls back, the reason naming the state.
   */
  @Test
  void aStreamsPlansStateIsProposedOrRevokingAndOnlyProposedIsApplied() {
    String good = new String(plan("clicks", 2, GOOD), StandardCharsets.UTF_8);
    for (String state : new String[] {"\"bogus\"", "null", "1"})
      assertEquals(PlanStore.Outcome.MALFORMED, new PlanStore().apply("streams/clicks",
          good.replace("\"state\":\"proposed\"", "\"state\":" + state).getBytes(StandardCharsets.UTF_8)), state);
    PlanStore store = new PlanStore();
    assertEquals(PlanStore.Outcome.APPLIED, store.apply("streams/clicks",
        good.replace("\"state\":\"proposed\",", "").getBytes(StandardCharsets.UTF_8)));
    assertEquals("proposed", store.latestStreams("streams/clicks").state);
    assertEquals(PlanStore.Outcome.APPLIED, store.apply("streams/clicks",
        new String(plan("clicks", 3, GOOD), StandardCharsets.UTF_8).replace("\"proposed\"", "\"revoking\"")
            .getBytes(StandardCharsets.UTF_8)));
    RackplanTaskAssignor a = RackplanTaskAssignor.forTest("clicks", store, 30_000);
    a.assign(app(P1, P2, P3));
    assertEquals(0, a.planCount.get());
    assertTrue(a.lastReason.contains("in state revoking"), a.lastReason);
  }
}
