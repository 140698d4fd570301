package dev.rackplan.kafka;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.TopicPartition;

/**
 * A {@link KafkaConsumer} that follows rackplan's plans: the one line an application changes
 * ({@code new RackplanConsumer<>(props)} instead of {@code new KafkaConsumer<>(props)}).
 *
 * <p><b>Classic groups</b> ({@code partition.assignment.strategy=dev.rackplan.kafka.RackplanAssignor}):
 * the assignor's plan reader (a background thread) only raises a flag, since Kafka's consumer is
 * single-threaded; the next {@link #poll} calls {@link #enforceRebalance(String)} on the
 * application's thread. The leader stamps every assignment with the newest plan generation it
 * considered, so one rebalance per plan suffices and a plan that does not fit does not make the
 * group rebalance again.
 *
 * <p><b>KIP-848 groups</b> ({@code group.protocol=consumer}, {@code group.remote.assignor=rackplan}):
 * no client-side assignor runs, so this class registers the member (its {@code group.instance.id} or
 * {@code rackplan.member.id}, rack and topics) and reads the plans itself. The coordinator runs the
 * assignor only when the group's epoch changes, and Kafka 4.3 has no request to ask for that; a new
 * plan generation of the group therefore makes the next {@link #poll} toggle the subscription
 * between the application's topics and the same topics plus the plan topic. The change bumps the
 * epoch; {@code RackplanServerAssignor} never assigns the plan topic, so the application never sees
 * a record of it. A regex subscription ({@code subscribe(Pattern)}, or KIP-848's broker-side {@code
 * subscribe(SubscriptionPattern)}) toggles between the regex and {@code (?:regex)|<plan topic>}
 * instead: a new regex, matching one topic more; the registration names the topics the regex
 * matches (re-read every few seconds). Once the bumps for a plan are over the member is back on the
 * application's own subscription (one more bump): the plan topic is in it only while it bumps.
 *
 * <p>Bound, both protocols: a plan reaches the group within the plan reader's poll ({@code
 * rackplan.plan.poll.ms}, 500 ms) + the application's poll interval + the rebalance (classic
 * cooperative: two rounds). {@link #close()} also stops the plan reader and unregisters the member.
 */
public class RackplanConsumer<K, V> extends KafkaConsumer<K, V> {
  private final String handle;
  /** KIP-848 groups: the registration and plan reader, which no client-side assignor does there. */
  private final RackplanClient registration;
  private final String groupId;
  private final String planTopic;
  private final long planPollMs;
  private final AtomicLong pendingGeneration = new AtomicLong();
  private long handledGeneration;
  /** KIP-848 groups: the plans its registration's reader reads. */
  final PlanStore plans = new PlanStore();
  private String memberId;
  private int nudges;
  private long nextCheckMs;
  private List<String> topics;
  private Pattern pattern;
  private SubscriptionPattern re2j;
  private ConsumerRebalanceListener listener;
  private boolean toggled;

  public RackplanConsumer(Map<String, Object> configs) {
    this(checked(tagged(configs)));
  }

  public RackplanConsumer(Properties properties) {
    this(checked(tagged(toMap(properties))));
  }

  /** The application's config, tagged, and its rackplan settings, checked before Kafka's consumer is built. */
  private record Checked(Map<String, Object> tagged, RackplanConfig config) {}

  private RackplanConsumer(Checked checked) {
    super(checked.tagged());
    Map<String, Object> tagged = checked.tagged();
    RackplanConfig config = checked.config();
    this.handle = (String) tagged.get(RackplanConfig.HANDLE);
    Object group = tagged.get(ConsumerConfig.GROUP_ID_CONFIG);
    this.groupId = group == null ? null : group.toString();
    this.planTopic = config.planTopic;
    this.planPollMs = config.planPollMs;
    boolean kip848 = "consumer".equalsIgnoreCase(String.valueOf(tagged.get(ConsumerConfig.GROUP_PROTOCOL_CONFIG)));
    this.registration = kip848 ? registrar(config, tagged) : null;
  }

  /**
   * The rackplan settings of {@code tagged}, refused (a {@code ConfigException} naming the key) before
   * anything is built: a bad value neither leaves Kafka's consumer behind nor reaches the application as
   * the {@code KafkaException} Kafka wraps its assignor's refusal in. A classic member whose strategy lists
   * {@link RackplanAssignor} gets the assignor's own checks too.
   */
  private static Checked checked(Map<String, Object> tagged) {
    boolean classic = !"consumer".equalsIgnoreCase(String.valueOf(tagged.get(ConsumerConfig.GROUP_PROTOCOL_CONFIG)));
    return new Checked(tagged,
        classic && RackplanAssignor.listed(tagged.get(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG))
            ? RackplanAssignor.checked(tagged) : new RackplanConfig(tagged));
  }

