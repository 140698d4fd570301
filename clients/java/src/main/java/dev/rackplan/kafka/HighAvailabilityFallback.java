package dev.rackplan.kafka;

import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
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
import org.apache.kafka.streams.processor.assignment.KafkaStreamsAssignment;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsAssignment.AssignedTask;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsState;
import org.apache.kafka.streams.processor.assignment.ProcessId;
import org.apache.kafka.streams.processor.assignment.TaskInfo;
import org.apache.kafka.streams.processor.assignment.TaskTopicPartition;
import org.apache.kafka.streams.processor.internals.InternalTopicManager;
import org.apache.kafka.streams.processor.internals.TopologyMetadata.Subtopology;
import org.apache.kafka.streams.processor.internals.assignment.ClientState;
import org.apache.kafka.streams.processor.internals.assignment.FallbackPriorTaskAssignor;
import org.apache.kafka.streams.processor.internals.assignment.HighAvailabilityTaskAssignor;
import org.apache.kafka.streams.processor.internals.assignment.LegacyTaskAssignor;
import org.apache.kafka.streams.processor.internals.assignment.RackAwareTaskAssignor;

/**
 * Kafka Streams' own default task assignment, run on a KIP-924 {@link ApplicationState}: what Streams
 * does when no {@code task.assignor.class} is set, so that an app falls back to exactly what it would
 * have had without rackplan.
 *
 * <p>Streams' default is {@link HighAvailabilityTaskAssignor} (with {@link RackAwareTaskAssignor}),
 * or {@link FallbackPriorTaskAssignor} when the leader could not fetch the changelogs' end offsets.
 * Both implement Streams' internal {@code LegacyTaskAssignor} on Streams' internal {@link ClientState}
 * and are public classes, but KIP-924 hands a custom assignor only the public view. That view carries
 * everything the legacy assignors read, so this class rebuilds their inputs from it, the way Streams
 * builds them for itself:
 *
 * <ul>
 *   <li>one {@link ClientState} per client: previous active and standby tasks, task lags ({@code
 *       statefulTasksToLagSums()}, which Streams fills from the same {@code ClientState}), client tags,
 *       capacity (= consumers = {@code numProcessingThreads()});
 *   <li>the stateful tasks: those with a lag, i.e. with a changelog (Streams' own set);
 *   <li>a {@link RackAwareTaskAssignor} from the same inputs as Streams': source and changelog
 *       partitions per task, tasks per sub-topology, each consumer's rack, the assignment configs. The
 *       replica racks of the partitions are those Streams already put in the view ({@code
 *       TaskTopicPartition.rackIds()}, fetched by Streams from the same cluster metadata and topic
 *       descriptions); they are read only when rack-aware assignment is on, as Streams does.
 *   <li>the lag fetch having failed (then Streams uses {@code FallbackPriorTaskAssignor}): Streams then
 *       gives every stateful task the lag {@code UNKNOWN_OFFSET_SUM} (-3) except where it runs as an
 *       active ({@code LATEST_OFFSET}, -2); a successful fetch gives a client that lacks a task's
 *       state a lag of at least 0. So "no lag of 0 or more, and some -3" is read as a failed fetch.
 *       (The one case this cannot tell apart, all stateful tasks running on one client, gives the same
 *       tasks either way.)
 * </ul>
 *
 * <p>A probing rebalance the legacy assignor asks for is scheduled as Streams does: {@code
 * probing.rebalance.interval.ms} from now. These classes are internal to Kafka Streams: a Kafka
 * version whose internals differ makes {@link #assign} throw a {@link LinkageError}, which the caller
 * turns into a logged fallback to the public {@code StickyTaskAssignor}. Built and tested against
 * Kafka 4.3.1 (HighAvailabilityTaskAssignorParityTest: equal to Streams' own on random states).
 */
final class HighAvailabilityFallback {
  private HighAvailabilityFallback() {}

  /** Kafka's lag markers (Task.LATEST_OFFSET, SubscriptionInfo.UNKNOWN_OFFSET_SUM). */
  static final long LATEST_OFFSET = -2L;
  static final long UNKNOWN_OFFSET_SUM = -3L;

