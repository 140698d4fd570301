package dev.rackplan.oracle;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.GroupSubscription;
import org.apache.kafka.clients.consumer.ConsumerPartitionAssignor.Subscription;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.internals.ConsumerProtocol;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

/**
 * Kafka's own consumer-group assignors as a test oracle for rackplan.
 *
 * <p>Reads contract input documents (see shared/CONTRACT.md), one per line on
 * stdin, and writes one JSON line per document on stdout: Kafka's answer in the
 * contract's output shape ({@code consumer_group.assignment} and
 * {@code revoked}). One JVM serves any number of documents, so the JIT warms up
 * once and thousands of cases run in minutes.
 *
 * <p>The assignor is called exactly as the group leader calls it
 * ({@code ConsumerCoordinator.onLeaderElected}): {@code assign(Cluster,
 * GroupSubscription)}, with a {@link Cluster} carrying every broker's rack and
 * every partition's replicas, and one {@link Subscription} per member built as
 * {@code ConsumerCoordinator.metadata()} builds it (topics, the assignor's
 * {@code subscriptionUserData}, owned partitions, generation, rack id), sent
 * through {@link ConsumerProtocol}'s wire format and read back, with the static
 * member's {@code group.instance.id} set as the leader sets it.
 *
 * <p>Cooperative withholding: in Kafka 4.3 {@code CooperativeStickyAssignor}
 * itself removes from the result every partition that changes owner (its
 * {@code adjustAssignment}); the leader then skips
 * {@code validateCooperativeAssignment} for it. Each consumer revokes what it
 * owned and was not assigned ({@code ConsumerCoordinator.onJoinComplete}). So
 * {@code assignment} is the assignor's result as returned and {@code revoked}
 * lists, per member, its reported owned partitions missing from its
 * assignment. For {@code range} (an eager assignor) {@code revoked} is empty,
 * as in the contract.
 *
 * <p>Extra input fields understood here (the contract ignores unknown fields):
 * {@code "oracle_repeat": N} runs the assignor N more times on the same input
 * after the answer and adds {@code "oracle_timing_ns"} (each run's wall time) and
 * {@code "oracle_cpu_ns"} (each run's CPU time on the calling thread,
 * {@code ThreadMXBean#getCurrentThreadCpuTime}) to the output, for benchmarks that
 * want a JIT-warmed Kafka. Every answer also carries {@code "oracle_first_ns"} and
 * {@code "oracle_first_cpu_ns"}: wall and thread CPU of the call that made the
 * answer (in a fresh JVM: Kafka cold). Streams documents take the same fields.
 *
 * <p>A {@code streams_app} document is answered by {@link StreamsOracle}
 * (Kafka Streams' high-availability task assignor, rack-aware).
 *
 * <p>A document Kafka cannot take gives {@code {"error": "..."}} on its line;
 * the process carries on with the next line.
 */
public final class Oracle {
    private static final ObjectMapper JSON = new ObjectMapper();

