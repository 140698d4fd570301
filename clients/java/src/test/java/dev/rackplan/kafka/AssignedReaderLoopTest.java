package dev.rackplan.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.MockConsumer;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.junit.jupiter.api.Test;

/**
 * The reader loop the plan and traffic readers share, on Kafka's MockConsumer, on the test's thread:
 * the loop stops when the test has seen what it waits for (or after a bound of rounds, then fails).
 */
class AssignedReaderLoopTest {
  static final Node NODE = new Node(1, "localhost", 9092);

  static List<PartitionInfo> partitions(String topic, int n) {
    List<PartitionInfo> out = new ArrayList<>();
    for (int p = 0; p < n; p++) out.add(new PartitionInfo(topic, p, NODE, new Node[] {NODE}, new Node[] {NODE}));
    return out;
  }

  /** Reads ``plans``, lists the topics every round, records what it was handed. */
  static class Recorder implements AssignedReaderLoop.Reader {
    final List<String> applied = new ArrayList<>();
    int rounds;
    Runnable eachRound = () -> {};

    @Override public boolean reads(String topic) {
      return topic.equals("plans");
    }

    @Override public long recheckMs(boolean noneAssigned) {
      return 0; // every round: the test needs no clock
    }

    @Override public void apply(ConsumerRecord<String, byte[]> r) {
      applied.add(r.topic() + "-" + r.partition() + "@" + r.offset() + ":" + r.key());
    }

    @Override public void afterPoll() {
      rounds++;
      eachRound.run();
    }
  }

  static void addLater(MockConsumer<String, byte[]> c, String topic, int partition, long offset, String key) {
    c.schedulePollTask(() -> c.addRecord(new ConsumerRecord<>(topic, partition, offset, key, new byte[0])));
  }

  @Test
  void aTopicThatAppearsLaterIsReadFromItsBeginningAndNoOtherTopicIs() {
    MockConsumer<String, byte[]> c = new MockConsumer<>("earliest");
    Recorder r = new Recorder();
    r.eachRound = () -> {
      if (r.rounds == 2) { // the agent creates its topics after the client starts
        c.updatePartitions("plans", partitions("plans", 2));
        c.updatePartitions("orders", partitions("orders", 3));
        c.updateBeginningOffsets(Map.of(new TopicPartition("plans", 0), 0L, new TopicPartition("plans", 1), 0L));
        addLater(c, "plans", 0, 0, "a");
        addLater(c, "plans", 1, 0, "b");
      }
    };
    AtomicInteger made = new AtomicInteger();
    AssignedReaderLoop.run("test reader", () -> {
      made.incrementAndGet();
      return c;
    }, 1, () -> r.applied.size() < 2 && r.rounds < 50, r);
    assertEquals(List.of("plans-0@0:a", "plans-1@0:b"), r.applied, "rounds " + r.rounds);
    assertEquals(Set.of(new TopicPartition("plans", 0), new TopicPartition("plans", 1)), c.assignment());
    assertEquals(1, made.get());
    assertTrue(c.closed(), "the loop closes its reader");
  }

  @Test
  void runtimeErrorsAreRetriedWithTheSameReaderAndAReaderThatCouldNotBeMadeIsMadeAgain() {
    MockConsumer<String, byte[]> c = new MockConsumer<>("earliest");
    c.updatePartitions("plans", partitions("plans", 1));
    c.updateBeginningOffsets(Map.of(new TopicPartition("plans", 0), 0L));
    Recorder r = new Recorder();
    c.setPollException(new KafkaException("broker down")); // the first poll fails
    r.eachRound = () -> {
      if (r.rounds == 1) addLater(c, "plans", 0, 0, "after-the-outage");
      if (r.rounds == 2) throw new IllegalStateException("registration producer failed"); // after a poll
      if (r.rounds == 3) addLater(c, "plans", 0, 1, "after-the-producer-error");
    };
    AtomicInteger made = new AtomicInteger();
    AssignedReaderLoop.run("test reader", () -> {
      if (made.incrementAndGet() == 1) throw new KafkaException("bootstrap not resolvable yet");
      return c;
    }, 1, () -> r.applied.size() < 2 && r.rounds < 50, r);
    assertEquals(List.of("plans-0@0:after-the-outage", "plans-0@1:after-the-producer-error"), r.applied);
    assertEquals(2, made.get(), "made again only because making it failed");
    assertTrue(c.closed());
  }

  @Test
  void anInterruptEndsTheLoop() {
    MockConsumer<String, byte[]> c = new MockConsumer<>("earliest");
    Recorder r = new Recorder();
    r.eachRound = () -> Thread.currentThread().interrupt(); // nothing assigned: the next pause is interrupted
    AssignedReaderLoop.run("test reader", () -> c, 1, () -> r.rounds < 50, r);
    assertEquals(1, r.rounds, "ended at the first pause after the interrupt");
    assertTrue(c.closed());
  }
}
