package dev.rackplan.kafka;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.config.ConfigException;

/**
 * rackplan's settings, read from the consumer's (or broker's) own properties, all prefixed
 * {@code rackplan.}. Unknown {@code rackplan.*} keys are refused, naming the key.
 */
public final class RackplanConfig {
  public static final String PREFIX = "rackplan.";
  public static final String PLAN_TOPIC = "rackplan.plan.topic";
  public static final String PLAN_TOPIC_PATTERN = "rackplan.plan.topic.pattern";
  public static final String REGISTRATIONS_TOPIC = "rackplan.registrations.topic";
  public static final String MEMBER_ID = "rackplan.member.id";
  public static final String REGISTRATION_TTL_MS = "rackplan.registration.ttl.ms";
  public static final String PLAN_POLL_MS = "rackplan.plan.poll.ms";
  public static final String FALLBACK = "rackplan.fallback";
  public static final String PLAN_ASSIGNOR = "rackplan.plan.assignor";
  public static final String FETCH_MODE = "rackplan.fetch.mode";
  public static final String REBALANCE_PROTOCOL = "rackplan.rebalance.protocol";
  public static final String BOOTSTRAP = "rackplan.bootstrap.servers";
  public static final String HANDLE = "rackplan.handle";
  public static final String STREAMS_FOLLOWUP_MS = "rackplan.streams.followup.ms";
  public static final String REGISTRATION_SECRET_FILE = "rackplan.registration.secret.file";
  /** The broker-side Streams assignor's (dev.rackplan.kafka.streams.RackplanStreamsTaskAssignor). */
  public static final String STREAMS_REFRESH_MS = "rackplan.streams.refresh.ms";
  public static final String STREAMS_STRATEGY = "rackplan.streams.strategy";
  /** The broker-side assignor's traffic (the agent's traffic topic; docs/java.md, "Traffic"). */
  public static final String TRAFFIC_TOPIC = "rackplan.traffic.topic";
  public static final String TRAFFIC_MAX_AGE_MS = "rackplan.traffic.max.age.ms";

  static final Set<String> KNOWN =
      Set.of(
          PLAN_TOPIC, PLAN_TOPIC_PATTERN, REGISTRATIONS_TOPIC, MEMBER_ID, REGISTRATION_TTL_MS,
          PLAN_POLL_MS, FALLBACK, PLAN_ASSIGNOR, FETCH_MODE, REBALANCE_PROTOCOL, BOOTSTRAP, HANDLE,
          STREAMS_FOLLOWUP_MS, REGISTRATION_SECRET_FILE, STREAMS_REFRESH_MS, STREAMS_STRATEGY, TRAFFIC_TOPIC,
          TRAFFIC_MAX_AGE_MS);

  public final Map<String, Object> originals;
  public final String planTopic;
  public final String planTopicPattern;
  /** {@link #planTopicPattern} compiled (null without one); a bad regex is refused, naming the key. */
  public final java.util.regex.Pattern planTopicRegex;
  public final String registrationsTopic;
  public final long registrationTtlMs;
  public final long planPollMs;
  public final String fallback;
  public final String planAssignor;
  public final String fetchMode;
  public final String rebalanceProtocol;
  public final long streamsFollowupMs;
  /** The agent's traffic topic; "none": traffic is not read. */
  public final String trafficTopic;
  /** A traffic record's age after which it is not used (0: three of its windows). */
  public final long trafficMaxAgeMs;
  /** The agent's registrations.secret_file content (stripped), or null: registrations are not signed. */
  public final byte[] registrationSecret;
  /**
   * The broker-side Streams assignor's settings, checked here too: a broker loads both plugins with one set
   * of properties, and each must refuse what the other would (docs/java.md, "Settings").
   */
  public final long streamsRefreshMs;
  public final String streamsStrategy;