    private Oracle() {
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8), 1 << 20);
        BufferedWriter out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 20);
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank())
                continue;
            String answer;
            try {
                answer = JSON.writeValueAsString(answer(JSON.readTree(line)));
            } catch (Exception | StackOverflowError e) {
                ObjectNode err = JSON.createObjectNode();
                err.put("error", e.getClass().getSimpleName() + ": " + e.getMessage());
                answer = JSON.writeValueAsString(err);
            }
            out.write(answer);
            out.write('\n');
            if (!in.ready())
                out.flush();
        }
        out.flush();
    }

    /** Kafka's answer to one contract input document. */
    static ObjectNode answer(JsonNode doc) {
        if (doc.has("streams_app"))
            return StreamsOracle.answer(doc);
        JsonNode group = doc.get("consumer_group");
        if (group == null)
            throw new IllegalArgumentException("a document needs consumer_group or streams_app");
        Cluster cluster = cluster(doc.get("cluster"));
        String assignorName = group.path("assignor").asText("cooperative-sticky");
        Map<String, Subscription> subs = subscriptions(group, assignorName);
        int repeat = doc.path("oracle_repeat").asInt(0);

        Clock first = Clock.start();
        Map<String, ConsumerPartitionAssignor.Assignment> result = run(assignorName, cluster, subs);
        first.stop();
        ObjectNode cg = JSON.createObjectNode();
        cg.put("group_id", group.path("group_id").asText(""));
        ObjectNode assignment = cg.putObject("assignment");
        ObjectNode revoked = cg.putObject("revoked");
        boolean cooperative = !assignorName.equals("range");
        for (String member : new java.util.TreeSet<>(subs.keySet())) {
            List<TopicPartition> parts = result.containsKey(member)
                ? new ArrayList<>(result.get(member).partitions()) : new ArrayList<>();
            assignment.set(member, partitionList(parts));
            if (cooperative) {
                List<TopicPartition> gone = new ArrayList<>(subs.get(member).ownedPartitions());
                gone.removeAll(new HashSet<>(parts));
                if (!gone.isEmpty())
                    revoked.set(member, partitionList(gone));
            }
        }
        ObjectNode outDoc = JSON.createObjectNode();
        outDoc.set("consumer_group", cg);
        first.report(outDoc);
        Clock.repeat(outDoc, repeat, () -> {
            Map<String, Subscription> fresh = subscriptions(group, assignorName);
            return () -> run(assignorName, cluster, fresh);
        });
        return outDoc;
    }

    private static Map<String, ConsumerPartitionAssignor.Assignment> run(
            String assignorName, Cluster cluster, Map<String, Subscription> subs) {
        ConsumerPartitionAssignor assignor;
        switch (assignorName) {
            case "range":
                assignor = new RangeAssignor();
                break;
            case "cooperative-sticky":
                assignor = new CooperativeStickyAssignor(); // fresh: the sticky assignors keep per-call state
                break;
            default:
                throw new IllegalArgumentException("assignor '" + assignorName + "' has no Kafka counterpart");
        }
        return assignor.assign(cluster, new GroupSubscription(subs)).groupAssignment();
    }

    private static ArrayNode partitionList(List<TopicPartition> parts) {
        parts.sort(Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
        ArrayNode arr = JSON.createArrayNode();
        for (TopicPartition tp : parts) {
            ArrayNode pair = arr.addArray();
            pair.add(tp.topic());
            pair.add(tp.partition());
        }
        return arr;
    }

    /** Brokers with their racks, partitions with their replicas (leader: the first replica). */
    static Cluster cluster(JsonNode c) {
        Map<Integer, Node> nodes = new TreeMap<>();
        for (JsonNode b : c.get("brokers")) {
            int id = b.get("id").asInt();
            JsonNode rack = b.get("rack");
            String r = rack == null || rack.isNull() ? null : rack.asText();
            nodes.put(id, new Node(id, "broker-" + id, 9092, r));
        }
        List<PartitionInfo> partitions = new ArrayList<>();
        Iterator<Map.Entry<String, JsonNode>> topics = c.get("topics").fields();
        while (topics.hasNext()) {
            Map.Entry<String, JsonNode> t = topics.next();
            int p = 0;
            for (JsonNode replicaList : t.getValue()) {
                Node[] replicas = new Node[replicaList.size()];
                for (int i = 0; i < replicas.length; i++) {
                    int id = replicaList.get(i).asInt();
                    Node n = nodes.get(id);
                    replicas[i] = n != null ? n : new Node(id, "broker-" + id, 9092);
                }
                Node leader = replicas.length > 0 ? replicas[0] : Node.noNode();
                partitions.add(new PartitionInfo(t.getKey(), p, leader, replicas, replicas));
                p++;
            }
        }
        return new Cluster("rackplan-oracle", new ArrayList<>(nodes.values()), partitions,
            Collections.emptySet(), Collections.emptySet());
    }

    /**
     * One subscription per member, as ConsumerCoordinator.metadata() builds it and
     * onLeaderElected reads it back: through the wire format, then group.instance.id.
     */
    static Map<String, Subscription> subscriptions(JsonNode group, String assignorName) {
        Map<String, Subscription> subs = new HashMap<>(); // the leader's map type
        String groupId = group.path("group_id").asText("");
        for (JsonNode m : group.get("members")) {
            String memberId = m.get("member_id").asText();
            List<String> topics = new ArrayList<>();
            for (JsonNode t : m.get("topics"))
                topics.add(t.asText());
            List<TopicPartition> owned = new ArrayList<>();
            for (JsonNode tp : m.path("owned"))
                owned.add(new TopicPartition(tp.get(0).asText(), tp.get(1).asInt()));
            JsonNode gen = m.get("generation");
            int generation = gen == null || gen.isNull() ? -1 : gen.asInt();
            JsonNode rack = m.get("rack");
            Optional<String> rackId = rack == null || rack.isNull() ? Optional.empty() : Optional.of(rack.asText());
            JsonNode inst = m.get("group_instance_id");
            Optional<String> instanceId = inst == null || inst.isNull() ? Optional.empty() : Optional.of(inst.asText());

            ByteBuffer userData = null;
            if (assignorName.equals("cooperative-sticky")) {
                // The member's assignor instance remembers the generation of its last assignment.
                CooperativeStickyAssignor own = new CooperativeStickyAssignor();
                own.onAssignment(null, new ConsumerGroupMetadata(groupId, generation, memberId, instanceId));
                userData = own.subscriptionUserData(new HashSet<>(topics));
            }
            Subscription sent = new Subscription(topics, userData, owned, generation, rackId);
            Subscription received = ConsumerProtocol.deserializeSubscription(ConsumerProtocol.serializeSubscription(sent));
            received.setGroupInstanceId(instanceId);
            subs.put(memberId, received);
        }
        return subs;
    }
}
