package dev.rackplan.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.assignment.AssignmentConfigs;
import org.apache.kafka.streams.processor.assignment.ProcessId;
import org.apache.kafka.streams.processor.internals.InternalTopicManager;
import org.apache.kafka.streams.processor.internals.TopologyMetadata.Subtopology;
import org.apache.kafka.streams.processor.internals.assignment.ClientState;
import org.apache.kafka.streams.processor.internals.assignment.HighAvailabilityTaskAssignor;
import org.apache.kafka.streams.processor.internals.assignment.RackAwareTaskAssignor;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;

/**
 * Kafka Streams' high-availability task assignor (Kafka 4.4.0's
 * {@code HighAvailabilityTaskAssignor} with its KIP-925
 * {@code RackAwareTaskAssignor}) on a contract {@code streams_app} document.
 *
 * <p>Called as {@code StreamsPartitionAssignor.assign} calls it on the legacy
 * (non-KIP-924) path: one {@link ClientState} per process with its thread
 * count as capacity, its previous active and standby tasks, its task lags and
 * its client tags; a {@link RackAwareTaskAssignor} over the same
 * {@link Cluster} with each task's source partitions, its changelog partitions
 * and the sub-topology's tasks; one consumer per thread, all in the client's
 * rack. The changelog topics' replicas are read from the document's cluster
 * (an {@link InternalTopicManager} that answers from it, where Kafka asks the
 * brokers).
 *
 * <p>Mapping the contract onto Kafka's types: process ids become UUIDs that
 * sort as rackplan sorts the ids (rackplan orders clients by process id, Kafka
 * by UUID); a sub-topology id must be an integer; a stateful sub-topology's
 * tasks are the stateful tasks (Kafka: tasks with changelogs); a missing task
 * lag is {@code Long.MAX_VALUE} (never caught up, as the contract says).
 *
 * <p>Answer: {@code {"streams_app": {"assignment": {pid: {"active": [...],
 * "standby": [...]}}, "probing_rebalance_needed": b, "rack_aware": b}}}.
 * Kafka keeps warm-up replicas among the standbys, so {@code standby} holds
 * both; {@code rack_aware} says whether Kafka's rack optimisation ran
 * ({@code canEnableRackAwareAssignor}). The timing fields ({@code oracle_first_ns},
 * {@code oracle_repeat}) are {@link Oracle}'s, timing the rack-aware assignor's
 * construction and {@code HighAvailabilityTaskAssignor.assign}.
 */
final class StreamsOracle {
    private static final ObjectMapper JSON = new ObjectMapper();

    private StreamsOracle() {
    }

    /** An InternalTopicManager that describes topics from the document's cluster, never a broker. */
    private static final class ClusterTopics extends InternalTopicManager {
        private final Cluster cluster;

        ClusterTopics(Cluster cluster) {
            super(Time.SYSTEM, null, streamsConfig());
            this.cluster = cluster;
        }

        @Override
        public Map<String, List<TopicPartitionInfo>> getTopicPartitionInfo(Set<String> topics) {
            Map<String, List<TopicPartitionInfo>> out = new HashMap<>();
            for (String topic : topics) {
                List<PartitionInfo> parts = cluster.partitionsForTopic(topic);
                if (parts.isEmpty())
                    continue; // unknown topic: Kafka's describe fails and rack awareness is off
                List<TopicPartitionInfo> infos = new ArrayList<>();
                for (PartitionInfo p : parts) {
                    List<Node> replicas = Arrays.asList(p.replicas());
                    infos.add(new TopicPartitionInfo(p.partition(), p.leader(), replicas, replicas));
                }
                infos.sort((a, b) -> Integer.compare(a.partition(), b.partition()));
                out.put(topic, infos);
            }
            return out;
        }

