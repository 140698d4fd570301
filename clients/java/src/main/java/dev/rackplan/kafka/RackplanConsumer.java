package dev.rackplan.kafka;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;

/**
 * A {@link KafkaConsumer} that rebalances when rackplan publishes a new plan for its group: the one
 * line an application changes ({@code new RackplanConsumer<>(props)} instead of {@code new
 * KafkaConsumer<>(props)}), with {@code partition.assignment.strategy=dev.rackplan.kafka.RackplanAssignor}.
 *
 * <p>Kafka's consumer is single-threaded, so the plan reader (a background thread) only raises a
 * flag; the next {@link #poll} calls {@link #enforceRebalance(String)} on the application's thread.
 * A new plan therefore reaches the group within: the plan reader's poll ({@code rackplan.plan.poll.ms},
 * 500 ms) + the application's poll timeout + the rebalance itself (cooperative: two rounds). The
 * leader stamps every assignment with the newest plan generation it considered, so one rebalance
 * per plan suffices and a plan that does not fit does not make the group rebalance again.
 * {@link #close()} also stops the assignor's reader and unregisters the member.
 */
public class RackplanConsumer<K, V> extends KafkaConsumer<K, V> {
  private final String handle;

  public RackplanConsumer(Map<String, Object> configs) {
    this(tagged(configs), true);
  }

  public RackplanConsumer(Properties properties) {
    this(tagged(toMap(properties)), true);
  }

  private RackplanConsumer(Map<String, Object> tagged, boolean marker) {
    super(tagged);
    this.handle = (String) tagged.get(RackplanConfig.HANDLE);
  }

  private static Map<String, Object> toMap(Properties p) {
    Map<String, Object> m = new HashMap<>();
    for (String k : p.stringPropertyNames()) m.put(k, p.getProperty(k));
    return m;
  }

  private static Map<String, Object> tagged(Map<String, Object> configs) {
    Map<String, Object> m = new HashMap<>(configs);
    m.put(RackplanConfig.HANDLE, UUID.randomUUID().toString());
    return m;
  }

  /** The consumer's RackplanAssignor (null when the strategy does not list it). */
  public RackplanAssignor assignor() {
    return RackplanAssignor.BY_HANDLE.get(handle);
  }

  @Override
  public ConsumerRecords<K, V> poll(Duration timeout) {
    RackplanAssignor a = assignor();
    if (a != null) {
      long g = a.rebalanceNeeded();
      if (g > 0) {
        a.markHandled(g);
        enforceRebalance("rackplan plan generation " + g);
      }
    }
    return super.poll(timeout);
  }

  @Override
  public void close() {
    try {
      super.close();
    } finally {
      RackplanAssignor a = assignor();
      if (a != null) a.close();
    }
  }

  @Override
  public void close(Duration timeout) {
    try {
      super.close(timeout);
    } finally {
      RackplanAssignor a = assignor();
      if (a != null) a.close();
    }
  }
}