  /** What Kafka's assignor decided: per client, and which legacy assignor it was. */
  record Result(List<KafkaStreamsAssignment> assignment, String assignor, boolean probing) {}

  static Result assign(ApplicationState state) {
    AssignmentConfigs configs = state.assignmentConfigs();
    Map<ProcessId, KafkaStreamsState> views = state.kafkaStreamsStates(true);
    Map<TaskId, TaskInfo> tasks = state.allTasks();
    Set<TaskId> stateful = new TreeSet<>();
    for (KafkaStreamsState s : views.values()) stateful.addAll(s.statefulTasksToLagSums().keySet());
    Map<ProcessId, ClientState> clients = new TreeMap<>();
    Map<ProcessId, Map<String, Optional<String>>> racksByConsumer = new TreeMap<>();
    boolean someUnknown = false, someKnown = false;
    for (Map.Entry<ProcessId, KafkaStreamsState> e : views.entrySet()) {
      KafkaStreamsState s = e.getValue();
      Map<TaskId, Long> lags = new TreeMap<>(s.statefulTasksToLagSums());
      for (long lag : lags.values()) {
        if (lag == UNKNOWN_OFFSET_SUM) someUnknown = true;
        if (lag >= 0) someKnown = true;
      }
      clients.put(e.getKey(), new ClientState(s.previousActiveTasks(), s.previousStandbyTasks(), lags,
          s.clientTags(), s.numProcessingThreads(), e.getKey()));
      Map<String, Optional<String>> racks = new TreeMap<>();
      // Streams records every consumer's client.rack; one Streams client's consumers share one config.
      for (String consumer : s.consumerClientIds()) racks.put(consumer, s.rackId());
      racksByConsumer.put(e.getKey(), racks);
    }
    boolean lagFetchFailed = someUnknown && !someKnown;
    RackAwareTaskAssignor rackAware = rackAware(tasks, racksByConsumer, configs);
    LegacyTaskAssignor legacy = lagFetchFailed ? new FallbackPriorTaskAssignor() : new HighAvailabilityTaskAssignor();
    boolean probing = legacy.assign(clients, new HashSet<>(tasks.keySet()), stateful, rackAware, configs);
    Optional<Instant> followup =
        probing ? Optional.of(Instant.now().plusMillis(configs.probingRebalanceIntervalMs())) : Optional.empty();
    List<KafkaStreamsAssignment> out = new ArrayList<>();
    for (Map.Entry<ProcessId, ClientState> e : clients.entrySet()) {
      Set<AssignedTask> mine = new HashSet<>();
      for (TaskId t : e.getValue().activeTasks()) mine.add(new AssignedTask(t, AssignedTask.Type.ACTIVE));
      for (TaskId t : e.getValue().standbyTasks()) mine.add(new AssignedTask(t, AssignedTask.Type.STANDBY));
      KafkaStreamsAssignment a = KafkaStreamsAssignment.of(e.getKey(), mine);
      out.add(followup.isPresent() ? a.withFollowupRebalance(followup.get()) : a);
    }
    return new Result(out, legacy.getClass().getSimpleName(), probing);
  }

  /** Kafka's rack-aware optimiser on the view's partitions and racks (as Streams builds it for itself). */
  private static RackAwareTaskAssignor rackAware(
      Map<TaskId, TaskInfo> tasks, Map<ProcessId, Map<String, Optional<String>>> racksByConsumer, AssignmentConfigs configs) {
    Map<TaskId, Set<TopicPartition>> sources = new HashMap<>();
    Map<TaskId, Set<TopicPartition>> changelogs = new HashMap<>();
    Map<Subtopology, Set<TaskId>> bySubtopology = new HashMap<>();
    boolean rackAware = !StreamsConfig.RACK_AWARE_ASSIGNMENT_STRATEGY_NONE.equals(configs.rackAwareAssignmentStrategy());
    Map<TopicPartition, Set<String>> racks = new HashMap<>();
    for (TaskInfo info : tasks.values()) {
      Set<TopicPartition> src = new HashSet<>(), log = new HashSet<>();
      for (TaskTopicPartition tp : info.topicPartitions()) {
        if (tp.isSource()) src.add(tp.topicPartition());
        if (tp.isChangelog()) log.add(tp.topicPartition());
        // rackIds() makes Streams describe the topics (once per assignment): only when it matters.
        if (rackAware) racks.put(tp.topicPartition(), tp.rackIds().orElse(Set.of()));
      }
      sources.put(info.id(), src);
      changelogs.put(info.id(), log);
      bySubtopology.computeIfAbsent(new Subtopology(info.id().subtopology(), info.id().topologyName()), k -> new HashSet<>())
          .add(info.id());
    }
    return new RackAwareTaskAssignor(cluster(racks), sources, changelogs, bySubtopology, racksByConsumer,
        new KnownRacks(racks), configs, Time.SYSTEM);
  }

