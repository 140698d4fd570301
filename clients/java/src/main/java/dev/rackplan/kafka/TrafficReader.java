package dev.rackplan.kafka;

import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.header.Header;

/**
 * Reads the agent's traffic topic ({@code rackplan.traffic.topic}) from the beginning into a {@link
 * TrafficStore} on a daemon thread, in the loop {@link RackplanClient} reads plans with ({@link
 * AssignedReaderLoop}: an assign()ed reader, no group): partitions looked up again every 5 s, every
 * second while the topic is missing (the agent creates it, usually after the broker starts). A
 * broker outage is retried with a pause; meanwhile the store keeps what it had, and records age out
 * by their own timestamps.
 */
public final class TrafficReader implements AutoCloseable {
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

  /** A started reader of {@code config}'s traffic topic into {@code store} (the Streams assignor's). */
  public static TrafficReader started(RackplanConfig config, TrafficStore store, String clientId) {
    return new TrafficReader(config, store, clientId).start();
  }

  private void run(String clientId) {
    AssignedReaderLoop.run("traffic reader", () -> new KafkaConsumer<>(config.readerConfig(clientId)),
        config.planPollMs, () -> running, new AssignedReaderLoop.Reader() {
          @Override public boolean reads(String topic) {
            return topic.equals(config.trafficTopic);
          }

          @Override public long recheckMs(boolean noneAssigned) {
            return noneAssigned ? 1000 : 5000; // a topic not there yet: looked for each second
          }

          @Override public void apply(ConsumerRecord<String, byte[]> r) {
            Header mac = r.headers().lastHeader(RecordMac.HEADER);
            store.apply(r.topic(), r.key(), r.value(), mac == null ? null : mac.value(), config.registrationSecret,
                r.timestamp());
            records++;
          }
        });
  }

  /** Asks the thread to end without waiting for it (several readers closed together end together). */
  void stop() {
    running = false;
  }

  @Override
  public void close() {
    stop();
    try {
      thread.join(5_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
