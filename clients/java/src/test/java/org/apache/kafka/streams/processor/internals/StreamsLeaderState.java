package org.apache.kafka.streams.processor.internals;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.assignment.ApplicationState;
import org.apache.kafka.streams.processor.assignment.AssignmentConfigs;
import org.apache.kafka.streams.processor.assignment.ProcessId;
import org.apache.kafka.streams.processor.assignment.TaskInfo;
import org.apache.kafka.streams.processor.assignment.TaskTopicPartition;
import org.apache.kafka.streams.processor.internals.StreamsPartitionAssignor.ClientMetadata;
import org.apache.kafka.streams.processor.internals.TopologyMetadata.Subtopology;
import org.apache.kafka.streams.processor.internals.assignment.ClientState;
import org.apache.kafka.streams.processor.internals.assignment.DefaultApplicationState;
import org.apache.kafka.streams.processor.internals.assignment.DefaultTaskInfo;
import org.apache.kafka.streams.processor.internals.assignment.DefaultTaskTopicPartition;
import org.apache.kafka.streams.processor.internals.assignment.FallbackPriorTaskAssignor;
import org.apache.kafka.streams.processor.internals.assignment.HighAvailabilityTaskAssignor;
import org.apache.kafka.streams.processor.internals.assignment.LegacyTaskAssignor;
import org.apache.kafka.streams.processor.internals.assignment.RackAwareTaskAssignor;
import org.apache.kafka.streams.processor.internals.assignment.RackUtils;

/**
 * A random Kafka Streams group leader's state, built with Kafka's own classes the way
 * StreamsPartitionAssignor builds it (in Kafka's package: ClientMetadata is package-private): the
 * clients' {@link ClientState}s from their subscriptions (consumers, owned partitions, task offset
 * sums, then {@code initializePrevTasks} and {@code computeTaskLags}), the KIP-924 view a custom
 * assignor receives ({@link DefaultApplicationState}, whose partitions learn their racks through
 * {@link RackUtils} from the cluster metadata and the topic descriptions), and {@link #kafkaDefault()}:
 * what Streams assigns without a custom assignor (HighAvailabilityTaskAssignor and a
 * RackAwareTaskAssignor over the same metadata, or FallbackPriorTaskAssignor when the changelog end
 * offsets could not be fetched).
 */
public final class StreamsLeaderState {
  static final long LATEST_OFFSET = -2L;
  static final long UNKNOWN_OFFSET_SUM = -3L;
  static final List<String> RACKS = List.of("az-a", "az-b", "az-c");
  static final StreamsConfig CONFIG = new StreamsConfig(
      Map.of(StreamsConfig.APPLICATION_ID_CONFIG, "parity", StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "unused:9092"));

  public final AssignmentConfigs configs;
  public final ApplicationState view;
  public final boolean lagFetchFailed;
  public final String summary;
  /** sub-topology -> [source topic, changelog topic ("" without), has stores], as generated. */
  public final Map<Integer, List<Object>> topology = new TreeMap<>();
  private final Map<ProcessId, ClientState> states;
  private final Set<TaskId> allTasks;
  private final Set<TaskId> statefulTasks;
  private final Cluster cluster;
  private final InternalTopicManager topics;
  private final Map<TaskId, Set<TopicPartition>> sources;
  private final Map<TaskId, Set<TopicPartition>> changelogs;
  private final Map<ProcessId, Map<String, Optional<String>>> racksByConsumer;

  /**
   * Kafka's default result: process -> (active, standby), whether it asked for a probing rebalance, which
   * legacy assignor ran and whether its rack-aware optimiser was on.
   */
  public record Assignment(Map<ProcessId, List<Set<TaskId>>> tasks, boolean probing, String assignor, boolean rackAware) {}

  /** Streams describes changelog topics (not in the consumer's metadata): the brokers' answer for every topic. */
  static final class Described extends InternalTopicManager {
    final Map<String, List<TopicPartitionInfo>> answer;

    Described(Map<String, List<TopicPartitionInfo>> answer) {
      super(Time.SYSTEM, null, CONFIG);
      this.answer = answer;
    }

    @Override
    public Map<String, List<TopicPartitionInfo>> getTopicPartitionInfo(Set<String> names) {
      Map<String, List<TopicPartitionInfo>> out = new HashMap<>();
      for (String n : names) if (answer.containsKey(n)) out.put(n, answer.get(n));
      return out;
    }
  }

