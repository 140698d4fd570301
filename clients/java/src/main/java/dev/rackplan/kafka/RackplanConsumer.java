package dev.rackplan.kafka;

import java.time.Duration;
import java.util.Collection;
import java.util.HashSet;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
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
  /** KIP-848 groups (group.protocol=consumer): the registration, which no client-side assignor does there. */
  private final RackplanClient registration;

  public RackplanConsumer(Map<String, Object> configs) {
    this(tagged(configs), true);
  }

  public RackplanConsumer(Properties properties) {
    this(tagged(toMap(properties)), true);
  }

  private RackplanConsumer(Map<String, Object> tagged, boolean marker) {
    super(tagged);
    this.handle = (String) tagged.get(RackplanConfig.HANDLE);
    this.registration = "consumer".equalsIgnoreCase(String.valueOf(tagged.get(ConsumerConfig.GROUP_PROTOCOL_CONFIG)))
        ? registrar(tagged) : null;
  }

  private static RackplanClient registrar(Map<String, Object> configs) {
    RackplanConfig config = new RackplanConfig(configs);
    Object instance = configs.get(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG);
    String member = config.str(RackplanConfig.MEMBER_ID, instance == null ? null : instance.toString());
    Object group = configs.get(ConsumerConfig.GROUP_ID_CONFIG);
    if (member == null || group == null) return null; // the server-side assignor matches by group.instance.id
    Object rack = configs.get(ConsumerConfig.CLIENT_RACK_CONFIG);
    RackplanClient.Member m = new RackplanClient.Member(group.toString(), member,
        rack == null || rack.toString().isEmpty() ? null : rack.toString(), instance == null ? null : instance.toString());
    return new RackplanClient(config, new PlanStore(), m, member, null).start();
  }

  @Override
  public void subscribe(Collection<String> topics) {
    super.subscribe(topics);
    if (registration != null) registration.setTopics(new HashSet<>(topics));
  }

  @Override
  public void subscribe(Collection<String> topics, ConsumerRebalanceListener listener) {
    super.subscribe(topics, listener);
    if (registration != null) registration.setTopics(new HashSet<>(topics));
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
      if (registration != null) registration.close();
    }
  }

  @Override
  public void close(Duration timeout) {
    try {
      super.close(timeout);
    } finally {
      RackplanAssignor a = assignor();
      if (a != null) a.close();
      if (registration != null) registration.close();
    }
  }
}
