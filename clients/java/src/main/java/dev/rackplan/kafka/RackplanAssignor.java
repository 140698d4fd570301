package dev.rackplan.kafka;

import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import javax.management.ObjectName;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Configurable;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A classic-protocol {@link ConsumerPartitionAssignor} that applies rackplan's plan of the group.
 *
 * <p>Configuration (consumer properties): {@code partition.assignment.strategy=
 * dev.rackplan.kafka.RackplanAssignor}, {@code client.rack}, and {@code group.instance.id} or
 * {@code rackplan.member.id} (the member's id in plans). At the group leader, the latest valid plan
 * of {@code consumer/<group.id>} is applied when it matches the live group: the same member ids (each
 * member carries its id in its subscription user data), every member subscribed to what the plan
 * gives it, every partition of the subscribed topics assigned once, and the cluster fingerprint of the
 * live metadata equal to the plan's. Otherwise Kafka's {@code CooperativeStickyAssignor} (or {@code
 * RangeAssignor}, {@code rackplan.fallback=range}) assigns, with the reason logged (WARN when it
 * changes) and counted (JMX {@code dev.rackplan:type=RackplanAssignor}).
 *
 * <p>Cooperative rules ({@code rackplan.rebalance.protocol=cooperative}, the default): a partition
 * that another member still owns is left out of this round; its owner revokes it and rejoins, and
 * the follow-up rebalance gives it out. No partition is ever assigned to two members.
 */
public class RackplanAssignor implements ConsumerPartitionAssignor, Configurable {
  private static final Logger LOG = LoggerFactory.getLogger(RackplanAssignor.class);
  static final byte[] MAGIC = {'R', 'P', 1};
  static final Map<String, RackplanAssignor> BY_HANDLE = new ConcurrentHashMap<>();

  private RackplanConfig config;
  private ConsumerPartitionAssignor delegate;
  private String groupId;
  private String memberId;
  private PlanStore store = new PlanStore();
  private RackplanClient client;
  private boolean cooperative = true;

  private final AtomicLong pendingGeneration = new AtomicLong();
  private final AtomicLong handledGeneration = new AtomicLong();
  /**
   * A plan this leader refused only because its own metadata showed other replica racks than the
   * plan's (after a reassignment the consumer's metadata can lag the agent's by up to
   * metadata.max.age.ms): tried again, with a rebalance, after 2, 4, 8, 16 and 32 s, since the stamp
   * of the considered generation stops the members from asking for it again. 0: none.
   */
  private final AtomicLong staleGeneration = new AtomicLong();
  private volatile long staleRetryAtMs;
  private volatile int staleRetries;
  static final int MAX_STALE_RETRIES = 5;
  final Stats stats = new Stats();

  /** JMX view of what the assignor did (the metric of fallbacks). */
  public interface StatsMBean {
    long getPlanAssignments();

    long getFallbackAssignments();

    String getLastFallbackReason();

    long getAppliedPlanGeneration();

    long getIgnoredPlanRecords();
  }

  /** Counters; the MBean. */
  public final class Stats implements StatsMBean {
    final AtomicLong plan = new AtomicLong();
    final AtomicLong fallback = new AtomicLong();
    volatile String lastReason = "";
    volatile long appliedGeneration;

    @Override
    public long getPlanAssignments() {
      return plan.get();
    }

    @Override
    public long getFallbackAssignments() {
      return fallback.get();
    }

    @Override
    public String getLastFallbackReason() {
      return lastReason;
    }

    @Override
    public long getAppliedPlanGeneration() {
      return appliedGeneration;
    }

    @Override
    public long getIgnoredPlanRecords() {
      return store.ignoredCount();
    }
  }

  @Override
  public String name() {
    return "rackplan";
  }

  @Override
  public void configure(Map<String, ?> configs) {
    config = checked(configs);
    cooperative = "cooperative".equals(config.rebalanceProtocol);
    delegate = "range".equals(config.fallback) ? new RangeAssignor() : new CooperativeStickyAssignor();
    groupId = str(configs.get(ConsumerConfig.GROUP_ID_CONFIG));
    String instance = str(configs.get(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG));
    memberId = config.str(RackplanConfig.MEMBER_ID, instance);
    String rack = str(configs.get(ConsumerConfig.CLIENT_RACK_CONFIG));
    String clientId = Optional.ofNullable(str(configs.get(ConsumerConfig.CLIENT_ID_CONFIG))).orElse(memberId);
    client =
        new RackplanClient(
                config, store, new RackplanClient.Member(groupId, memberId, rack, instance), clientId, this::onPlan)
            .start();
    String handle = config.str(RackplanConfig.HANDLE, null);
    if (handle != null) BY_HANDLE.put(handle, this);
    try {
      ObjectName name = new ObjectName("dev.rackplan:type=RackplanAssignor,group=" + ObjectName.quote(groupId)
          + ",member=" + ObjectName.quote(memberId));
      if (!ManagementFactory.getPlatformMBeanServer().isRegistered(name))
        ManagementFactory.getPlatformMBeanServer().registerMBean(new javax.management.StandardMBean(stats, StatsMBean.class), name);
    } catch (Exception e) {
      LOG.debug("rackplan: no JMX metrics: {}", e.toString());
    }
  }

  /**
   * The assignor's settings, every check {@link #configure} makes before any I/O passed: rackplan.*
   * values, a stable member id, group.id, and a bootstrap to read rackplan's topics from. A {@link
   * ConfigException} names the key. {@link RackplanConsumer} runs it before Kafka builds the consumer
   * (which would wrap it in a {@code KafkaException}).
   */
  static RackplanConfig checked(Map<String, ?> configs) {
    RackplanConfig config = new RackplanConfig(configs);
    if (config.str(RackplanConfig.MEMBER_ID, str(configs.get(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG))) == null)
      throw new ConfigException(
          RackplanConfig.MEMBER_ID, null,
          "RackplanAssignor needs a stable member id: set group.instance.id or rackplan.member.id");
    if (str(configs.get(ConsumerConfig.GROUP_ID_CONFIG)) == null)
      throw new ConfigException(ConsumerConfig.GROUP_ID_CONFIG, null, "RackplanAssignor needs group.id");
    config.readerConfig("check"); // a missing bootstrap is refused here, naming the setting, not retried forever
    return config;
  }

  /** Whether {@code partition.assignment.strategy} (a class name list, or classes) names this assignor. */
  static boolean listed(Object strategy) {
    if (strategy == null) return false;
    List<?> items = strategy instanceof List ? (List<?>) strategy
        : strategy instanceof Class ? List.of(strategy) : List.of((Object[]) strategy.toString().split(","));
    for (Object o : items)
      if (o instanceof Class ? RackplanAssignor.class.isAssignableFrom((Class<?>) o)
          : RackplanAssignor.class.getName().equals(o.toString().trim()))
        return true;
    return false;
  }

  /** For tests: a configured assignor without I/O, reading plans from ``store``. */
  static RackplanAssignor forTest(String groupId, String memberId, String fallback, boolean cooperative, PlanStore store) {
    RackplanAssignor a = new RackplanAssignor();
    a.config = new RackplanConfig(Map.of());
    a.groupId = groupId;
    a.memberId = memberId;
    a.store = store;
    a.cooperative = cooperative;
    a.delegate = "range".equals(fallback) ? new RangeAssignor() : new CooperativeStickyAssignor();
    return a;
  }

  private static String str(Object v) {
    return v == null || v.toString().isBlank() ? null : v.toString();
  }

  void onPlan(ConsumerPlan plan) {
    if (!plan.groupId.equals(groupId)) return;
    pendingGeneration.accumulateAndGet(plan.generation, Math::max);
  }

  /**
   * A plan generation newer than the group has considered arrived: the member should rejoin
   * ({@link RackplanConsumer} calls {@code enforceRebalance} in its next poll). Returns the
   * generation to mark handled, or 0.
   */
  public long rebalanceNeeded() {
    long p = pendingGeneration.get();
    return p > handledGeneration.get() ? p : 0;
  }

  public void markHandled(long generation) {
    handledGeneration.accumulateAndGet(generation, Math::max);
  }

  /**
   * True (once per step) when a plan refused for a cluster fingerprint that differed only in this
   * leader's metadata is due to be tried again: the caller rebalances ({@link RackplanConsumer#poll}).
   */
  public boolean staleRetryDue(long nowMs) {
    if (staleGeneration.get() == 0 || nowMs < staleRetryAtMs) return false;
    if (staleRetries >= MAX_STALE_RETRIES) {
      staleGeneration.set(0);
      return false;
    }
    staleRetries++;
    staleRetryAtMs = nowMs + (1000L << (staleRetries + 1));
    return true;
  }

  @Override
  public List<RebalanceProtocol> supportedProtocols() {
    return List.of(cooperative ? RebalanceProtocol.COOPERATIVE : RebalanceProtocol.EAGER);
  }

  @Override
  public ByteBuffer subscriptionUserData(Set<String> topics) {
    if (client != null) client.setTopics(topics);
    ByteBuffer inner = delegate.subscriptionUserData(topics);
    byte[] id = memberId.getBytes(StandardCharsets.UTF_8);
    int innerLen = inner == null ? -1 : inner.remaining();
    ByteBuffer b = ByteBuffer.allocate(MAGIC.length + 4 + id.length + 4 + Math.max(0, innerLen));
    b.put(MAGIC).putInt(id.length).put(id).putInt(innerLen);
    if (inner != null) b.put(inner.duplicate());
    b.flip();
    return b;
  }

  /** (member id, the fallback assignor's user data) from a subscription's user data; null id if not ours. */
  static Object[] decodeSubscription(ByteBuffer data) {
    if (data == null || data.remaining() < MAGIC.length + 8) return new Object[] {null, data};
    ByteBuffer b = data.duplicate();
    for (byte m : MAGIC) if (b.get() != m) return new Object[] {null, data};
    int n = b.getInt();
    if (n < 0 || n > b.remaining()) return new Object[] {null, data};
    byte[] id = new byte[n];
    b.get(id);
    int innerLen = b.getInt();
    ByteBuffer inner = null;
    if (innerLen >= 0) {
      inner = b.slice();
      inner.limit(Math.min(innerLen, inner.remaining()));
    }
    return new Object[] {new String(id, StandardCharsets.UTF_8), inner};
  }

  @Override
  public GroupAssignment assign(Cluster metadata, GroupSubscription groupSubscription) {
    Map<String, Subscription> subs = groupSubscription.groupSubscription();
    Map<String, Subscription> inner = new HashMap<>();
    Map<String, String> stableOf = new TreeMap<>();
    Map<String, Set<String>> members = new HashMap<>();
    Set<String> topics = new HashSet<>();
    String reason = null;
    for (Map.Entry<String, Subscription> e : subs.entrySet()) {
      Subscription s = e.getValue();
      Object[] dec = decodeSubscription(s.userData());
      String stable = dec[0] != null ? (String) dec[0] : s.groupInstanceId().orElse(null);
      Subscription d = new Subscription(s.topics(), (ByteBuffer) dec[1], s.ownedPartitions(),
          s.generationId().orElse(-1), s.rackId());
      d.setGroupInstanceId(s.groupInstanceId());
      inner.put(e.getKey(), d);
      topics.addAll(s.topics());
      if (stable == null) {
        reason = "member " + e.getKey() + " carries no rackplan member id";
      } else if (members.containsKey(stable)) {
        reason = "two members claim the id " + stable;
      } else {
        members.put(stable, new HashSet<>(s.topics()));
        stableOf.put(e.getKey(), stable);
      }
    }
    String key = ConsumerPlan.key(groupId);
    ConsumerPlan plan = store.latest(key);
    long considered = store.maxGeneration(key);
    Map<String, List<TopicPartition>> result = null;
    if (reason == null) {
      Map<String, Integer> counts = new TreeMap<>();
      for (String t : topics) {
        Integer n = metadata.partitionCountForTopic(t);
        if (n != null) counts.put(t, n);
      }
      String fp = plan == null ? null : Plans.fingerprint(racksOf(metadata, counts.keySet()), plan.fetchMode);
      reason = Plans.mismatch(plan, members, counts, fp);
      if (reason == null) {
        result = new TreeMap<>();
        for (Map.Entry<String, String> e : stableOf.entrySet())
          result.put(e.getKey(), plan.assignment.get(e.getValue()));
      }
    }
    boolean usedPlan = result != null;
    if (usedPlan || plan == null) {
      staleGeneration.set(0);
    } else if (fingerprintOnly(plan, reason) && staleGeneration.getAndSet(plan.generation) != plan.generation) {
      staleRetries = 0;
      staleRetryAtMs = System.currentTimeMillis() + 2000L;
    }
    if (!usedPlan) {
      result = new TreeMap<>();
      for (Map.Entry<String, Assignment> e : delegate.assign(metadata, new GroupSubscription(inner)).groupAssignment().entrySet())
        result.put(e.getKey(), e.getValue().partitions());
    }
    if (cooperative) {
      Map<String, List<TopicPartition>> owned = new HashMap<>();
      for (Map.Entry<String, Subscription> e : subs.entrySet()) owned.put(e.getKey(), e.getValue().ownedPartitions());
      result = Plans.cooperative(result, owned);
    }
    if (usedPlan) {
      stats.plan.incrementAndGet();
      stats.appliedGeneration = plan.generation;
      LOG.info("rackplan: group {} assigned by plan generation {}", groupId, plan.generation);
    } else {
      stats.fallback.incrementAndGet();
      if (!reason.equals(stats.lastReason))
        LOG.warn("rackplan: group {} falls back to {}: {}", groupId, delegate.name(), reason);
      stats.lastReason = reason;
    }
    Map<String, Assignment> out = new HashMap<>();
    for (Map.Entry<String, List<TopicPartition>> e : result.entrySet()) {
      List<TopicPartition> parts = new ArrayList<>(e.getValue());
      parts.sort(Plans.TP_ORDER);
      out.put(e.getKey(), new Assignment(parts, assignmentUserData(considered)));
    }
    for (String m : subs.keySet()) out.putIfAbsent(m, new Assignment(List.of(), assignmentUserData(considered)));
    return new GroupAssignment(out);
  }

  /** The plan fits the live group but for its cluster fingerprint (Plans.mismatch's last check). */
  static boolean fingerprintOnly(ConsumerPlan plan, String reason) {
    return reason != null && reason.startsWith("plan generation " + plan.generation + " was computed for other replica racks");
  }

  static ByteBuffer assignmentUserData(long consideredGeneration) {
    ByteBuffer b = ByteBuffer.allocate(MAGIC.length + 8);
    b.put(MAGIC).putLong(consideredGeneration);
    b.flip();
    return b;
  }

  /** The plan generation the leader considered (0: none or not ours). */
  static long consideredGeneration(ByteBuffer data) {
    if (data == null || data.remaining() < MAGIC.length + 8) return 0;
    ByteBuffer b = data.duplicate();
    for (byte m : MAGIC) if (b.get() != m) return 0;
    return b.getLong();
  }

  static Map<String, List<Plans.PartitionRacks>> racksOf(Cluster metadata, Set<String> topics) {
    Map<String, List<Plans.PartitionRacks>> out = new TreeMap<>();
    for (String t : topics) {
      List<PartitionInfo> infos = new ArrayList<>(metadata.partitionsForTopic(t));
      infos.sort(Comparator.comparingInt(PartitionInfo::partition));
      List<Plans.PartitionRacks> rows = new ArrayList<>();
      for (PartitionInfo p : infos) {
        List<String> racks = new ArrayList<>();
        for (Node n : p.replicas()) if (n != null && n.hasRack()) racks.add(n.rack());
        Node leader = p.leader();
        boolean known = leader != null && !leader.isEmpty();
        rows.add(new Plans.PartitionRacks(racks, known && leader.hasRack() ? leader.rack() : null, known));
      }
      out.put(t, rows);
    }
    return out;
  }

  @Override
  public void onAssignment(Assignment assignment, ConsumerGroupMetadata metadata) {
    markHandled(consideredGeneration(assignment.userData()));
    delegate.onAssignment(new Assignment(assignment.partitions()), metadata);
  }

  public Stats stats() {
    return stats;
  }

  public PlanStore planStore() {
    return store;
  }

  /** Stop reading plans and unregister (the consumer does not close its assignors: {@link RackplanConsumer} does). */
  public void close() {
    if (client != null) client.close();
    String handle = config == null ? null : config.str(RackplanConfig.HANDLE, null);
    if (handle != null) BY_HANDLE.remove(handle);
  }
}
