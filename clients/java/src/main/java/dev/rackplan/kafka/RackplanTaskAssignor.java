package dev.rackplan.kafka;

import java.time.Instant;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.assignment.ApplicationState;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsAssignment;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsAssignment.AssignedTask;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsState;
import org.apache.kafka.streams.processor.assignment.ProcessId;
import org.apache.kafka.streams.processor.assignment.TaskAssignor;
import org.apache.kafka.streams.processor.assignment.TaskInfo;
import org.apache.kafka.streams.processor.assignment.assignors.StickyTaskAssignor;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A KIP-924 {@link TaskAssignor} for Kafka Streams ({@code task.assignor.class}) that applies the
 * app's plan ({@code streams/<application.id>} on the plan topic) when it fits the live app: the
 * same clients (plan process ids = the live Streams process ids), every task exactly once active,
 * standbys and warm-ups only of stateful tasks, and never a task's active and a standby (or warm-up)
 * on one client. Warm-ups are given as standbys (KIP-924 has no other kind).
 *
 * <p>Otherwise Kafka Streams' own default assigns, as if no {@code task.assignor.class} were set:
 * its HighAvailabilityTaskAssignor with its rack-aware optimiser (or its FallbackPriorTaskAssignor
 * when the changelog lags are unknown), run on the KIP-924 view by {@link HighAvailabilityFallback};
 * the reason is logged and counted. Should Kafka's internals not be usable (another Kafka version),
 * its public {@link StickyTaskAssignor} assigns instead, also logged.
 *
 * <p>At every assignment the leader also registers the app's live clients on the registrations
 * topic ({@link StreamsRegistrar}): the agent plans the app without the operator listing its clients.
 *
 * <p>Every assignment asks for a follow-up rebalance after {@code rackplan.streams.followup.ms}
 * (60 s; at most a third of {@code rackplan.registration.ttl.ms}, so the registrations stay fresh):
 * KIP-924's way for the leader to look at the plan topic again, so a new plan reaches the app within
 * that time plus one rebalance. The cluster fingerprint is not checked: Streams gives an
 * assignor replica racks only when rack-aware assignment is configured.
 */
public class RackplanTaskAssignor implements TaskAssignor {
  private static final Logger LOG = LoggerFactory.getLogger(RackplanTaskAssignor.class);

  private PlanStore store = new PlanStore();
  private String applicationId;
  private RackplanConfig config = new RackplanConfig(Map.of());
  /** Publishes the live clients' registrations (null: not configured, as in tests). */
  StreamsRegistrar registrar;
  private long followupMs = 60_000L;
  final AtomicLong planCount = new AtomicLong();
  final AtomicLong fallbackCount = new AtomicLong();
  /** Across the JVM's assignor instances (Streams makes one per assignment): assignments by plan. */
  private static final AtomicLong PLAN_ASSIGNMENTS = new AtomicLong();

  public static long planAssignments() {
    return PLAN_ASSIGNMENTS.get();
  }

  /** Across the JVM: which of Kafka's assignors the newest fallback ran ("" before any fallback). */
  private static volatile String lastFallback = "";

  public static String lastFallback() {
    return lastFallback;
  }
  volatile String lastReason = "";
  /** Which of Kafka's assignors the last fallback ran (or why the public StickyTaskAssignor did). */
  volatile String lastFallbackAssignor = "";