  private RackplanClient registrar(RackplanConfig config, Map<String, Object> configs) {
    Object instance = configs.get(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG);
    String member = config.str(RackplanConfig.MEMBER_ID, instance == null ? null : instance.toString());
    if (member == null || groupId == null) return null; // the server-side assignor matches by group.instance.id
    memberId = member;
    Object rack = configs.get(ConsumerConfig.CLIENT_RACK_CONFIG);
    RackplanClient.Member m = new RackplanClient.Member(groupId, member,
        rack == null || rack.toString().isEmpty() ? null : rack.toString(), instance == null ? null : instance.toString());
    return new RackplanClient(config, plans, m, member, this::onPlan).start();
  }

  void onPlan(ConsumerPlan plan) {
    if (plan.groupId.equals(groupId)) pendingGeneration.accumulateAndGet(plan.generation, Math::max);
  }

  private static Map<String, Object> toMap(Properties p) {
    Map<String, Object> m = new HashMap<>();
    for (String k : p.stringPropertyNames()) m.put(k, p.getProperty(k));
    return m;
  }

  /**
   * The application's config, tagged with this consumer's handle; {@code metadata.max.age.ms} 5 s
   * unless set: the leader checks a plan's cluster fingerprint against its own metadata, which after
   * a reassignment is otherwise up to Kafka's 5 minutes old. {@code client.id}, unless set, is the
   * member's rackplan id ({@code rackplan.member.id}, else {@code group.instance.id}): DescribeGroups
   * shows a classic member's client.id (its member id is {@code <client.id>-<uuid>}), which is how the
   * agent matches a live member to its registration and judges it with its rack.
   */
  static Map<String, Object> tagged(Map<String, Object> configs) {
    Map<String, Object> m = new HashMap<>(configs);
    m.put(RackplanConfig.HANDLE, UUID.randomUUID().toString());
    m.putIfAbsent(ConsumerConfig.METADATA_MAX_AGE_CONFIG, METADATA_MAX_AGE_MS);
    Object id = m.get(RackplanConfig.MEMBER_ID);
    if (id == null || id.toString().isBlank()) id = m.get(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG);
    Object client = m.get(ConsumerConfig.CLIENT_ID_CONFIG);
    if (id != null && !id.toString().isBlank() && (client == null || client.toString().isEmpty()))
      m.put(ConsumerConfig.CLIENT_ID_CONFIG, id.toString());
    return m;
  }

  static final String METADATA_MAX_AGE_MS = "5000";

  /** The consumer's RackplanAssignor (null when the strategy does not list it, e.g. KIP-848 groups). */
  public RackplanAssignor assignor() {
    return RackplanAssignor.BY_HANDLE.get(handle);
  }

  private static final ConsumerRebalanceListener NO_LISTENER = new ConsumerRebalanceListener() {
    @Override public void onPartitionsRevoked(Collection<TopicPartition> partitions) {}

    @Override public void onPartitionsAssigned(Collection<TopicPartition> partitions) {}
  };

  @Override
  public void subscribe(Collection<String> topics) {
    subscribe(topics, NO_LISTENER);
  }

  @Override
  public void subscribe(Collection<String> topics, ConsumerRebalanceListener listener) {
    super.subscribe(topics, listener);
    subscribed(new ArrayList<>(topics), null, null, listener);
    if (registration != null) {
      registration.setTopicPattern(null);
      registration.setTopics(new HashSet<>(topics));
    }
  }

  /** A Java regex: the consumer matches it against the topics it knows (KIP-848 too). */
  @Override
  public void subscribe(Pattern pattern) {
    subscribe(pattern, NO_LISTENER);
  }

  @Override
  public void subscribe(Pattern pattern, ConsumerRebalanceListener listener) {
    super.subscribe(pattern, listener);
    subscribed(null, pattern, null, listener);
    if (registration != null) registration.setTopicPattern(pattern);
  }

  /**
   * A KIP-848 broker-side regex (RE2J). The registration names the topics that the same expression,
   * read as a Java regex, matches (RE2 syntax reads the same in Java's, but for a few rare constructs;
   * one Java cannot read leaves the member unregistered).
   */
  @Override
  public void subscribe(SubscriptionPattern pattern) {
    subscribe(pattern, NO_LISTENER);
  }

