package dev.rackplan.kafka;

import java.time.Duration;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The loop every rackplan topic reader runs on its daemon thread (the plan reader in {@link
 * RackplanClient}, the traffic reader in {@link TrafficReader}): an assign()ed reader, no group, that
 * lists the topics on a schedule, reads the partitions of the topics it wants from the beginning
 * (partitions that appear later too), and hands every record over. The agent creates its topics,
 * usually after the client starts, so a missing topic is looked for again; a broker outage (any
 * runtime error) is retried after a pause with the same reader, never ending the thread, and what
 * the reader's store holds stays meanwhile. One loop, so a fix to it reaches every reader.
 */
final class AssignedReaderLoop {
  private static final Logger LOG = LoggerFactory.getLogger(AssignedReaderLoop.class);

  /** What one reader does with the loop. */
  interface Reader {
    /** Whether the partitions of ``topic`` are to be read. */
    boolean reads(String topic);

    /** Milliseconds until the topics are listed again, given whether no partition is assigned yet. */
    long recheckMs(boolean noneAssigned);

    /** Whether to list the topics before the next check is due (a regex subscription's own schedule). */
    default boolean listEarly(long nowMs) {
      return false;
    }

    /** Every listing's topic names, before the partitions to read are chosen from it. */
    default void listed(Set<String> topics, long nowMs) {}

    /** One record read. */
    void apply(ConsumerRecord<String, byte[]> record);

    /** After each poll, or each pause while nothing is assigned (on the loop's thread, inside its retries). */
    default void afterPoll() {}
  }

  private AssignedReaderLoop() {}

  /**
   * Runs until ``running`` is false or the thread is interrupted; closes the reader it made with
   * ``newReader`` (made again only if making it failed). ``name`` is what a retried error is logged as.
   */
  static void run(
      String name,
      Supplier<Consumer<String, byte[]>> newReader,
      long pollMs,
      BooleanSupplier running,
      Reader reader) {
    Consumer<String, byte[]> consumer = null;
    Set<TopicPartition> assigned = new HashSet<>();
    long nextTopicCheck = 0;
    while (running.getAsBoolean()) {
      try {
        if (consumer == null) consumer = newReader.get();
        long now = System.currentTimeMillis();
        if (now >= nextTopicCheck || reader.listEarly(now)) {
          nextTopicCheck = now + reader.recheckMs(assigned.isEmpty());
          Map<String, List<PartitionInfo>> listed = consumer.listTopics(Duration.ofSeconds(5));
          reader.listed(listed.keySet(), now);
          Set<TopicPartition> want = new HashSet<>();
          for (Map.Entry<String, List<PartitionInfo>> e : listed.entrySet())
            if (reader.reads(e.getKey()))
              for (PartitionInfo p : e.getValue()) want.add(new TopicPartition(p.topic(), p.partition()));
          if (!want.equals(assigned)) {
            Set<TopicPartition> added = new HashSet<>(want);
            added.removeAll(assigned);
            consumer.assign(want);
            consumer.seekToBeginning(added);
            assigned = want;
          }
        }
        if (assigned.isEmpty()) {
          Thread.sleep(Math.min(pollMs, 1000));
        } else {
          for (ConsumerRecord<String, byte[]> r : consumer.poll(Duration.ofMillis(pollMs))) reader.apply(r);
        }
        reader.afterPoll();
      } catch (InterruptedException | org.apache.kafka.common.errors.InterruptException e) {
        break;
      } catch (RuntimeException e) {
        // A broker outage: retry with a pause, never die (what the store holds stays meanwhile).
        LOG.warn("rackplan {}: {} (retrying)", name, e.toString());
        try {
          Thread.sleep(1000);
        } catch (InterruptedException ie) {
          break;
        }
      }
    }
    if (consumer != null) consumer.close(Duration.ofSeconds(2));
  }
}