  @Override
  public void configure(Map<String, ?> configs) {
    Map<String, Object> mine = RackplanConfig.ofPlugin(configs);
    if (configs.get(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG) != null)
      mine.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, configs.get(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG));
    RackplanConfig config = new RackplanConfig(mine);
    this.config = config;
    // The leader re-registers the app's clients at every assignment: at least every third of the TTL.
    followupMs = Math.min(config.streamsFollowupMs, Math.max(1L, config.registrationTtlMs / 3));
    Object app = configs.get(StreamsConfig.APPLICATION_ID_CONFIG);
    applicationId = app == null ? null : app.toString();
    if (applicationId != null && mine.containsKey(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG)) {
      // Kafka Streams makes a new TaskAssignor for every assignment: the plan reader is shared.
      String bootstrap = String.valueOf(mine.get(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG));
      String readerKey = bootstrap + "|" + config.planTopic + "|" + config.planTopicPattern;
      store = READERS.computeIfAbsent(readerKey, k -> {
        PlanStore s = new PlanStore();
        new RackplanClient(config, s, null, "rackplan-streams-" + applicationId, null).start();
        return s;
      });
      registrar = StreamsRegistrar.BY_TARGET.computeIfAbsent(bootstrap + "|" + config.registrationsTopic,
          k -> new StreamsRegistrar(config, "rackplan-streams-" + applicationId + "-registration"));
    }
  }

  /** One plan reader per (bootstrap, plan topic) in the JVM, alive as long as the JVM (daemon thread). */
  static final Map<String, PlanStore> READERS = new java.util.concurrent.ConcurrentHashMap<>();

  /** For tests: no I/O. */
  static RackplanTaskAssignor forTest(String applicationId, PlanStore store, long followupMs) {
    RackplanTaskAssignor a = new RackplanTaskAssignor();
    a.applicationId = applicationId;
    a.store = store;
    a.followupMs = followupMs;
    return a;
  }

  @Override
  public TaskAssignment assign(ApplicationState state) {
    StreamsPlan plan = applicationId == null ? null : store.latestStreams(StreamsPlan.key(applicationId));
    register(state, plan);
    Map<ProcessId, KafkaStreamsState> clients = state.kafkaStreamsStates(false);
    Instant followup = Instant.now().plusMillis(followupMs);
    List<KafkaStreamsAssignment> out = new java.util.ArrayList<>();
    String reason;
    try {
      reason = mismatch(plan, clients.keySet(), state.allTasks());
      if (reason == null)
        for (ProcessId pid : clients.keySet()) {
          StreamsPlan.Tasks t = plan.assignment.get(pid.id().toString());
          Set<AssignedTask> tasks = new HashSet<>();
          for (String id : t.active) tasks.add(new AssignedTask(TaskId.parse(id), AssignedTask.Type.ACTIVE));
          for (String id : t.standby) tasks.add(new AssignedTask(TaskId.parse(id), AssignedTask.Type.STANDBY));
          for (String id : t.warmup) tasks.add(new AssignedTask(TaskId.parse(id), AssignedTask.Type.STANDBY));
          out.add(KafkaStreamsAssignment.of(pid, tasks).withFollowupRebalance(followup));
        }
    } catch (RuntimeException e) {
      // The decoder refuses what Streams cannot read; should anything still throw, the plan is not applied.
      reason = (plan == null ? "the plan" : "plan generation " + plan.generation) + " cannot be applied: " + e;
      out.clear();
    }
    if (reason == null) {
      planCount.incrementAndGet();
      LOGGED.remove(applicationId + "|fallback"); // a later fallback is logged again
      PLAN_ASSIGNMENTS.incrementAndGet();
      LOG.info("rackplan: app {} assigned by plan generation {}", applicationId, plan.generation);
      return new TaskAssignment(out);
    }
    fallbackCount.incrementAndGet();
    warnOnce("fallback", "falls back to Kafka's default assignment: " + reason);
    lastReason = reason;
    for (KafkaStreamsAssignment a : fallback(state)) {
      Instant own = a.followupRebalanceDeadline().orElse(followup);
      out.add(a.withFollowupRebalance(own.isBefore(followup) ? own : followup));
    }
    return new TaskAssignment(out);
  }

  /**
   * What Kafka Streams assigns without a custom assignor ({@link HighAvailabilityFallback}); if Kafka's
   * internal assignors cannot run (another Kafka version's internals), the public {@link
   * StickyTaskAssignor}, logged when the reason changes.
   */
  Collection<KafkaStreamsAssignment> fallback(ApplicationState state) {
    try {
      HighAvailabilityFallback.Result r = HighAvailabilityFallback.assign(state);
      lastFallbackAssignor = r.assignor();
      lastFallback = r.assignor();
      return r.assignment();
    } catch (LinkageError | RuntimeException e) {
      String why = "Kafka's HighAvailabilityTaskAssignor cannot run here (" + e + "): StickyTaskAssignor assigns";
      warnOnce("internals", why);
      lastFallbackAssignor = why;
      lastFallback = "StickyTaskAssignor";
      return new StickyTaskAssignor().assign(state).assignment();
    }
  }

  /**
   * The leader registers the app's live clients (StreamsRegistrar) and tombstones the clients the
   * app's plan names that are gone: a leader new to the app (the previous one left, or this JVM
   * restarted) knows them only from the plan, and without that the agent would keep planning for
   * them until their registrations expire. Never fails the assignment.
   */
  private void register(ApplicationState state, StreamsPlan plan) {
    if (registrar == null || applicationId == null) return;
    try {
      Map<String, byte[]> records = StreamsRegistrar.records(applicationId, state, config, System.currentTimeMillis());
      if (records != null) {
        Set<String> planned = new TreeSet<>();
        if (plan != null) for (String pid : plan.assignment.keySet()) planned.add(StreamsRegistrar.key(applicationId, pid));
        registrar.publish(applicationId, records, planned);
        LOGGED.remove(applicationId + "|registration");
      } else {
        warnOnce("registration", "uses named topologies, which plans cannot name: its clients are not registered");
      }
    } catch (RuntimeException e) {
      warnOnce("registration", "clients not registered: " + e);
    }
  }

  /**
   * Logs ``message`` unless it is what was last logged for this app and kind (Streams makes an
   * assignor per assignment: the memory is the JVM's).
   */
  private void warnOnce(String kind, String message) {
    if (!message.equals(LOGGED.put(applicationId + "|" + kind, message))) LOG.warn("rackplan: app {} {}", applicationId, message);
  }

  private static final Map<String, String> LOGGED = new java.util.concurrent.ConcurrentHashMap<>();

  /** Why ``plan`` does not fit the live app, or null. */
  static String mismatch(StreamsPlan plan, Set<ProcessId> clients, Map<TaskId, TaskInfo> tasks) {
    if (plan == null) return "no plan for the app";
    if (!ConsumerPlan.PROPOSED.equals(plan.state))
      return "plan generation " + plan.generation + " is in state " + plan.state;
    Set<String> live = new TreeSet<>();
    for (ProcessId p : clients) live.add(p.id().toString());
    if (!plan.assignment.keySet().equals(live))
      return "plan generation " + plan.generation + " clients " + plan.assignment.keySet()
          + " differ from the live clients " + live;
    Map<TaskId, String> activeOwner = new TreeMap<>();
    for (Map.Entry<String, StreamsPlan.Tasks> e : plan.assignment.entrySet()) {
      Set<TaskId> mine = new HashSet<>();
      for (String s : e.getValue().active) {
        TaskId id = TaskId.parse(s);
        if (!tasks.containsKey(id)) return "plan names task " + s + ", which the app does not have";
        if (activeOwner.put(id, e.getKey()) != null) return "plan makes task " + s + " active twice";
        mine.add(id);
      }
      for (List<String> l : List.of(e.getValue().standby, e.getValue().warmup))
        for (String s : l) {
          TaskId id = TaskId.parse(s);
          TaskInfo info = tasks.get(id);
          if (info == null) return "plan names task " + s + ", which the app does not have";
          if (!info.isStateful()) return "plan gives a standby of stateless task " + s;
          if (!mine.add(id)) return "plan puts task " + s + " twice on client " + e.getKey() + " (active and standby)";
        }
    }
    if (activeOwner.size() != tasks.size())
      return "plan has an active owner for " + activeOwner.size() + " tasks, the app has " + tasks.size();
    return null;
  }
}
