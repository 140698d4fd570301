package dev.rackplan.kafka;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Consumer;
import java.util.regex.Pattern;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * rackplan's I/O for one consumer (or one broker): a daemon thread that reads the plan topic from
 * the beginning into a {@link PlanStore} (no consumer group: an assign()ed reader) and, when a
 * member is set, keeps its registration record fresh on the registrations topic (every third of
 * the TTL, and at once when its topics change). {@link #close} publishes a tombstone so the agent
 * re-plans at once instead of after the TTL.
 */
public final class RackplanClient implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(RackplanClient.class);

  /** Who registers: a consumer group member. */
  public static final class Member {
    final String groupId;
    final String memberId;
    final String rack;
    final String groupInstanceId;

    public Member(String groupId, String memberId, String rack, String groupInstanceId) {
      this.groupId = groupId;
      this.memberId = memberId;
      this.rack = rack;
      this.groupInstanceId = groupInstanceId;
    }
  }

  private final RackplanConfig config;
  private final PlanStore store;
  private final Member member;
  private final Consumer<ConsumerPlan> onPlan;
  private final Thread thread;
  private final String clientId;
  private volatile boolean running = true;
  private volatile Set<String> topics;
  /** A regex member: its topics are the known topics the regex matches (re-read with the plan topics). */
  private volatile Pattern topicPattern;
  private volatile boolean topicsChanged;
  private volatile long lastRegistrationMs;
  private KafkaProducer<String, byte[]> producer; // on the client's thread only

  public RackplanClient(
      RackplanConfig config, PlanStore store, Member member, String clientId, Consumer<ConsumerPlan> onPlan) {
    this.config = config;
    this.store = store;
    this.member = member;
    this.onPlan = onPlan;
    this.clientId = clientId;
    this.thread = new Thread(this::run, "rackplan-" + clientId);
    this.thread.setDaemon(true);
  }

  public RackplanClient start() {
    thread.start();
    return this;
  }

  /** The member's subscribed topics (known once it joins); a change re-registers at once. */
  public void setTopics(Set<String> subscribed) {
    Set<String> s = new TreeSet<>(subscribed);
    if (!s.equals(topics)) {
      topics = s;
      topicsChanged = true;
    }
  }

  /** A regex subscription: the member's topics become the topics it matches (null: a topic list). */
  public void setTopicPattern(Pattern pattern) {
    topicPattern = pattern;
    nextMatch = 0;
  }

  private volatile long nextMatch;

  /**
   * The topics ``regex`` matches, as a consumer matches its subscription: whole names, internal topics
   * ("__"-prefixed) and plan topics left out.
   */
  static Set<String> matching(Pattern regex, Set<String> names, Pattern planTopics, String planTopic) {
    Set<String> out = new TreeSet<>();
    for (String n : names)
      if (!n.startsWith("__") && !(planTopics == null ? n.equals(planTopic) : planTopics.matcher(n).matches())
          && regex.matcher(n).matches())
        out.add(n);
    return out;
  }

  static String escape(String id) {
    return id.replace("%", "%25").replace("/", "%2F");
  }

  static String registrationKey(Member m) {
    return "consumer/" + escape(m.groupId) + "/" + escape(m.memberId);
  }

  /** The registration record value (docs/registration-schema.json, consumer member). */
  static byte[] registrationValue(Member m, Set<String> topics, long nowMs, RackplanConfig config) {
    Map<String, Object> v = new LinkedHashMap<>();
    v.put("schema", 1L);
    v.put("group_id", m.groupId);
    v.put("member_id", m.memberId);
    v.put("rack", m.rack);
    v.put("topics", new ArrayList<>(new TreeSet<>(topics)));
    v.put("group_instance_id", m.groupInstanceId);
    v.put("timestamp_ms", nowMs);
    if (config.planAssignor != null) v.put("assignor", config.planAssignor);
    if (config.fetchMode != null) v.put("fetch_mode", config.fetchMode);
    if (config.registrationSecret != null) v.put("signature", sign(v, config.registrationSecret));
    return Json.write(v).getBytes(StandardCharsets.UTF_8);
  }

  /**
   * The agent's registration signature (docs/security.md): HMAC-SHA256 with the shared secret of the
   * value without its signature, as compact JSON with sorted keys and ASCII escapes.
   */
  static String sign(Map<String, Object> value, byte[] secret) {
    Map<String, Object> body = new LinkedHashMap<>(value);
    body.remove("signature");
    try {
      javax.crypto.Mac mac = javax.crypto.Mac.getInstance("HmacSHA256");
      mac.init(new javax.crypto.spec.SecretKeySpec(secret, "HmacSHA256"));
      byte[] d = mac.doFinal(Json.canonicalAscii(body).getBytes(StandardCharsets.US_ASCII));
      StringBuilder b = new StringBuilder("hmac-sha256:");
      for (byte x : d) b.append(String.format("%02x", x & 0xff));
      return b.toString();
    } catch (java.security.GeneralSecurityException e) {
      throw new IllegalStateException(e);
    }
  }

  private void run() {
    Pattern pattern = config.planTopicRegex;
    AssignedReaderLoop.run("plan reader", () -> new KafkaConsumer<>(config.readerConfig(clientId + "-plans")),
        config.planPollMs, () -> running, new AssignedReaderLoop.Reader() {
          @Override public boolean reads(String topic) {
            return pattern == null ? topic.equals(config.planTopic) : pattern.matcher(topic).matches();
          }

          @Override public long recheckMs(boolean noneAssigned) {
            // A pattern finds new plan topics within a second; one named topic is re-checked every 5 s.
            return noneAssigned || pattern != null ? 1000 : 5000;
          }

          @Override public boolean listEarly(long nowMs) {
            return topicPattern != null && nowMs >= nextMatch;
          }

          @Override public void listed(Set<String> names, long nowMs) {
            Pattern regex = topicPattern;
            if (regex != null && nowMs >= nextMatch) {
              nextMatch = nowMs + 5000;
              setTopics(matching(regex, names, pattern, config.planTopic));
            }
          }

          @Override public void apply(ConsumerRecord<String, byte[]> r) {
            org.apache.kafka.common.header.Header mac = r.headers().lastHeader(RecordMac.HEADER);
            PlanStore.Outcome outcome = store.apply(
                r.topic(), r.key(), r.value(), mac == null ? null : mac.value(), config.registrationSecret);
            if (outcome == PlanStore.Outcome.APPLIED && onPlan != null) {
              ConsumerPlan p = store.latest(r.key());
              if (p != null) onPlan.accept(p);
            }
          }

          @Override public void afterPoll() {
            register();
          }
        });
    if (producer != null) {
      if (member != null && topics != null) {
        try {
          producer.send(new ProducerRecord<>(config.registrationsTopic, registrationKey(member), null));
          producer.flush();
        } catch (RuntimeException e) {
          LOG.warn("rackplan registration tombstone not published: {}", e.toString());
        }
      }
      producer.close(Duration.ofSeconds(5));
    }
  }

  /** Publishes the member's registration when its topics changed or a third of the TTL has passed. */
  private void register() {
    if (member == null || topics == null) return;
    long t = System.currentTimeMillis();
    if (topicsChanged || t - lastRegistrationMs >= config.registrationTtlMs / 3) {
      if (producer == null) producer = new KafkaProducer<>(config.producerConfig(clientId + "-registration"));
      topicsChanged = false;
      lastRegistrationMs = t;
      producer.send(
          new ProducerRecord<>(config.registrationsTopic, registrationKey(member),
              registrationValue(member, topics, t, config)),
          (md, err) -> {
            if (err != null) LOG.warn("rackplan registration not published: {}", err.toString());
          });
    }
  }

  public PlanStore store() {
    return store;
  }

  /** Asks the thread to end without waiting for it (several readers closed together end together). */
  void stop() {
    running = false;
  }

  /** Stop the thread; a registered member publishes its tombstone first. */
  @Override
  public void close() {
    stop();
    try {
      thread.join(15_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
