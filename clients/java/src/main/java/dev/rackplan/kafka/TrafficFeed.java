package dev.rackplan.kafka;

import java.util.Arrays;
import java.util.List;
import java.util.Map;

/**
 * The agent's traffic as both broker-side assignors read it: one {@link TrafficStore} filled by one
 * {@link TrafficReader}, per broker JVM and traffic configuration.
 *
 * <p>Why shared: a broker that loads {@link RackplanServerAssignor} (KIP-848 consumer groups) and
 * {@code RackplanStreamsTaskAssignor} (KIP-1071 Streams groups) with the same {@code rackplan.*}
 * properties read the same topic into two identical stores, with two consumers connected to every
 * broker. The key is exactly what the reader and the store depend on (the reader's client
 * configuration, the topic, the poll interval, the records' secret, the figures' maximum age), so
 * any difference in those still gets its own feed.
 */
public final class TrafficFeed implements AutoCloseable {
  /** Client id of the feed's consumer (the brokers' and ACLs' view of it). */
  public static final String CLIENT_ID = "rackplan-assignor-traffic";

  static final JvmShared<TrafficFeed> SHARED = new JvmShared<>();

  /** Bytes/s per partition, as read so far. */
  public final TrafficStore store;
  private final TrafficReader reader;

  private TrafficFeed(TrafficStore store, TrafficReader reader) {
    this.store = store;
    this.reader = reader;
  }

  /** The key {@link #acquire} shares under: the reader's and the store's whole configuration. */
  public static Object key(RackplanConfig config) {
    Map<String, Object> client = config.readerConfig(CLIENT_ID);
    return List.of(Map.copyOf(client), config.trafficTopic, config.planPollMs, config.trafficMaxAgeMs,
        Arrays.toString(config.registrationSecret));
  }

  /** This JVM's feed for {@code config} (started by the first caller); each call needs one {@link #release}. */
  public static TrafficFeed acquire(RackplanConfig config) {
    return SHARED.acquire(key(config), () -> {
      TrafficStore store = new TrafficStore(config.trafficMaxAgeMs);
      return new TrafficFeed(store, TrafficReader.started(config, store, CLIENT_ID));
    });
  }

  /** One reference to {@code config}'s feed given back; the last one stops its reader. */
  public static void release(RackplanConfig config) {
    SHARED.release(key(config));
  }

  /** Live feeds in this JVM (tests). */
  public static int live() {
    return SHARED.size();
  }

  @Override
  public void close() {
    reader.close();
  }
}