  private StreamsLeaderState(Random r) {
    StringBuilder why = new StringBuilder();
    boolean racked = r.nextInt(10) > 0; // sometimes no broker has a rack
    List<Node> nodes = new ArrayList<>();
    for (int i = 0; i < 6; i++) nodes.add(new Node(i + 1, "b" + (i + 1), 9092, racked ? RACKS.get(i % 3) : null));
    int subtopologies = 1 + r.nextInt(3);
    Map<TaskId, Set<TopicPartition>> src = new TreeMap<>(), log = new TreeMap<>();
    Map<TaskId, Boolean> hasStores = new TreeMap<>();
    List<PartitionInfo> metadata = new ArrayList<>();
    Map<String, List<TopicPartitionInfo>> described = new HashMap<>();
    for (int s = 0; s < subtopologies; s++) {
      int partitions = 1 + r.nextInt(4);
      boolean stores = r.nextInt(10) < 6;
      boolean logged = stores && r.nextInt(10) > 0; // a store with logging disabled: stateful, no changelog
      boolean sourceChangelog = logged && r.nextInt(5) == 0; // the source topic is the changelog
      String source = "in-" + s, changelog = sourceChangelog ? source : "app-store" + s + "-changelog";
      List<TopicPartitionInfo> infos = new ArrayList<>(), sourceInfos = new ArrayList<>();
      for (int p = 0; p < partitions; p++) {
        TaskId t = new TaskId(s, p);
        TopicPartition stp = new TopicPartition(source, p);
        List<Node> replicas = replicas(r, nodes);
        metadata.add(new PartitionInfo(source, p, replicas.get(0), replicas.toArray(new Node[0]), replicas.toArray(new Node[0])));
        sourceInfos.add(new TopicPartitionInfo(p, replicas.get(0), replicas, replicas)); // a describe sees the same
        src.put(t, Set.of(stp));
        log.put(t, logged ? Set.of(new TopicPartition(changelog, p)) : Set.of());
        hasStores.put(t, stores);
        if (logged && !sourceChangelog) {
          List<Node> cr = replicas(r, nodes);
          infos.add(new TopicPartitionInfo(p, cr.get(0), cr, cr));
        }
      }
      topology.put(s, List.of(source, logged ? changelog : "", stores));
      if (!infos.isEmpty()) described.put(changelog, infos);
      described.put(source, sourceInfos);
      why.append(" sub").append(s).append("x").append(partitions).append(stores ? (logged ? (sourceChangelog ? "/srclog" : "/log") : "/nolog") : "");
    }
    cluster = new Cluster("c", nodes, metadata, Set.of(), Set.of());
    topics = new Described(described);
    sources = src;
    changelogs = log;
    allTasks = new TreeSet<>(src.keySet());
    statefulTasks = new TreeSet<>();
    for (Map.Entry<TaskId, Set<TopicPartition>> e : log.entrySet()) if (!e.getValue().isEmpty()) statefulTasks.add(e.getKey());

    String strategy = List.of(StreamsConfig.RACK_AWARE_ASSIGNMENT_STRATEGY_NONE,
        StreamsConfig.RACK_AWARE_ASSIGNMENT_STRATEGY_MIN_TRAFFIC,
        StreamsConfig.RACK_AWARE_ASSIGNMENT_STRATEGY_BALANCE_SUBTOPOLOGY).get(r.nextInt(3));
    List<String> tags = r.nextInt(4) == 0 ? List.of("zone") : List.of();
    long[] recoveryLags = {0L, 100L, 1_000L, 10_000L};
    configs = new AssignmentConfigs(recoveryLags[r.nextInt(4)], 1 + r.nextInt(3), r.nextInt(3), 600_000L, tags,
        r.nextBoolean() ? OptionalInt.empty() : OptionalInt.of(1 + r.nextInt(20)),
        r.nextBoolean() ? OptionalInt.empty() : OptionalInt.of(r.nextInt(5)), strategy);

    lagFetchFailed = !statefulTasks.isEmpty() && r.nextInt(8) == 0; // nothing to fetch cannot fail
    Map<TaskId, Long> endOffsetSums = new TreeMap<>();
    for (TaskId t : statefulTasks) endOffsetSums.put(t, lagFetchFailed ? UNKNOWN_OFFSET_SUM : (long) r.nextInt(5_000));

    // Clients: their consumers (= threads), rack, tags; previous owners of the tasks' partitions.
    int n = 1 + r.nextInt(5);
    List<ProcessId> pids = new ArrayList<>();
    Map<ProcessId, List<String>> consumers = new TreeMap<>();
    for (int i = 0; i < n; i++) {
      ProcessId pid = new ProcessId(new UUID(r.nextLong(), r.nextLong()));
      pids.add(pid);
      List<String> cs = new ArrayList<>();
      for (int c = 0, k = 1 + r.nextInt(3); c < k; c++) cs.add(pid + "-StreamThread-" + (c + 1) + "-consumer");
      consumers.put(pid, cs);
    }
    Map<String, List<TopicPartition>> owned = new HashMap<>();
    Map<String, Map<TaskId, Long>> offsetSums = new HashMap<>();
    for (TaskId t : allTasks) {
      if (r.nextInt(10) < 7) { // someone ran it before
        ProcessId pid = pids.get(r.nextInt(n));
        String c = consumers.get(pid).get(r.nextInt(consumers.get(pid).size()));
        owned.computeIfAbsent(c, k -> new ArrayList<>()).addAll(src.get(t));
        if (statefulTasks.contains(t)) offsetSums.computeIfAbsent(c, k -> new TreeMap<>()).put(t, LATEST_OFFSET);
      }
      if (statefulTasks.contains(t))
        for (ProcessId pid : pids) // state left on other clients (standbys, earlier owners)
          if (r.nextInt(3) == 0) {
            String c = consumers.get(pid).get(0);
            offsetSums.computeIfAbsent(c, k -> new TreeMap<>()).putIfAbsent(t, (long) r.nextInt(6_000));
          }
    }
    Map<TopicPartition, TaskId> taskForPartition = new HashMap<>();
    for (Map.Entry<TaskId, Set<TopicPartition>> e : src.entrySet()) for (TopicPartition tp : e.getValue()) taskForPartition.put(tp, e.getKey());

    Map<ProcessId, ClientMetadata> clients = new TreeMap<>();
    racksByConsumer = new TreeMap<>();
    for (ProcessId pid : pids) {
      Optional<String> rack = r.nextInt(12) == 0 ? Optional.empty() : Optional.of(RACKS.get(r.nextInt(3)));
      Map<String, String> clientTags = tags.isEmpty() ? Map.of() : Map.of("zone", rack.orElse("none"));
      ClientMetadata m = new ClientMetadata(pid, null, clientTags, rack);
      Map<String, Optional<String>> rs = new TreeMap<>();
      for (String c : consumers.get(pid)) {
        m.addConsumer(c, owned.getOrDefault(c, List.of()));
        m.addPreviousTasksAndOffsetSums(c, offsetSums.getOrDefault(c, Map.of()));
        rs.put(c, rack);
      }
      m.state().initializePrevTasks(taskForPartition, false);
      m.state().computeTaskLags(pid, endOffsetSums);
      clients.put(pid, m);
      racksByConsumer.put(pid, rs);
    }
    states = new TreeMap<>();
    for (Map.Entry<ProcessId, ClientMetadata> e : clients.entrySet()) states.put(e.getKey(), e.getValue().state());

    // The KIP-924 view, its partitions annotated with racks by Kafka's RackUtils on first use.
    Set<DefaultTaskTopicPartition> all = new HashSet<>();
    boolean[] fetched = {false};
    Runnable fetch = () -> {
      if (!fetched[0]) {
        fetched[0] = true;
        RackUtils.annotateTopicPartitionsWithRackInfo(cluster, topics, all);
      }
    };
    Map<TaskId, TaskInfo> infos = new TreeMap<>();
    for (TaskId t : allTasks) {
      Set<TaskTopicPartition> tps = new HashSet<>();
      for (TopicPartition tp : src.get(t)) {
        DefaultTaskTopicPartition x = new DefaultTaskTopicPartition(tp, true, log.get(t).contains(tp), fetch);
        all.add(x);
        tps.add(x);
      }
      for (TopicPartition tp : log.get(t))
        if (!src.get(t).contains(tp)) {
          DefaultTaskTopicPartition x = new DefaultTaskTopicPartition(tp, false, true, fetch);
          all.add(x);
          tps.add(x);
        }
      infos.put(t, new DefaultTaskInfo(t, hasStores.get(t), hasStores.get(t) ? Set.of("store" + t.subtopology()) : Set.of(), tps));
    }
    view = new DefaultApplicationState(configs, infos, clients);
    summary = n + " clients," + why + ", standbys " + configs.numStandbyReplicas() + ", strategy " + strategy
        + (tags.isEmpty() ? "" : ", tags") + (racked ? "" : ", brokers without racks")
        + (lagFetchFailed ? ", lag fetch failed" : "");
  }

