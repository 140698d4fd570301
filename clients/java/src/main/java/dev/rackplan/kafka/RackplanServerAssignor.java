package dev.rackplan.kafka;

import java.lang.management.ManagementFactory;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import javax.management.ObjectName;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.Configurable;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.coordinator.group.api.assignor.ConsumerGroupPartitionAssignor;
import org.apache.kafka.coordinator.group.api.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.assignor.MemberSubscription;
import org.apache.kafka.coordinator.group.api.assignor.SubscribedTopicDescriber;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A server-side assignor for KIP-848 consumer groups ({@code group.protocol=consumer}), named {@code
 * rackplan}: brokers load it with {@code group.consumer.assignors=uniform,range,
 * dev.rackplan.kafka.RackplanServerAssignor} (this jar on their classpath) and consumers choose it
 * with {@code group.remote.assignor=rackplan}.
 *
 * <p>Kafka does not tell a server-side assignor which group it assigns, nor topic names (only ids).
 * So a plan is found by its members: the group's members must all have a {@code group.instance.id},
 * and the one plan whose member ids are exactly those instance ids is applied when it also fits
 * (subscriptions, partition counts, cluster fingerprint of replica racks; in leader fetch mode the
 * fingerprint cannot be recomputed here and is not checked). Otherwise (the reason logged and counted,
 * JMX {@code dev.rackplan:type=RackplanServerAssignor}) the group is assigned on its own by {@link
 * RackStickyBalancer}: balanced by Kafka's rule, then the fewest cross-rack partitions, then the fewest
 * moves; when the agent publishes traffic ({@code rackplan.traffic.topic}, read by {@link TrafficReader}),
 * the fewest cross-rack bytes/s come before the fewest cross-rack partitions. Should that fail its
 * postconditions or decline the group (a flow network past its size or work bound
 * on the coordinator's thread), Kafka's own {@code uniform} assigns ({@link KafkaUniformFallback}),
 * counted apart.
 *
 * <p>No match without static membership: the coordinator shows an assignor only each member's rack,
 * {@code group.instance.id} and topic ids, not its client id nor anything the member chose, so a plan's
 * member ids cannot be tied to the group's members safely without {@code group.instance.id}.
 * The coordinator itself revokes before it reassigns (KIP-848 reconciliation), so a plan is applied
 * as is.
 *
 * <p>Plans are read by a daemon thread (broker properties: {@code rackplan.bootstrap.servers}, {@code
 * rackplan.plan.topic} or {@code rackplan.plan.topic.pattern}); {@code assign} only reads memory.
 */
public class RackplanServerAssignor implements ConsumerGroupPartitionAssignor, Configurable, AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(RackplanServerAssignor.class);

  /** The broker's readers for this configuration, shared by every instance configured alike. */
  static final JvmShared<ServerReaders> SHARED = new JvmShared<>();

  /** Plans, traffic and topic names: this JVM's shared readers once configured (none before). */
  private volatile ServerReaders readers = new ServerReaders(new PlanStore(), new TrafficStore(0));
  /** The traffic this instance weighs (the JVM's shared feed once configured): tests. */
  TrafficStore traffic() {
    return readers.traffic;
  }

  /** The key {@link #readers} was acquired under (null: nothing to release). */
  private Map<String, Object> readersKey;
  private RackplanConfig config = new RackplanConfig(Map.of());
  /** Configured without rackplan.bootstrap.servers: no plan, no topic name is ever read. */
  private boolean unconfigured;

  /** The JVM totals' names (one per counter, {@link Tally}). */
  static final String JVM = "RackplanServerAssignor.";

  final Tally planCount = new Tally(JVM + "plan");
  final Tally fallbackCount = new Tally(JVM + "fallback");
  volatile String lastReason = "";
  /** Assignments by {@link RackStickyBalancer} (no plan applied). */
  final Tally balancedCount = new Tally(JVM + "balanced");
  /** Assignments by Kafka's {@code uniform} ({@link KafkaUniformFallback}): the balancer failed a postcondition or declined the group. */
  final Tally safeFallbackCount = new Tally(JVM + "safeFallback");
  volatile String lastSafeReason = "";
  /** Assignments by {@link RackStickyBalancer} weighed by the agent's traffic. */
  final Tally trafficCount = new Tally(JVM + "traffic");
  /** Assignments where the traffic could not be weighed (the count-only balance assigned instead). */
  final Tally trafficFailedCount = new Tally(JVM + "trafficFailed");
  volatile String lastTrafficReason = "";

  /** The last reasons of any instance in this JVM, and the readers of the last one configured: the JMX view. */
  private static volatile String jvmLastReason = "";
  private static volatile String jvmLastSafeReason = "";
  private static volatile String jvmLastTrafficReason = "";
  private static volatile ServerReaders jvmReaders = null;

  /** JMX view. */
  public interface StatsMBean {
    long getPlanAssignments();

    long getFallbackAssignments();

    String getLastFallbackReason();

    long getBalancedAssignments();

    long getSafeFallbackAssignments();

    String getLastSafeFallbackReason();

    long getTrafficAssignments();

    long getTrafficFailedAssignments();

    String getLastTrafficFailure();

    int getTrafficTopics();
  }

  @Override
  public String name() {
    return "rackplan";
  }

  @Override
  public void configure(Map<String, ?> configs) {
    // rackplan.* and the client security settings (ssl.*, sasl.*, security.protocol), as the Streams plugin
    Map<String, Object> mine = RackplanConfig.ofPlugin(configs);
    config = new RackplanConfig(mine);
    unconfigured = config.str(RackplanConfig.BOOTSTRAP, null) == null;
    if (unconfigured) {
      LOG.warn("rackplan: no rackplan.bootstrap.servers in the broker's properties: every group falls back, every"
          + " subscribed topic assigned (no topic name is known, so a plan topic cannot be told apart)");
      return;
    }
    RackplanConfig made = config;
    Map<String, Object> key = Map.copyOf(mine);
    readers = SHARED.acquire(key, () -> ServerReaders.start(made));
    readersKey = key;
    jvmReaders = readers;
    registerMBean();
  }

  /**
   * The JMX bean, once per JVM: every instance's assignments (the JVM totals of {@link Tally}), the
   * last reasons any instance gave, and the traffic of the readers configured last.
   */
  static void registerMBean() {
    try {
      ObjectName name = new ObjectName("dev.rackplan:type=RackplanServerAssignor");
      StatsMBean stats = new StatsMBean() {
        @Override public long getPlanAssignments() { return Tally.total(JVM + "plan"); }
        @Override public long getFallbackAssignments() { return Tally.total(JVM + "fallback"); }
        @Override public String getLastFallbackReason() { return jvmLastReason; }
        @Override public long getBalancedAssignments() { return Tally.total(JVM + "balanced"); }
        @Override public long getSafeFallbackAssignments() { return Tally.total(JVM + "safeFallback"); }
        @Override public String getLastSafeFallbackReason() { return jvmLastSafeReason; }
        @Override public long getTrafficAssignments() { return Tally.total(JVM + "traffic"); }
        @Override public long getTrafficFailedAssignments() { return Tally.total(JVM + "trafficFailed"); }
        @Override public String getLastTrafficFailure() { return jvmLastTrafficReason; }
        @Override public int getTrafficTopics() { ServerReaders r = jvmReaders; return r == null ? 0 : r.traffic.size(); }
      };
      if (!ManagementFactory.getPlatformMBeanServer().isRegistered(name))
        ManagementFactory.getPlatformMBeanServer().registerMBean(new javax.management.StandardMBean(stats, StatsMBean.class), name);
    } catch (Exception e) {
      LOG.debug("rackplan: no JMX metrics: {}", e.toString());
    }
  }

  /**
   * The topic-name admin client's settings: quiet while the cluster is not up. The assignor starts
   * inside a broker, before that broker (and often any other) listens. Kafka's admin client with the
   * default {@code metadata.recovery.strategy=rebootstrap} rebootstraps on every pass of its loop
   * while no broker is reachable: about 4,000 "Rebootstrapping" log lines a second in each broker's
   * own log (20 MB a minute), and a busy CPU, for as long as the cluster starts. Without it the
   * client waits out a reconnect backoff (1 s, doubling to 10 s) between attempts, and {@link
   * ServerReaders} makes a new client after {@link ServerReaders#ADMIN_RENEW_MS} without an answer instead.
   */
  public static Map<String, Object> adminConfig(RackplanConfig config) {
    Map<String, Object> ac = config.connection(AdminClientConfig.configNames());
    ac.put(AdminClientConfig.CLIENT_ID_CONFIG, "rackplan-server-assignor-topics");
    ac.put(AdminClientConfig.METADATA_RECOVERY_STRATEGY_CONFIG, "none");
    ac.put(AdminClientConfig.RECONNECT_BACKOFF_MS_CONFIG, 1_000L);
    ac.put(AdminClientConfig.RECONNECT_BACKOFF_MAX_MS_CONFIG, 10_000L);
    ac.put(AdminClientConfig.RETRY_BACKOFF_MS_CONFIG, 1_000L);
    ac.put(AdminClientConfig.RETRY_BACKOFF_MAX_MS_CONFIG, 10_000L);
    return ac;
  }

  /** For tests: no I/O, plans from ``store``, topic names given. */
  static RackplanServerAssignor forTest(PlanStore store, Map<Uuid, String> names) {
    return forTest(store, names, new TrafficStore(0));
  }

  /** The readers this instance reads (tests). */
  ServerReaders readers() {
    return readers;
  }

  /** The settings this instance was configured with (tests). */
  RackplanConfig config() {
    return config;
  }

  /** For tests: as {@link #forTest(PlanStore, Map)}, with traffic from ``traffic``. */
  static RackplanServerAssignor forTest(PlanStore store, Map<Uuid, String> names, TrafficStore traffic) {
    RackplanServerAssignor a = new RackplanServerAssignor();
    a.readers = new ServerReaders(store, traffic);
    a.readers.topicNames.putAll(names);
    return a;
  }

  /**
   * A plan topic: {@code RackplanConsumer} adds it to a KIP-848 member's subscription for a moment to
   * make the coordinator run the assignor; it is never assigned, so the application never reads it.
   */
  boolean isPlanTopic(String name) {
    return name != null
        && (config.planTopicRegex != null ? config.planTopicRegex.matcher(name).matches() : name.equals(config.planTopic));
  }

  /**
   * Whether the fallback may assign topic {@code id}: never a plan topic. A named topic is one by its
   * name ({@link #isPlanTopic}). A topic without a name (its Describe refused, or not answered yet) is
   * assigned by id when the plan topics' ids, looked up by name after the id was first met ({@link
   * ServerReaders#lookUpPlanTopicIds}), do not include it; while they are not known it is withheld
   * (the next epoch assigns it). Without rackplan.bootstrap.servers nothing is named and every topic
   * is assigned.
   */
  boolean assignable(Uuid id) {
    String name = readers.topicNames.get(id);
    if (name != null) return !isPlanTopic(name);
    if (unconfigured) return true;
    readers.refreshWanted = true;
    ServerReaders.PlanTopicIds plan = readers.planTopicIds;
    Long since = readers.unnamedSince.get(id);
    return plan != null && since != null && plan.fromMs() >= since && !plan.ids().contains(id);
  }

  /**
   * Names of topic ids not known yet, asked for now, and for those still without one the plan
   * topics' ids, unless looked up since they were first met (assignments run on the coordinator's
   * background thread; at most 2 s in all). See {@link #assignable}.
   */
  private void resolve(GroupSpec spec, SubscribedTopicDescriber describer) {
    Set<Uuid> unknown = new HashSet<>();
    Set<Set<Uuid>> seen = new HashSet<>();
    for (String m : spec.memberIds()) {
      Set<Uuid> subscribed = spec.memberSubscription(m).subscribedTopicIds();
      if (seen.add(subscribed)) // distinct subscriptions are few: each looked at once
        for (Uuid id : subscribed) if (describer.numPartitions(id) >= 0 && !readers.topicNames.containsKey(id)) unknown.add(id);
      if (spec.subscriptionType() == org.apache.kafka.coordinator.group.api.assignor.SubscriptionType.HOMOGENEOUS) break;
    }
    if (unknown.isEmpty()) return;
    long now = System.currentTimeMillis();
    for (Uuid id : unknown) readers.unnamedSince.putIfAbsent(id, now);
    Admin a = readers.admin;
    if (a == null) return;
    long deadline = now + 2_000;
    Map<Uuid, org.apache.kafka.common.KafkaFuture<TopicDescription>> asked = Map.of();
    String failed = null;
    try {
      asked = a.describeTopics(org.apache.kafka.common.TopicCollection.ofTopicIds(unknown)).topicIdValues();
    } catch (RuntimeException e) {
      failed = e.toString();
    }
    for (Map.Entry<Uuid, org.apache.kafka.common.KafkaFuture<TopicDescription>> e : asked.entrySet()) {
      try {
        TopicDescription d = e.getValue().get(Math.max(0, deadline - System.currentTimeMillis()), TimeUnit.MILLISECONDS);
        readers.topicNames.put(e.getKey(), d.name());
      } catch (InterruptedException x) {
        Thread.currentThread().interrupt();
        return;
      } catch (Exception x) {
        failed = x.toString();
      }
    }
    unknown.removeIf(readers.topicNames::containsKey);
    if (unknown.isEmpty()) return;
    LOG.warn("rackplan: names of topics {} not resolved: {}", unknown, failed);
    ServerReaders.PlanTopicIds plan = readers.planTopicIds;
    boolean fresh = plan != null;
    for (Uuid id : unknown) fresh &= plan != null && plan.fromMs() >= readers.unnamedSince.get(id);
    if (!fresh) readers.lookUpPlanTopicIds(config.planTopicRegex, config.planTopic, deadline);
  }

  @Override
  public GroupAssignment assign(GroupSpec spec, SubscribedTopicDescriber describer) {
    resolve(spec, describer);
    List<String> memberIds = new ArrayList<>(spec.memberIds());
    Map<String, String> instanceOf = new TreeMap<>();
    Map<String, Set<String>> members = new HashMap<>();
    Map<String, Integer> counts = new TreeMap<>();
    Map<String, Uuid> idOf = new HashMap<>();
    String reason = unconfigured ? "no " + RackplanConfig.BOOTSTRAP + ": no plan is read" : null;
    // Without static membership no plan can apply: the per-topic work below is skipped (the coordinator's thread).
    for (String m : reason == null ? memberIds : List.<String>of())
      if (spec.memberSubscription(m).instanceId().isEmpty()) {
        reason = "member " + m + " has no group.instance.id";
        break;
      }
    for (String m : reason == null ? memberIds : List.<String>of()) {
      MemberSubscription s = spec.memberSubscription(m);
      Set<String> topics = new HashSet<>();
      for (Uuid id : s.subscribedTopicIds()) {
        int n = describer.numPartitions(id);
        if (n < 0) continue;
        String name = readers.topicNames.get(id);
        if (name == null) {
          readers.refreshWanted = true;
          if (reason == null) reason = "topic id " + id + " is not known yet";
          continue;
        }
        if (isPlanTopic(name)) continue;
        topics.add(name);
        counts.put(name, n);
        idOf.put(name, id);
      }
      String inst = s.instanceId().orElse(null);
      if (inst == null) {
        if (reason == null) reason = "member " + m + " has no group.instance.id";
      } else if (members.put(inst, topics) != null) {
        if (reason == null) reason = "two members have group.instance.id " + inst;
      } else {
        instanceOf.put(m, inst);
      }
    }
    ConsumerPlan plan = null;
    if (reason == null) {
      List<ConsumerPlan> candidates = new ArrayList<>();
      for (ConsumerPlan p : readers.store.all()) if (p.assignment.keySet().equals(members.keySet())) candidates.add(p);
      if (candidates.size() == 1) plan = candidates.get(0);
      else if (candidates.size() > 1) reason = "plans of several groups name exactly these members: " + candidates;
    }
    if (reason == null) {
      String fp = null;
      if (plan != null && !"leader".equals(plan.fetchMode)) {
        Map<String, List<Plans.PartitionRacks>> racks = new TreeMap<>();
        for (Map.Entry<String, Integer> t : counts.entrySet()) {
          List<Plans.PartitionRacks> rows = new ArrayList<>();
          for (int p = 0; p < t.getValue(); p++)
            rows.add(new Plans.PartitionRacks(describer.racksForPartition(idOf.get(t.getKey()), p), null, false));
          racks.put(t.getKey(), rows);
        }
        fp = Plans.fingerprint(racks, "nearest-replica");
      }
      reason = Plans.mismatch(plan, members, counts, fp);
    }
    Map<String, MemberAssignment> out = new HashMap<>();
    if (reason == null) {
      for (Map.Entry<String, String> e : instanceOf.entrySet()) {
        Map<Uuid, Set<Integer>> parts = new HashMap<>();
        for (TopicPartition tp : plan.assignment.get(e.getValue()))
          parts.computeIfAbsent(idOf.get(tp.topic()), k -> new HashSet<>()).add(tp.partition());
        out.put(e.getKey(), new Parts(parts));
      }
      planCount.add();
      LOG.info("rackplan: group of {} assigned by plan {}", new TreeSet<>(members.keySet()), plan);
      return new GroupAssignment(out);
    }
    fallbackCount.add();
    if (!reason.equals(lastReason)) LOG.info("rackplan: no plan applies, assigning by rack-aware sticky balance: {}", reason);
    lastReason = reason;
    jvmLastReason = reason;
    java.util.function.Predicate<Uuid> allowed = this::assignable;
    try {
      Map<String, Map<Uuid, Set<Integer>>> res = weighed(spec, describer, allowed);
      if (res == null) res = ServerBalance.assign(spec, describer, allowed);
      for (Map.Entry<String, Map<Uuid, Set<Integer>>> e : res.entrySet()) out.put(e.getKey(), new Parts(e.getValue()));
      balancedCount.add();
      return new GroupAssignment(out);
    } catch (RuntimeException e) {
      // A postcondition failed, or the group is beyond what the balancer solves on this thread.
      String why = String.valueOf(e.getMessage());
      safeFallbackCount.add();
      if (!why.equals(lastSafeReason)) LOG.warn("rackplan: rack-aware sticky balance declined the group, Kafka's uniform assigns: {}", why);
      lastSafeReason = why;
      jvmLastSafeReason = why;
    }
    return KafkaUniformFallback.assign(spec, describer, allowed);
  }

  /**
   * The balance weighed by the agent's traffic where the group's topics have fresh figures (memory
   * only: {@link TrafficStore}); null when no traffic was read at all or it could not be weighed
   * (counted): the caller then balances by counts, exactly as with no traffic.
   */
  private Map<String, Map<Uuid, Set<Integer>>> weighed(
      GroupSpec spec, SubscribedTopicDescriber describer, java.util.function.Predicate<Uuid> allowed) {
    if (readers.traffic.size() == 0) return null;
    long now = System.currentTimeMillis();
    boolean[] known = {false};
    java.util.function.Function<Uuid, double[]> rates = id -> {
      double[] w = readers.traffic.weights(readers.topicNames.get(id), describer.numPartitions(id), now);
      known[0] |= w != null;
      return w;
    };
    try {
      Map<String, Map<Uuid, Set<Integer>>> res = ServerBalance.assign(spec, describer, allowed, rates);
      if (known[0]) trafficCount.add();
      return res; // with no fresh traffic for the group's topics: the count-only balance itself
    } catch (RuntimeException e) {
      if (!known[0]) throw e;
      String why = String.valueOf(e.getMessage());
      trafficFailedCount.add();
      if (!why.equals(lastTrafficReason)) LOG.warn("rackplan: traffic not weighed, balancing by counts: {}", why);
      lastTrafficReason = why;
      jvmLastTrafficReason = why;
      return null;
    }
  }

  /** A member's partitions, with value equality (the coordinator compares assignments). */
  record Parts(Map<Uuid, Set<Integer>> partitions) implements MemberAssignment {}

  @Override
  public void close() {
    Map<String, Object> key = readersKey;
    readersKey = null;
    if (key != null) SHARED.release(key);
  }
}
