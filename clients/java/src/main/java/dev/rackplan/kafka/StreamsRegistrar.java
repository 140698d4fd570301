package dev.rackplan.kafka;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BiConsumer;
import java.util.concurrent.Executor;
import java.util.concurrent.Executors;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.assignment.ApplicationState;
import org.apache.kafka.streams.processor.assignment.AssignmentConfigs;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsState;
import org.apache.kafka.streams.processor.assignment.ProcessId;
import org.apache.kafka.streams.processor.assignment.TaskInfo;
import org.apache.kafka.streams.processor.assignment.TaskTopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Registers a Kafka Streams app's clients on the registrations topic (docs/registration-schema.json,
 * key {@code streams/<application.id>/<process id>}), so that the agent plans the app without the
 * operator listing its clients.
 *
 * <p>The group leader's task assignor is the one place that sees every live client: its process id
 * (the id plans name), rack ({@code client.rack}), threads, client tags and its threads' consumers
 * ({@code consumer_client_ids}: how the agent knows the group's live members), and the app's topology
 * (each task's source and changelog partitions) and assignment settings. So at every assignment the
 * leader publishes one record per live client, each carrying the app-level fields as well, and a
 * tombstone for every client that is no longer in the group: those this JVM registered before, and
 * those the app's current plan names (which is how a leader new to the app knows them). Sends run on
 * a daemon thread, never on the Streams thread that assigns.
 */
final class StreamsRegistrar {
  private static final Logger LOG = LoggerFactory.getLogger(StreamsRegistrar.class);

  /** One registrar per (bootstrap, registrations topic) in the JVM (Streams makes an assignor per assignment). */
  static final Map<String, StreamsRegistrar> BY_TARGET = new ConcurrentHashMap<>();

  private final RackplanConfig config;
  private final String clientId;
  private final Executor sender;
  /** Sends one record (null value: a tombstone), on the sender thread. */
  private final BiConsumer<String, byte[]> sink;
  private KafkaProducer<String, byte[]> producer; // on the sender thread only
  /** app -> keys this JVM registered and has not tombstoned. */
  private final Map<String, Set<String>> registered = new HashMap<>();

  StreamsRegistrar(RackplanConfig config, String clientId) {
    this.config = config;
    this.clientId = clientId;
    this.sender = Executors.newSingleThreadExecutor(r -> {
      Thread t = new Thread(r, "rackplan-" + clientId);
      t.setDaemon(true);
      return t;
    });
    this.sink = this::send;
  }

  /** For tests: records go to ``sink`` on the caller's thread, no I/O. */
  StreamsRegistrar(RackplanConfig config, BiConsumer<String, byte[]> sink) {
    this.config = config;
    this.clientId = "test";
    this.sender = Runnable::run;
    this.sink = sink;
  }

  static String key(String applicationId, String processId) {
    return "streams/" + RackplanClient.escape(applicationId) + "/" + RackplanClient.escape(processId);
  }

  /**
   * The registration records of ``state``'s live clients (key -> value), or null with the reason
   * logged when the app cannot be described (named topologies: plans have no name for their tasks).
   */
  static Map<String, byte[]> records(String applicationId, ApplicationState state, RackplanConfig config, long nowMs) {
    Map<String, Object> app = appFields(state);
    if (app == null) return null;
    Map<String, byte[]> out = new TreeMap<>();
    for (Map.Entry<ProcessId, KafkaStreamsState> e : state.kafkaStreamsStates(false).entrySet()) {
      KafkaStreamsState c = e.getValue();
      Map<String, Object> v = new LinkedHashMap<>();
      v.put("schema", 1L);
      v.put("application_id", applicationId);
      v.put("process_id", e.getKey().id().toString());
      v.put("rack", c.rackId().orElse(null));
      v.put("threads", (long) c.numProcessingThreads());
      v.put("tags", new TreeMap<>(c.clientTags()));
      // What the agent matches the group's live members with when the app sets its own client.id (the
      // process id, a UUID, is in no member's id): sorted, as Streams keeps them.
      v.put("consumer_client_ids", new ArrayList<>(c.consumerClientIds()));
      v.putAll(app);
      if (config.fetchMode != null) v.put("fetch_mode", config.fetchMode);
      v.put("timestamp_ms", nowMs);
      if (config.registrationSecret != null) v.put("signature", RackplanClient.sign(v, config.registrationSecret));
      out.put(key(applicationId, e.getKey().id().toString()), Json.write(v).getBytes(StandardCharsets.UTF_8));
    }
    return out;
  }

  /** The app-level fields: sub-topologies from the tasks' partitions, and the assignment settings. */
  static Map<String, Object> appFields(ApplicationState state) {
    Map<Integer, Set<String>> sources = new TreeMap<>(), changelogs = new TreeMap<>();
    Map<Integer, Boolean> stateful = new TreeMap<>();
    for (TaskInfo t : state.allTasks().values()) {
      TaskId id = t.id();
      if (id.topologyName() != null) return null;
      Set<String> src = sources.computeIfAbsent(id.subtopology(), k -> new TreeSet<>());
      Set<String> log = changelogs.computeIfAbsent(id.subtopology(), k -> new TreeSet<>());
      for (TaskTopicPartition tp : t.topicPartitions()) {
        if (tp.isSource()) src.add(tp.topicPartition().topic());
        if (tp.isChangelog()) log.add(tp.topicPartition().topic());
      }
      stateful.merge(id.subtopology(), t.isStateful(), Boolean::logicalOr);
    }
    List<Object> subs = new ArrayList<>();
    for (Integer s : sources.keySet()) {
      Map<String, Object> sub = new LinkedHashMap<>();
      sub.put("id", s.toString());
      sub.put("source_topics", new ArrayList<>(sources.get(s)));
      sub.put("changelog_topics", new ArrayList<>(changelogs.get(s)));
      sub.put("stateful", stateful.get(s));
      subs.add(sub);
    }
    AssignmentConfigs c = state.assignmentConfigs();
    Map<String, Object> app = new LinkedHashMap<>();
    app.put("subtopologies", subs);
    app.put("num_standby_replicas", (long) c.numStandbyReplicas());
    app.put("acceptable_recovery_lag", c.acceptableRecoveryLag());
    app.put("max_warmup_replicas", (long) c.maxWarmupReplicas());
    app.put("rack_aware_assignment_tags", new ArrayList<>(c.rackAwareAssignmentTags()));
    Map<String, Object> rackAware = new LinkedHashMap<>();
    rackAware.put("strategy", c.rackAwareAssignmentStrategy());
    c.rackAwareTrafficCost().ifPresent(x -> rackAware.put("traffic_cost", (long) x));
    c.rackAwareNonOverlapCost().ifPresent(x -> rackAware.put("non_overlap_cost", (long) x));
    app.put("rack_aware", rackAware);
    return app;
  }

  /**
   * Publishes ``records`` for ``applicationId`` and tombstones for the app's clients that are not
   * among them: those this JVM registered, and ``planned`` (the keys of the clients the app's plan
   * names, which a new leader knows no other way); returns at once (a daemon thread sends).
   */
  void publish(String applicationId, Map<String, byte[]> records, Set<String> planned) {
    Set<String> gone;
    synchronized (this) {
      gone = new TreeSet<>(registered.getOrDefault(applicationId, Set.of()));
      gone.addAll(planned);
      gone.removeAll(records.keySet());
      registered.put(applicationId, new HashSet<>(records.keySet()));
    }
    sender.execute(() -> {
      try {
        for (Map.Entry<String, byte[]> r : records.entrySet()) sink.accept(r.getKey(), r.getValue());
        for (String k : gone) sink.accept(k, null);
      } catch (RuntimeException e) {
        LOG.warn("rackplan: Streams registrations of {} not published: {}", applicationId, e.toString());
      }
    });
  }

  private void send(String key, byte[] value) {
    if (producer == null) producer = new KafkaProducer<>(config.producerConfig(clientId));
    producer.send(new ProducerRecord<>(config.registrationsTopic, key, value), (md, err) -> {
      if (err != null) LOG.warn("rackplan: registration {} not published: {}", key, err.toString());
    });
  }

  /** Keys registered for ``applicationId`` (tests). */
  synchronized Set<String> registered(String applicationId) {
    return new TreeSet<>(registered.getOrDefault(applicationId, Set.of()));
  }
}