  /** One node per rack: a partition's replicas are the nodes of its racks (only racks are read). */
  private static Map<String, Node> nodes(Map<TopicPartition, Set<String>> racks) {
    Set<String> all = new TreeSet<>();
    for (Set<String> rs : racks.values()) all.addAll(rs);
    Map<String, Node> nodes = new TreeMap<>();
    int id = 0;
    for (String r : all) nodes.put(r, new Node(id++, "rack-" + id + ".rackplan.invalid", 9092, r));
    return nodes;
  }

  private static Node[] replicas(Set<String> racks, Map<String, Node> nodes) {
    List<Node> out = new ArrayList<>();
    for (String r : new TreeSet<>(racks)) out.add(nodes.get(r));
    return out.toArray(new Node[0]);
  }

  private static Cluster cluster(Map<TopicPartition, Set<String>> racks) {
    Map<String, Node> nodes = nodes(racks);
    List<PartitionInfo> parts = new ArrayList<>();
    for (Map.Entry<TopicPartition, Set<String>> e : racks.entrySet()) {
      Node[] rs = replicas(e.getValue(), nodes);
      parts.add(new PartitionInfo(e.getKey().topic(), e.getKey().partition(), rs.length == 0 ? null : rs[0], rs, rs));
    }
    return new Cluster("rackplan", nodes.values(), parts, Set.of(), Set.of());
  }

  /**
   * Kafka's RackAwareTaskAssignor describes changelog topics through Streams' InternalTopicManager; this
   * one answers from the racks Streams already described (the view's), without I/O. A partition without
   * racks is returned without replicas, which Kafka reads as "rack-aware assignment not possible".
   */
  static final class KnownRacks extends InternalTopicManager {
    private static final StreamsConfig CONFIG = new StreamsConfig(Map.of(
        StreamsConfig.APPLICATION_ID_CONFIG, "rackplan-ha-fallback", StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "unused:9092"));
    private final Map<TopicPartition, Set<String>> racks;

    KnownRacks(Map<TopicPartition, Set<String>> racks) {
      super(Time.SYSTEM, null, CONFIG);
      this.racks = racks;
    }

    @Override
    public Map<String, List<TopicPartitionInfo>> getTopicPartitionInfo(Set<String> topics) {
      Map<String, Node> nodes = nodes(racks);
      Map<String, TreeMap<Integer, TopicPartitionInfo>> byTopic = new TreeMap<>();
      for (Map.Entry<TopicPartition, Set<String>> e : racks.entrySet()) {
        if (!topics.contains(e.getKey().topic())) continue;
        List<Node> rs = List.of(replicas(e.getValue(), nodes));
        byTopic.computeIfAbsent(e.getKey().topic(), k -> new TreeMap<>()).put(e.getKey().partition(),
            new TopicPartitionInfo(e.getKey().partition(), rs.isEmpty() ? null : rs.get(0), rs, rs));
      }
      Map<String, List<TopicPartitionInfo>> out = new HashMap<>();
      for (Map.Entry<String, TreeMap<Integer, TopicPartitionInfo>> e : byTopic.entrySet())
        out.put(e.getKey(), new ArrayList<>(e.getValue().values()));
      return out;
    }
  }
}