  @Override
  public void subscribe(SubscriptionPattern pattern, ConsumerRebalanceListener listener) {
    super.subscribe(pattern, listener);
    subscribed(null, null, pattern, listener);
    if (registration != null) registration.setTopicPattern(javaRegex(pattern.pattern()));
  }

  /** An RE2 regex read as a Java one; null (the member is not registered) when Java cannot read it. */
  static Pattern javaRegex(String re2) {
    try {
      return Pattern.compile(re2);
    } catch (java.util.regex.PatternSyntaxException e) {
      return null;
    }
  }

  private void subscribed(List<String> topics, Pattern pattern, SubscriptionPattern re2j, ConsumerRebalanceListener listener) {
    this.topics = topics;
    this.pattern = pattern;
    this.re2j = re2j;
    this.listener = listener;
    this.toggled = false;
  }

  /**
   * ``regex`` or the plan topic: what a regex subscription becomes for a moment to bump the group's
   * epoch (a new regex, and one more matching topic). It matches nothing else that ``regex`` does not.
   * Topic names are letters, digits, '.', '_' and '-'; only '.' needs escaping, the same way in
   * Java's and RE2's syntax.
   */
  static String withPlanTopic(String regex, String planTopic) {
    return "(?:" + regex + ")|" + planTopic.replace(".", "\\.");
  }

  @Override
  public ConsumerRecords<K, V> poll(Duration timeout) {
    RackplanAssignor a = assignor();
    if (a != null) {
      long g = a.rebalanceNeeded();
      if (g > 0) {
        a.markHandled(g);
        enforceRebalance("rackplan plan generation " + g);
      } else if (a.staleRetryDue(System.currentTimeMillis())) {
        enforceRebalance("rackplan: the plan again, with fresher metadata");
      }
    } else if (registration != null && (topics != null || pattern != null || re2j != null)) {
      long now = System.currentTimeMillis();
      if (pendingGeneration.get() > handledGeneration) {
        // Give the brokers' plan reader (same poll interval) time to read it too, then bump.
        handledGeneration = pendingGeneration.get();
        nudges = 0;
        nextCheckMs = now + 2 * planPollMs;
      } else if (handledGeneration > 0 && now >= nextCheckMs
          && (nudges == 0 || (nudges < MAX_NUDGES && !holdsItsShare()))) {
        nudge(now); // later bumps: the brokers may have read the plan after the first one (bounded)
      } else if (toggled && now >= nextCheckMs) {
        // The bumps are over (it holds its share, or the last one is spent): back to the application's own
        // subscription, itself one more epoch, in which a plan that fits still does.
        toggle(false);
      }
    }
    return super.poll(timeout);
  }

  /**
   * Bumps per plan generation: the first one 2 x plan.poll.ms after the plan arrived, then after 2, 4,
   * 8, 16 and 32 s again while the member does not hold what the plan gives it (the brokers' reader may
   * be behind; a plan that does not fit bumps the group at most this often, then never again).
   */
  static final int MAX_NUDGES = 6;

  private void nudge(long now) {
    nudges++;
    nextCheckMs = now + 2000L * (1L << (nudges - 1));
    toggle(!toggled);
  }

  /** The application's subscription, with the plan topic ({@code on}) or without it. */
  private void toggle(boolean on) {
    toggled = on;
    if (pattern != null) {
      super.subscribe(toggled ? Pattern.compile(withPlanTopic(pattern.pattern(), planTopic), pattern.flags()) : pattern, listener);
    } else if (re2j != null) {
      super.subscribe(toggled ? new SubscriptionPattern(withPlanTopic(re2j.pattern(), planTopic)) : re2j, listener);
    } else {
      List<String> next = new ArrayList<>(topics);
      if (toggled && !next.contains(planTopic)) next.add(planTopic);
      super.subscribe(next, listener);
    }
  }

  /** The member holds what the newest plan gives it (or the plan does not name it: nothing to wait for). */
  private boolean holdsItsShare() {
    ConsumerPlan plan = plans.latest(ConsumerPlan.key(groupId));
    if (plan == null || plan.generation != handledGeneration || !plan.assignment.containsKey(memberId)) return true;
    return new HashSet<>(plan.assignment.get(memberId)).equals(assignment());
  }

  @Override
  public void close() {
    try {
      super.close();
    } finally {
      release();
    }
  }

  @Override
  public void close(Duration timeout) {
    try {
      super.close(timeout);
    } finally {
      release();
    }
  }

  private void release() {
    RackplanAssignor a = assignor();
    if (a != null) a.close();
    if (registration != null) registration.close();
  }
}