  public RackplanConfig(Map<String, ?> configs) {
    originals = new HashMap<>(configs);
    for (String k : configs.keySet())
      if (k.startsWith(PREFIX) && !KNOWN.contains(k))
        throw new ConfigException(k, configs.get(k), "unknown rackplan setting; known: " + new java.util.TreeSet<>(KNOWN));
    planTopic = str(PLAN_TOPIC, "_rackplan.plans");
    planTopicPattern = str(PLAN_TOPIC_PATTERN, null);
    planTopicRegex = planTopics(regex(PLAN_TOPIC_PATTERN, planTopicPattern));
    registrationsTopic = str(REGISTRATIONS_TOPIC, "_rackplan.registrations");
    registrationTtlMs = positive(REGISTRATION_TTL_MS, 300_000L);
    planPollMs = positive(PLAN_POLL_MS, 500L);
    fallback = oneOf(FALLBACK, "cooperative-sticky", "cooperative-sticky", "range");
    planAssignor = oneOf(PLAN_ASSIGNOR, null, "range", "cooperative-sticky", "rack-optimal");
    fetchMode = oneOf(FETCH_MODE, null, "nearest-replica", "leader");
    rebalanceProtocol = oneOf(REBALANCE_PROTOCOL, "cooperative", "cooperative", "eager");
    streamsFollowupMs = positive(STREAMS_FOLLOWUP_MS, 60_000L);
    trafficTopic = str(TRAFFIC_TOPIC, "_rackplan.traffic");
    trafficMaxAgeMs = originals.get(TRAFFIC_MAX_AGE_MS) == null ? 0 : positive(TRAFFIC_MAX_AGE_MS, 0);
    registrationSecret = secret(str(REGISTRATION_SECRET_FILE, null));
    streamsRefreshMs = positive(STREAMS_REFRESH_MS, 10_000L);
    streamsStrategy = oneOf(STREAMS_STRATEGY, "min_traffic", "min_traffic", "balance_subtopology");
  }

  /** A secret file's bytes without surrounding ASCII whitespace (as the agent reads it); never logged. */
  private static byte[] secret(String path) {
    if (path == null) return null;
    byte[] data;
    try {
      data = java.nio.file.Files.readAllBytes(java.nio.file.Path.of(path));
    } catch (java.io.IOException | RuntimeException e) {
      throw new ConfigException(REGISTRATION_SECRET_FILE, path, "cannot be read: " + e.getClass().getSimpleName());
    }
    int from = 0, to = data.length;
    while (from < to && isSpace(data[from])) from++;
    while (to > from && isSpace(data[to - 1])) to--;
    if (from == to) throw new ConfigException(REGISTRATION_SECRET_FILE, path, "is empty");
    return java.util.Arrays.copyOfRange(data, from, to);
  }

  private static boolean isSpace(byte b) {
    return b == ' ' || b == '\t' || b == '\n' || b == '\r' || b == 0x0b || b == 0x0c;
  }

  public String str(String key, String dflt) {
    Object v = originals.get(key);
    if (v == null) return dflt;
    String s = v.toString().trim();
    if (s.isEmpty()) throw new ConfigException(key, v, "must not be empty");
    return s;
  }

  /**
   * Ordinary topic names a plan topic pattern must not match. The KIP-848 plugin never assigns a topic the
   * pattern matches (it takes it for a plan topic), so {@code .*}, {@code .+} or {@code [a-z].*} would
   * leave every application topic unassigned, silently (a hunt found {@code .*} accepted). Not a proof
   * that no application topic matches: a guard against the patterns that match nearly everything.
   */
  static final List<String> ORDINARY_TOPICS = List.of(
      "orders", "payments", "events", "input", "output", "test", "topic", "a", "0", "my-app-input", "app.changelog",
      "__consumer_offsets", "_schemas");

  private static java.util.regex.Pattern planTopics(java.util.regex.Pattern p) {
    if (p == null) return null;
    for (String name : ORDINARY_TOPICS)
      if (p.matcher(name).matches())
        throw new ConfigException(PLAN_TOPIC_PATTERN, p.pattern(), "matches ordinary topic names such as '" + name
            + "': a KIP-848 group is never assigned a topic this pattern matches (it is taken for a plan topic);"
            + " write one that matches only the agent's plan topics, such as _rackplan\\.plans.*");
    return p;
  }