        private static StreamsConfig streamsConfig() {
            Properties props = new Properties();
            props.put(StreamsConfig.APPLICATION_ID_CONFIG, "rackplan-oracle");
            props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "127.0.0.1:9");
            return new StreamsConfig(props);
        }
    }

    static ObjectNode answer(JsonNode doc) {
        JsonNode app = doc.get("streams_app");
        String assignor = app.path("assignor").asText("high-availability");
        if (!assignor.equals("high-availability"))
            throw new IllegalArgumentException("streams assignor '" + assignor + "' has no Kafka counterpart here");
        Cluster cluster = Oracle.cluster(doc.get("cluster"));

        // Tasks: S_p for every sub-topology S and partition p of its source topics.
        Map<TaskId, Set<TopicPartition>> sourceParts = new HashMap<>();
        Map<TaskId, Set<TopicPartition>> changelogParts = new HashMap<>();
        Map<Subtopology, Set<TaskId>> tasksForSub = new HashMap<>();
        Set<TaskId> allTasks = new TreeSet<>();
        Set<TaskId> statefulTasks = new TreeSet<>();
        for (JsonNode sub : app.get("subtopologies")) {
            int s = Integer.parseInt(sub.get("id").asText());
            List<String> sources = texts(sub.get("source_topics"));
            List<String> logs = texts(sub.path("changelog_topics"));
            boolean stateful = sub.path("stateful").asBoolean(false);
            int n = cluster.partitionCountForTopic(sources.get(0));
            Set<TaskId> mine = new TreeSet<>();
            for (int p = 0; p < n; p++) {
                TaskId t = new TaskId(s, p);
                Set<TopicPartition> src = new HashSet<>();
                for (String topic : sources)
                    src.add(new TopicPartition(topic, p));
                Set<TopicPartition> log = new HashSet<>();
                if (stateful)
                    for (String topic : logs)
                        log.add(new TopicPartition(topic, p));
                sourceParts.put(t, src);
                changelogParts.put(t, log);
                mine.add(t);
                allTasks.add(t);
                if (stateful)
                    statefulTasks.add(t);
            }
            tasksForSub.put(new Subtopology(s, null), mine);
        }

        // Clients: UUIDs in rackplan's order of process ids.
        List<JsonNode> clients = new ArrayList<>();
        app.get("clients").forEach(clients::add);
        clients.sort((a, b) -> compareCodePoints(a.get("process_id").asText(), b.get("process_id").asText()));
        Map<ProcessId, Map<String, Optional<String>>> racks = new HashMap<>();
        Map<ProcessId, String> names = new HashMap<>();
        for (int i = 0; i < clients.size(); i++) {
            JsonNode c = clients.get(i);
            ProcessId pid = new ProcessId(new UUID(0L, i));
            names.put(pid, c.get("process_id").asText());
            int threads = c.path("threads").asInt(1);
            JsonNode rack = c.get("rack");
            Optional<String> r = rack == null || rack.isNull() ? Optional.empty() : Optional.of(rack.asText());
            Map<String, Optional<String>> consumers = new TreeMap<>();
            for (int k = 0; k < threads; k++)
                consumers.put(names.get(pid) + "-consumer-" + k, r);
            racks.put(pid, consumers);
        }
        Map<ProcessId, ClientState> states = clientStates(clients, statefulTasks);

        JsonNode ra = app.path("rack_aware");
        List<String> tagKeys = texts(app.path("rack_aware_assignment_tags"));
        AssignmentConfigs configs = new AssignmentConfigs(
            app.path("acceptable_recovery_lag").asLong(10_000L),
            app.path("max_warmup_replicas").asInt(2),
            app.path("num_standby_replicas").asInt(0),
            600_000L,
            tagKeys,
            optionalInt(ra.get("traffic_cost")),
            optionalInt(ra.get("non_overlap_cost")),
            ra.path("strategy").asText("none"));
        // Timed (Clock): the rack-aware assignor's construction and the assignment, as
        // StreamsPartitionAssignor does them per rebalance; building the client states is not.
        Clock first = Clock.start();
        RackAwareTaskAssignor rackAware = new RackAwareTaskAssignor(cluster, sourceParts, changelogParts,
            tasksForSub, racks, new ClusterTopics(cluster), configs, Time.SYSTEM);
        boolean probing = new HighAvailabilityTaskAssignor().assign(states, allTasks, statefulTasks, rackAware, configs);
        first.stop();

        ObjectNode out = JSON.createObjectNode();
        ObjectNode sa = out.putObject("streams_app");
        ObjectNode assignment = sa.putObject("assignment");
        for (Map.Entry<ProcessId, ClientState> e : states.entrySet()) {
            ObjectNode one = assignment.putObject(names.get(e.getKey()));
            one.set("active", taskList(e.getValue().activeTasks()));
            one.set("standby", taskList(e.getValue().standbyTasks()));
        }
        sa.put("probing_rebalance_needed", probing);
        sa.put("rack_aware", rackAware.canEnableRackAwareAssignor());
        first.report(out);
        Clock.repeat(out, doc.path("oracle_repeat").asInt(0), () -> {
            Map<ProcessId, ClientState> fresh = clientStates(clients, statefulTasks);
            return () -> new HighAvailabilityTaskAssignor().assign(fresh, allTasks, statefulTasks,
                new RackAwareTaskAssignor(cluster, sourceParts, changelogParts, tasksForSub, racks,
                    new ClusterTopics(cluster), configs, Time.SYSTEM), configs);
        });
        return out;
    }

    /** One fresh {@link ClientState} per client (the assignor fills them in), in the sorted order of {@code clients}. */
    private static Map<ProcessId, ClientState> clientStates(List<JsonNode> clients, Set<TaskId> statefulTasks) {
        Map<ProcessId, ClientState> states = new TreeMap<>();
        for (int i = 0; i < clients.size(); i++) {
            JsonNode c = clients.get(i);
            ProcessId pid = new ProcessId(new UUID(0L, i));
            Map<TaskId, Long> lags = new HashMap<>();
            for (TaskId t : statefulTasks)
                lags.put(t, Long.MAX_VALUE);
            JsonNode given = c.path("task_lags");
            given.fieldNames().forEachRemaining(k -> {
                TaskId t = TaskId.parse(k);
                if (statefulTasks.contains(t))
                    lags.put(t, given.get(k).asLong());
            });
            Map<String, String> tags = new HashMap<>();
            c.path("tags").fieldNames().forEachRemaining(k -> tags.put(k, c.get("tags").get(k).asText()));
            int threads = c.path("threads").asInt(1);
            states.put(pid, new ClientState(taskSet(c.path("previous_active")),
                taskSet(c.path("previous_standby")), lags, tags, threads, pid));
        }
        return states;
    }

    private static int compareCodePoints(String a, String b) {
        return Arrays.compare(a.codePoints().toArray(), b.codePoints().toArray());
    }

    private static OptionalInt optionalInt(JsonNode v) {
        return v == null || v.isNull() ? OptionalInt.empty() : OptionalInt.of(v.asInt());
    }

    private static List<String> texts(JsonNode arr) {
        List<String> out = new ArrayList<>();
        if (arr != null)
            arr.forEach(x -> out.add(x.asText()));
        return out;
    }

    private static Set<TaskId> taskSet(JsonNode arr) {
        Set<TaskId> out = new HashSet<>();
        arr.forEach(x -> out.add(TaskId.parse(x.asText())));
        return out;
    }

    private static ArrayNode taskList(Set<TaskId> tasks) {
        ArrayNode arr = JSON.createArrayNode();
        for (TaskId t : new TreeSet<>(tasks))
            arr.add(t.toString());
        return arr;
    }
}
