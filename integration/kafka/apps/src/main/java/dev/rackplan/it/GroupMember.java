package dev.rackplan.it;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Comparator;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * One member of a real consumer group, with Kafka's own assignor and a client.rack.
 *
 * <p>Arguments: {@code bootstrap group memberName rack|- assignor topic[,topic...] [protocol]}
 * where assignor is {@code range} or {@code cooperative-sticky} (classic protocol) and protocol is
 * {@code classic} (default) or {@code consumer} (KIP-848; the broker assigns, assignor ignored).
 * Each change of its assignment is printed as one line
 * {@code {"member":"a","event":"assigned"|"revoked"|"lost","partitions":[["t",0],...],"owned":[...],"at_ms":...}}
 * so the test reads what Kafka gave it. It stops when its stdin closes.
 */
public final class GroupMember {
  private GroupMember() {}

  static String json(List<TopicPartition> tps) {
    List<TopicPartition> sorted = new ArrayList<>(tps);
    sorted.sort(Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition));
    StringBuilder b = new StringBuilder("[");
    for (int i = 0; i < sorted.size(); i++) {
      if (i > 0) b.append(',');
      b.append("[\"").append(sorted.get(i).topic()).append("\",").append(sorted.get(i).partition()).append(']');
    }
    return b.append(']').toString();
  }

  public static void main(String[] args) throws Exception {
    String bootstrap = args[0], group = args[1], name = args[2], rack = args[3], assignor = args[4];
    List<String> topics = Arrays.asList(args[5].split(","));
    String protocol = args.length > 6 ? args[6] : "classic";

    Properties p = new Properties();
    p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
    p.put(ConsumerConfig.CLIENT_ID_CONFIG, name);
    p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, ByteArrayDeserializer.class.getName());
    p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, protocol);
    if (!"-".equals(rack)) p.put(ConsumerConfig.CLIENT_RACK_CONFIG, rack);
    if ("classic".equals(protocol)) {
      String cls = "range".equals(assignor)
          ? "org.apache.kafka.clients.consumer.RangeAssignor"
          : "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
      p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, cls);
      p.put(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG, "10000");
      p.put(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG, "1000");
    }

    AtomicBoolean stop = new AtomicBoolean(false);
    Thread stdin = new Thread(() -> {
      try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
        while (r.readLine() != null) { /* any line is ignored; EOF stops */ }
      } catch (Exception ignored) {
        // a closed pipe is a stop too
      }
      stop.set(true);
    });
    stdin.setDaemon(true);
    stdin.start();

    try (KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p)) {
      ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
        private void emit(String event, Collection<TopicPartition> parts) {
          System.out.println("{\"member\":\"" + name + "\",\"event\":\"" + event + "\",\"partitions\":"
              + json(new ArrayList<>(parts)) + ",\"owned\":" + json(new ArrayList<>(consumer.assignment()))
              + ",\"at_ms\":" + System.currentTimeMillis() + "}");
          System.out.flush();
        }

        @Override public void onPartitionsRevoked(Collection<TopicPartition> parts) { emit("revoked", parts); }
        @Override public void onPartitionsAssigned(Collection<TopicPartition> parts) { emit("assigned", parts); }
        @Override public void onPartitionsLost(Collection<TopicPartition> parts) { emit("lost", parts); }
      };
      consumer.subscribe(topics, listener);
      System.out.println("{\"member\":\"" + name + "\",\"event\":\"started\",\"partitions\":[],\"owned\":[],\"at_ms\":"
          + System.currentTimeMillis() + "}");
      System.out.flush();
      while (!stop.get()) {
        consumer.poll(Duration.ofMillis(200));
      }
    }
  }
}
