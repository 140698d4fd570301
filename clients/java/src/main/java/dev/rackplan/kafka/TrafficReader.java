package dev.rackplan.kafka;

import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.header.Header;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Reads the agent's traffic topic ({@code rackplan.traffic.topic}) from the beginning into a {@link
 * TrafficStore} on a daemon thread, as {@link RackplanClient} reads plans: an assign()ed reader, no
 * group, partitions looked up again every 5 s, every second while the topic is missing (the agent
 * creates it, usually after the broker starts). A
 * broker outage is retried with a pause; meanwhile the store keeps what it had, and records age out
 * by their own timestamps.
 */
final class TrafficReader implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(TrafficReader.class);

  private final RackplanConfig config;
  private final TrafficStore store;
  private final Thread thread;
  private volatile boolean running = true;
  volatile long records;

  TrafficReader(RackplanConfig config, TrafficStore store, String clientId) {
    this.config = config;
    this.store = store;
    this.thread = new Thread(() -> run(clientId), "rackplan-" + clientId);
    thread.setDaemon(true);
  }

  TrafficReader start() {
    thread.start();
    return this;
  }

  private void run(String clientId) {
    KafkaConsumer<String, byte[]> reader = null;
    Set<TopicPartition> assigned = new HashSet<>();
    long nextTopicCheck = 0;
    while (running) {
      try {
        if (reader == null) reader = new KafkaConsumer<>(config.readerConfig(clientId));
        long now = System.currentTimeMillis();
        if (now >= nextTopicCheck) {
          nextTopicCheck = now + (assigned.isEmpty() ? 1000 : 5000); // a topic not there yet: looked for each second
          Set<TopicPartition> want = new HashSet<>();
          Map<String, List<PartitionInfo>> listed = reader.listTopics(Duration.ofSeconds(5));
          for (PartitionInfo p : listed.getOrDefault(config.trafficTopic, List.of()))
            want.add(new TopicPartition(p.topic(), p.partition()));
          if (!want.equals(assigned)) {
            Set<TopicPartition> added = new HashSet<>(want);
            added.removeAll(assigned);
            reader.assign(want);
            reader.seekToBeginning(added);
            assigned = want;
          }
        }
        if (assigned.isEmpty()) {
          Thread.sleep(1000);
          continue;
        }
        for (ConsumerRecord<String, byte[]> r : reader.poll(Duration.ofMillis(config.planPollMs))) {
          Header mac = r.headers().lastHeader(RecordMac.HEADER);
          store.apply(r.topic(), r.key(), r.value(), mac == null ? null : mac.value(), config.registrationSecret, r.timestamp());
          records++;
        }
      } catch (InterruptedException | org.apache.kafka.common.errors.InterruptException e) {
        break;
      } catch (RuntimeException e) {
        LOG.warn("rackplan traffic reader: {} (retrying)", e.toString());
        try {
          Thread.sleep(1000);
        } catch (InterruptedException ie) {
          break;
        }
      }
    }
    if (reader != null) reader.close(Duration.ofSeconds(2));
  }

  @Override
  public void close() {
    running = false;
    try {
      thread.join(5_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
