package dev.rackplan.kafka.streams;

import dev.rackplan.kafka.JvmShared;
import dev.rackplan.kafka.RackplanConfig;
import dev.rackplan.kafka.RackplanServerAssignor;
import dev.rackplan.kafka.Tally;
import dev.rackplan.kafka.TrafficFeed;
import dev.rackplan.kafka.TrafficStore;
import java.lang.management.ManagementFactory;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import javax.management.ObjectName;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.common.Configurable;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.GroupSpec;
import org.apache.kafka.coordinator.group.api.streams.assignor.MemberAssignment;
import org.apache.kafka.coordinator.group.api.streams.assignor.TaskAssignor;
import org.apache.kafka.coordinator.group.api.streams.assignor.TaskAssignorException;
import org.apache.kafka.coordinator.group.api.streams.assignor.TopologyDescriber;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A broker-side Kafka Streams task assignor (KIP-1071 groups, KIP-1357 plugins, Kafka 4.4+), named
 * {@code rackplan}: brokers load it with {@code group.streams.assignors=sticky,
 * dev.rackplan.kafka.streams.RackplanStreamsTaskAssignor} (this jar on their classpath) and a group
 * chooses it with the group config {@code streams.assignor.name=rackplan}.
 *
 * <p>The coordinator gives an assignor sub-topology ids and partition counts, not topics or replica
 * racks. Those come from the cluster: a daemon thread describes the Streams groups this broker
 * coordinates and their topics with an Admin client ({@link StreamsCatalogReader}, broker
 * properties {@code rackplan.bootstrap.servers}, {@code rackplan.streams.refresh.ms}), and {@code
 * assign} finds the group by its members ({@link StreamsCatalog}) and reads only memory. It then
 * assigns with {@link RackAwareTaskAssignment} ({@code rackplan.streams.strategy}: {@code
 * min_traffic} or {@code balance_subtopology}) and checks the result.
 *
 * <p>When the group is not known (not described yet, the topology just changed, no bootstrap), or
 * the result fails its check, or anything throws, Kafka's own built-in sticky assignor assigns, as
 * if the group had not chosen this one; the reason is logged when it changes and counted by kind
 * (JMX {@code dev.rackplan:type=RackplanStreamsTaskAssignor}). Warm-ups stay the coordinator's
 * (it adds them to the assignor's result for actives moved to members that are not caught up).
 */
public class RackplanStreamsTaskAssignor implements TaskAssignor, Configurable, AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(RackplanStreamsTaskAssignor.class);

  public static final String REFRESH_MS = RackplanConfig.STREAMS_REFRESH_MS;
  public static final String STRATEGY = RackplanConfig.STREAMS_STRATEGY;
  /** The broker's KIP-1071 acceptable recovery lag (its default, 10,000, when unset). */
  static final String ACCEPTABLE_RECOVERY_LAG = "group.streams.acceptable.recovery.lag";

  private static final String KAFKA_STICKY = "org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor";

  /** The catalog and its reader, one per broker JVM and configuration (see {@link JvmShared}). */
  record Reading(StreamsCatalog catalog, StreamsCatalogReader reader, TrafficStore traffic, RackplanConfig trafficConfig)
      implements AutoCloseable {
    @Override
    public void close() {
      reader.close();
      if (trafficConfig != null) TrafficFeed.release(trafficConfig);
    }
  }

  static final JvmShared<Reading> SHARED = new JvmShared<>();

  volatile StreamsCatalog catalog;
  private volatile StreamsCatalogReader reader;
  /** The key the shared reading was acquired under (null: nothing to release). */
  private Object readingKey;
  /** Whether configuring takes the JVM's shared catalog (else this instance reads into its own). */
  private final boolean shared;
  private RackAwareTaskAssignment.Strategy strategy = RackAwareTaskAssignment.Strategy.MIN_TRAFFIC;
  private long acceptableRecoveryLag = 10_000L;
  private final TaskAssignor kafkaSticky;

  /** The JVM totals' names ({@link Tally}): the JMX bean counts every instance's assignments. */
  static final String JVM = "RackplanStreamsTaskAssignor.";
  static final String JVM_FALLBACK = JVM + "fallback.";

  final Tally rackAware = new Tally(JVM + "rackAware");
  /** Rack-aware assignments weighed by the agent's traffic (some topic of the group had fresh figures). */
  final Tally trafficCount = new Tally(JVM + "traffic");
  /** The agent's measured bytes/s (null: not read, rackplan.traffic.topic=none or no bootstrap). */
  volatile TrafficStore traffic;
  /** Fallbacks by kind: unconfigured, unknown-group, postcondition, error. */
  final Map<String, Tally> fallbacks = new ConcurrentHashMap<>();
  volatile String lastReason = "";
  /** The last reason of any instance in this JVM, and the catalog of the last one configured: the JMX view. */
  private static volatile String jvmLastReason = "";
  private static volatile StreamsCatalog jvmCatalog = null;
  private static volatile TrafficStore jvmTraffic = null;

  /** JMX view. */
  public interface StatsMBean {
    long getRackAwareAssignments();

    long getFallbackAssignments();

    String getFallbacksByKind();

    String getLastFallbackReason();

    int getDescribedGroups();

    long getTrafficAssignments();

    int getTrafficTopics();
  }

  /** Kafka's: the catalog is this JVM's shared one once configured. */
  public RackplanStreamsTaskAssignor() {
    this(new StreamsCatalog(), kafkaSticky(), true);
  }

  /** Tests': ``catalog`` is this instance's own, and configuring reads into it. */
  RackplanStreamsTaskAssignor(StreamsCatalog catalog, TaskAssignor kafkaSticky) {
    this(catalog, kafkaSticky, false);
  }

  private RackplanStreamsTaskAssignor(StreamsCatalog catalog, TaskAssignor kafkaSticky, boolean shared) {
    this.catalog = catalog;
    this.kafkaSticky = kafkaSticky;
    this.shared = shared;
  }

  /** Kafka's built-in sticky Streams assignor from the broker's classpath, or null if absent. */
  static TaskAssignor kafkaSticky() {
    try {
      return (TaskAssignor) Class.forName(KAFKA_STICKY).getDeclaredConstructor().newInstance();
    } catch (ReflectiveOperationException | LinkageError | ClassCastException e) {
      return null;
    }
  }

  @Override
  public String name() {
    return "rackplan";
  }

  @Override
  public void configure(Map<String, ?> configs) {
    // every rackplan.* key checked by RackplanConfig, bootstrap or not: a mistyped rackplan.bootstrap.servers
    // is refused by name, not read as "unconfigured" (the KIP-848 plugin refuses the same properties)
    Map<String, Object> mine = RackplanConfig.ofPlugin(configs);
    RackplanConfig rc = new RackplanConfig(mine);
    strategy = strategy(rc.streamsStrategy);
    long refresh = rc.streamsRefreshMs;
    acceptableRecoveryLag = lag(configs, ACCEPTABLE_RECOVERY_LAG, 10_000L);
    if (configs.get(RackplanConfig.BOOTSTRAP) == null) {
      LOG.warn("rackplan: no {} in the broker's properties: every Streams group is assigned by Kafka's sticky assignor",
          RackplanConfig.BOOTSTRAP);
    } else {
      Map<String, Object> ac = adminConfig(configs);
      Object node = configs.get("node.id") != null ? configs.get("node.id") : configs.get("broker.id");
      Integer nodeId = null;
      try {
        if (node != null) nodeId = Integer.valueOf(node.toString().trim());
      } catch (NumberFormatException e) {
        nodeId = null;
      }
      Integer id = nodeId;
      if (shared) {
        boolean reads = !"none".equals(rc.trafficTopic);
        Object key = List.of(Map.copyOf(ac), refresh, String.valueOf(id), reads ? Map.copyOf(mine) : Map.of());
        Reading r = SHARED.acquire(key, () -> {
          StreamsCatalog c = new StreamsCatalog();
          // The JVM's shared traffic feed: the KIP-848 assignor reads the same one (TrafficFeed).
          TrafficStore ts = reads ? TrafficFeed.acquire(rc).store : null;
          return new Reading(c, new StreamsCatalogReader(c, () -> Admin.create(ac), refresh, id).start(), ts,
              reads ? rc : null);
        });
        catalog = r.catalog();
        reader = r.reader();
        traffic = r.traffic();
        if (traffic != null) jvmTraffic = traffic;
        readingKey = key;
      } else {
        reader = new StreamsCatalogReader(catalog, () -> Admin.create(ac), refresh, id).start();
      }
    }
    jvmCatalog = catalog;
    registerMBean();
  }

  static RackAwareTaskAssignment.Strategy strategy(String s) {
    if (s == null || s.equals("min_traffic")) return RackAwareTaskAssignment.Strategy.MIN_TRAFFIC;
    if (s.equals("balance_subtopology")) return RackAwareTaskAssignment.Strategy.BALANCE_SUBTOPOLOGY;
    throw new ConfigException(STRATEGY, s, "must be one of min_traffic, balance_subtopology");
  }

  /** A broker's lag setting: a whole number, zero included. */
  private static long lag(Map<String, ?> configs, String key, long dflt) {
    Object v = configs.get(key);
    if (v == null) return dflt;
    try {
      long n = Long.parseLong(v.toString().trim());
      if (n >= 0) return n;
    } catch (NumberFormatException e) {
      // reported below
    }
    throw new ConfigException(key, v, "must be a non-negative integer");
  }

  /**
   * The catalog's admin client: the KIP-848 plugin's ({@link RackplanServerAssignor#adminConfig}: the
   * broker's rackplan.bootstrap.servers and client security settings, quiet while the cluster starts)
   * under its own client id.
   */
  static Map<String, Object> adminConfig(Map<String, ?> configs) {
    Map<String, Object> ac = RackplanServerAssignor.adminConfig(new RackplanConfig(RackplanConfig.ofPlugin(configs)));
    ac.put(AdminClientConfig.CLIENT_ID_CONFIG, "rackplan-streams-assignor-catalog");
    return ac;
  }

  /**
   * The JMX bean, once per JVM: every instance's assignments (the JVM totals of {@link Tally}), the
   * last reason any instance gave, and the groups of the catalog configured last. A broker builds
   * its assignors again on configuration rebuilds and assigns with whichever it holds then.
   */
  static void registerMBean() {
    try {
      ObjectName name = new ObjectName("dev.rackplan:type=RackplanStreamsTaskAssignor");
      StatsMBean stats = new StatsMBean() {
        @Override public long getRackAwareAssignments() { return Tally.total(JVM + "rackAware"); }
        @Override public long getFallbackAssignments() {
          return Tally.totals(JVM_FALLBACK).values().stream().mapToLong(Long::longValue).sum();
        }
        @Override public String getFallbacksByKind() { return Tally.totals(JVM_FALLBACK).toString(); }
        @Override public String getLastFallbackReason() { return jvmLastReason; }
        @Override public int getDescribedGroups() { StreamsCatalog c = jvmCatalog; return c == null ? 0 : c.groups().size(); }
        @Override public long getTrafficAssignments() { return Tally.total(JVM + "traffic"); }
        @Override public int getTrafficTopics() { TrafficStore t = jvmTraffic; return t == null ? 0 : t.size(); }
      };
      if (!ManagementFactory.getPlatformMBeanServer().isRegistered(name))
        ManagementFactory.getPlatformMBeanServer().registerMBean(new javax.management.StandardMBean(stats, StatsMBean.class), name);
    } catch (Exception e) {
      LOG.debug("rackplan: no JMX metrics: {}", e.toString());
    }
  }

  long fallbackCount() {
    long n = 0;
    for (Tally c : fallbacks.values()) n += c.get();
    return n;
  }

  Map<String, Long> fallbacksByKind() {
    Map<String, Long> out = new TreeMap<>();
    for (Map.Entry<String, Tally> e : fallbacks.entrySet()) out.put(e.getKey(), e.getValue().get());
    return out;
  }

  @Override
  public GroupAssignment assign(GroupSpec spec, TopologyDescriber topology) throws TaskAssignorException {
    GroupView view;
    try {
      view = GroupView.of(spec, topology, acceptableRecoveryLag);
    } catch (RuntimeException e) {
      return fallback("error", "the group could not be read: " + e, spec, topology, null);
    }
    if (reader == null) return fallback("unconfigured", "no " + RackplanConfig.BOOTSTRAP + " set", spec, topology, view);
    Set<String> members = new TreeSet<>();
    Set<String> processes = new TreeSet<>();
    for (GroupView.Member m : view.members) {
      members.add(m.id());
      processes.add(m.processId());
    }
    StreamsCatalog.Match match = catalog.match(members, processes, view.partitions);
    if (match.topology() == null) {
      reader.want();
      return fallback("unknown-group", match.reason(), spec, topology, view);
    }
    return assignWith(weighed(match.topology()), view, spec, topology);
  }

  /**
   * The group's racks weighed by the agent's fresh traffic where any of its topics has some (counted);
   * else the topology itself, and the assignment is exactly the count-only one.
   */
  TaskRacks weighed(GroupTopology topology) {
    TrafficStore ts = traffic;
    if (ts == null || ts.size() == 0) return topology;
    long now = System.currentTimeMillis();
    TrafficRacks w = TrafficRacks.of(topology, (t, n) -> ts.weights(t, n, now));
    if (w == null) return topology;
    trafficCount.add();
    return w;
  }

  /** Assigns {@code view} with {@code racks}; a result that fails its check is replaced by the fallback's. */
  GroupAssignment assignWith(TaskRacks racks, GroupView view, GroupSpec spec, TopologyDescriber topology) {
    RackAwareTaskAssignment.Result r;
    try {
      r = RackAwareTaskAssignment.assign(view, racks, strategy);
    } catch (RuntimeException e) {
      LOG.error("rackplan: Streams assignment failed", e);
      return fallback("error", e.toString(), spec, topology, view);
    }
    String bad = RackAwareTaskAssignment.violation(view, r, strategy);
    if (bad != null) {
      LOG.error("rackplan: Streams assignment broke its postconditions ({}): Kafka's sticky assignor assigns", bad);
      return fallback("postcondition", bad, spec, topology, view);
    }
    rackAware.add();
    int cross = 0;
    for (GroupView.Member m : view.members) for (Task t : r.active().get(m.id())) cross += racks.activeCross(t, m.rack());
    String group = racks instanceof GroupTopology g ? g.groupId() : racks instanceof TrafficRacks w ? w.topology().groupId() : "?";
    LOG.info("rackplan: Streams group {} assigned rack-aware: {} tasks on {} members, {} active partitions read across racks{}",
        group, view.tasks.size(), view.members.size(), cross, racks instanceof TrafficRacks ? ", weighed by traffic" : "");
    lastReason = "";
    jvmLastReason = "";
    return toGroupAssignment(view, r);
  }

  /**
   * Kafka's built-in sticky assignor, the reason counted by {@code kind} and logged when it changes;
   * without that class (another Kafka), rackplan's assignment with no racks known (balance and
   * stickiness only).
   */
  GroupAssignment fallback(String kind, String reason, GroupSpec spec, TopologyDescriber topology, GroupView view) {
    fallbacks.computeIfAbsent(kind, k -> new Tally(JVM_FALLBACK + k)).add();
    if (!reason.equals(lastReason)) LOG.warn("rackplan: Streams group assigned by Kafka's sticky assignor: {}", reason);
    lastReason = reason;
    jvmLastReason = reason;
    if (kafkaSticky != null) return kafkaSticky.assign(spec, topology);
    GroupView v = view != null ? view : GroupView.of(spec, topology, acceptableRecoveryLag);
    return toGroupAssignment(v, RackAwareTaskAssignment.assign(v, TaskRacks.NONE, strategy));
  }

  static GroupAssignment toGroupAssignment(GroupView view, RackAwareTaskAssignment.Result r) {
    Map<String, MemberAssignment> out = new HashMap<>();
    for (GroupView.Member m : view.members)
      out.put(m.id(), new MemberAssignment(compact(r.active().get(m.id())), compact(r.standby().get(m.id()))));
    return new GroupAssignment(out);
  }

  private static Map<String, Set<Integer>> compact(Set<Task> tasks) {
    Map<String, Set<Integer>> out = new HashMap<>();
    if (tasks != null) for (Task t : tasks) out.computeIfAbsent(t.subtopology(), k -> new TreeSet<>()).add(t.partition());
    return out;
  }

  @Override
  public void close() {
    Object key = readingKey;
    readingKey = null;
    if (key != null) SHARED.release(key);
    else if (!shared && reader != null) reader.close();
  }
}