  private static List<Node> replicas(Random r, List<Node> nodes) {
    List<Node> shuffled = new ArrayList<>(nodes);
    java.util.Collections.shuffle(shuffled, r);
    return List.copyOf(shuffled.subList(0, 1 + r.nextInt(2)));
  }

  public static StreamsLeaderState random(long seed) {
    return new StreamsLeaderState(new Random(seed));
  }

  /**
   * What Kafka Streams assigns without a custom assignor, as StreamsPartitionAssignor calls it. Run it
   * after the view was read: it assigns into Kafka's own ClientStates.
   */
  public Assignment kafkaDefault() {
    RackAwareTaskAssignor rackAware = new RackAwareTaskAssignor(cluster, sources, changelogs, bySubtopology(),
        racksByConsumer, topics, configs, Time.SYSTEM);
    LegacyTaskAssignor a = lagFetchFailed ? new FallbackPriorTaskAssignor() : new HighAvailabilityTaskAssignor();
    boolean probing = a.assign(states, allTasks, statefulTasks, rackAware, configs);
    Map<ProcessId, List<Set<TaskId>>> out = new TreeMap<>();
    for (Map.Entry<ProcessId, ClientState> e : states.entrySet())
      out.put(e.getKey(), List.of(new TreeSet<>(e.getValue().activeTasks()), new TreeSet<>(e.getValue().standbyTasks())));
    return new Assignment(out, probing, a.getClass().getSimpleName(), !lagFetchFailed && rackAware.canEnableRackAwareAssignor());
  }

  private Map<Subtopology, Set<TaskId>> bySubtopology() {
    Map<Subtopology, Set<TaskId>> out = new HashMap<>();
    for (TaskId t : allTasks) out.computeIfAbsent(new Subtopology(t.subtopology(), t.topologyName()), k -> new HashSet<>()).add(t);
    return out;
  }
}