  private static java.util.regex.Pattern regex(String key, String s) {
    if (s == null) return null;
    try {
      return java.util.regex.Pattern.compile(s);
    } catch (java.util.regex.PatternSyntaxException e) {
      throw new ConfigException(key, s, "is not a regular expression: " + e.getDescription() + " near index " + e.getIndex());
    }
  }

  private long positive(String key, long dflt) {
    String s = str(key, null);
    if (s == null) return dflt;
    try {
      long n = Long.parseLong(s);
      if (n > 0) return n;
    } catch (NumberFormatException ignored) {
      // refused below
    }
    throw new ConfigException(key, s, "must be a positive integer (milliseconds)");
  }

  private String oneOf(String key, String dflt, String... allowed) {
    String s = str(key, dflt);
    if (s == null) return null;
    for (String a : allowed) if (a.equals(s)) return s;
    throw new ConfigException(key, s, "must be one of " + String.join(", ", allowed));
  }

  /**
   * A client security setting ({@code ssl.*}, {@code sasl.*}, {@code security.protocol}): rackplan's own
   * clients take these from the application's or the broker's properties, so they reach a secured listener.
   */
  public static boolean isSecurity(String key) {
    return key.startsWith("ssl.") || key.startsWith("sasl.") || key.equals(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG);
  }

  /**
   * What a plugin reads of the properties it is configured with (a broker's, or a Streams app's for its
   * task assignor): the {@code rackplan.*} settings and the client security settings ({@link #isSecurity}),
   * nothing else.
   */
  public static Map<String, Object> ofPlugin(Map<String, ?> configs) {
    Map<String, Object> mine = new HashMap<>();
    for (Map.Entry<String, ?> e : configs.entrySet())
      if (e.getKey().startsWith(PREFIX) || isSecurity(e.getKey())) mine.put(e.getKey(), e.getValue());
    return mine;
  }

  /** Connection and security settings of the application's client, for rackplan's own clients. */
  Map<String, Object> connection(Set<String> allowedKeys) {
    Map<String, Object> out = new HashMap<>();
    for (Map.Entry<String, Object> e : originals.entrySet()) {
      String k = e.getKey();
      boolean common = isSecurity(k) || k.equals(CommonClientConfigs.CLIENT_DNS_LOOKUP_CONFIG);
      if (common && allowedKeys.contains(k)) out.put(k, e.getValue());
    }
    String bootstrap = str(BOOTSTRAP, null);
    if (bootstrap == null) {
      Object b = originals.get(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG);
      if (b instanceof java.util.List) bootstrap = String.join(",", ((java.util.List<?>) b).stream().map(Object::toString).toList());
      else if (b != null) bootstrap = b.toString();
    }
    if (bootstrap == null)
      throw new ConfigException(BOOTSTRAP, null, "no bootstrap.servers to read rackplan's topics from");
    out.put(CommonClientConfigs.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    return out;
  }

  Map<String, Object> readerConfig(String clientId) {
    Map<String, Object> c = connection(ConsumerConfig.configNames());
    c.put(ConsumerConfig.CLIENT_ID_CONFIG, clientId);
    // assign() only, never joined nor committed; the group id is what ACLs name (docs/security.md)
    c.put(ConsumerConfig.GROUP_ID_CONFIG, "rackplan-reader");
    c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
    c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
    // the agent publishes plans in transactions: an aborted (fenced) leader's records are never read
    c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
    c.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, "org.apache.kafka.common.serialization.StringDeserializer");
    c.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, "org.apache.kafka.common.serialization.ByteArrayDeserializer");
    return c;
  }

  Map<String, Object> producerConfig(String clientId) {
    Map<String, Object> c = connection(ProducerConfig.configNames());
    c.put(ProducerConfig.CLIENT_ID_CONFIG, clientId);
    c.put(ProducerConfig.ACKS_CONFIG, "all");
    c.put(ProducerConfig.LINGER_MS_CONFIG, "0");
    c.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, "org.apache.kafka.common.serialization.StringSerializer");
    c.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, "org.apache.kafka.common.serialization.ByteArraySerializer");
    return c;
  }
}
