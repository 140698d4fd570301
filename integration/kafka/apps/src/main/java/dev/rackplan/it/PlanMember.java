package dev.rackplan.it;

import dev.rackplan.kafka.RackplanAssignor;
import dev.rackplan.kafka.RackplanConsumer;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * A consumer that follows rackplan's plans (clients/java): {@link RackplanConsumer} with {@code
 * RackplanAssignor} (classic protocol) or {@code group.remote.assignor=rackplan} (KIP-848).
 *
 * <p>Arguments: {@code bootstrap group memberId rack topic[,topic] protocol planTopic
 * registrationsTopic} with protocol {@code classic} (cooperative), {@code eager} (classic, eager) or
 * {@code consumer} (KIP-848); topics {@code regex:<java regex>} or {@code re2j:<regex>} (KIP-848's
 * broker-side SubscriptionPattern) subscribe by regex instead. Prints, one JSON line each, every assignment callback ({@code
 * assigned|revoked|lost} with {@code at_ms}) and every consumed batch's values ({@code consumed}); it
 * commits synchronously before a partition is given up and after every batch (at-least-once).
 * Stops (leaving its group) when stdin closes.
 */
public final class PlanMember {
  private PlanMember() {}

  static volatile RackplanConsumer<String, String> current;

  /** What this member's RackplanAssignor did when it led (classic groups). */
  static String stats() {
    RackplanConsumer<String, String> c = current;
    RackplanAssignor a = c == null ? null : c.assignor();
    if (a == null) return "";
    return ",\"plan_assignments\":" + a.stats().getPlanAssignments() + ",\"fallbacks\":"
        + a.stats().getFallbackAssignments() + ",\"reason\":\""
        + a.stats().getLastFallbackReason().replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
  }

  /** The kafka-clients on the classpath (its own version resource: AppInfoParser moved in 4.4). */
  static final String KAFKA_VERSION = kafkaVersion();

  static String kafkaVersion() {
    java.util.Properties p = new java.util.Properties();
    try (java.io.InputStream in = PlanMember.class.getClassLoader().getResourceAsStream("kafka/kafka-version.properties")) {
      if (in != null) p.load(in);
    } catch (java.io.IOException e) {
      return "unknown";
    }
    return p.getProperty("version", "unknown");
  }

  static synchronized void emit(String name, String event, Collection<TopicPartition> parts, String extra) {
    System.out.println("{\"member\":\"" + name + "\",\"event\":\"" + event + "\",\"partitions\":"
        + GroupMember.json(new ArrayList<>(parts)) + extra + stats() + ",\"kafka_version\":\""
        + KAFKA_VERSION + "\",\"at_ms\":" + System.currentTimeMillis() + "}");
    System.out.flush();
  }

  /**
   * A synchronous commit; one refused because a rebalance is under way (cooperative groups rebalance
   * while members keep polling) is retried after the next poll: the records are redelivered at worst.
   */
  static void commit(RackplanConsumer<String, String> consumer, String name) {
    try {
      consumer.commitSync();
    } catch (RebalanceInProgressException | CommitFailedException e) {
      emit(name, "commit_refused", List.of(), ",\"error\":\"" + e.getClass().getSimpleName() + "\"");
    }
  }

  public static void main(String[] args) throws Exception {
    String bootstrap = args[0], group = args[1], name = args[2], rack = args[3];
    List<String> topics = Arrays.asList(args[4].split(","));
    String protocol = args[5], planTopic = args[6], registrations = args[7];

    Map<String, Object> p = new HashMap<>();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    p.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    p.put(ConsumerConfig.CLIENT_RACK_CONFIG, rack);
    p.put("rackplan.plan.topic", planTopic);
    p.put("rackplan.registrations.topic", registrations);
    p.put("rackplan.registration.ttl.ms", "60000");
    p.put("rackplan.plan.assignor", "rack-optimal");
    if ("consumer".equals(protocol)) {
      // The broker's RackplanServerAssignor finds the plan by the members' group.instance.id.
      p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
      p.put(ConsumerConfig.GROUP_REMOTE_ASSIGNOR_CONFIG, "rackplan");
      p.put(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, name);
    } else {
      p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "classic");
      p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, "dev.rackplan.kafka.RackplanAssignor");
      p.put("rackplan.member.id", name);
      p.put("rackplan.rebalance.protocol", "eager".equals(protocol) ? "eager" : "cooperative");
      p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "6000");
      p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "500");
    }

    AtomicBoolean stop = new AtomicBoolean(false);
    Thread stdin = new Thread(() -> {
      try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
        while (r.readLine() != null) { /* EOF stops */ }
      } catch (Exception ignored) {
        // a closed pipe is a stop too
      }
      stop.set(true);
    });
    stdin.setDaemon(true);
    stdin.start();

    try (RackplanConsumer<String, String> consumer = new RackplanConsumer<>(p)) {
      current = consumer;
      ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
        @Override public void onPartitionsRevoked(Collection<TopicPartition> parts) {
          if (!parts.isEmpty()) commit(consumer, name);  // hand over with offsets committed
          emit(name, "revoked", parts, "");
        }
        @Override public void onPartitionsAssigned(Collection<TopicPartition> parts) { emit(name, "assigned", parts, ""); }
        @Override public void onPartitionsLost(Collection<TopicPartition> parts) { emit(name, "lost", parts, ""); }
      };
      if (args[4].startsWith("regex:")) consumer.subscribe(java.util.regex.Pattern.compile(args[4].substring(6)), listener);
      else if (args[4].startsWith("re2j:"))
        consumer.subscribe(new org.apache.kafka.clients.consumer.SubscriptionPattern(args[4].substring(5)), listener);
      else consumer.subscribe(topics, listener);
      emit(name, "started", List.of(), "");
      while (!stop.get()) {
        ConsumerRecords<String, String> records = consumer.poll(Duration.ofMillis(200));
        if (records.isEmpty()) continue;
        StringBuilder vals = new StringBuilder(",\"values\":[");
        boolean first = true;
        for (ConsumerRecord<String, String> r : records) {
          if (!first) vals.append(',');
          first = false;
          vals.append('"').append(r.value()).append('"');
        }
        vals.append(']');
        emit(name, "consumed", records.partitions(), vals.toString());
        commit(consumer, name);
      }
    }
  }
}
