package dev.rackplan.kafka;

import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.Uuid;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What {@link RackplanServerAssignor} reads, kept up to date by daemon threads: the plans ({@link
 * RackplanClient} into a {@link PlanStore}), the agent's traffic (the JVM's shared {@link
 * TrafficFeed}) and topic names by id (an admin client). One per broker JVM and configuration
 * ({@link JvmShared}): every assignor instance the broker builds with the same {@code rackplan.*}
 * properties reads the same ones.
 */
final class ServerReaders implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(ServerReaders.class);

  /** Seconds without a topic listing after which the admin client is made anew (its own rebootstrap). */
  static final long ADMIN_RENEW_MS = 300_000;

  final PlanStore store;
  /** Bytes/s per partition from the agent's traffic topic (filled by {@link TrafficReader}). */
  final TrafficStore traffic;
  /** topic id -> name (the plans name topics). */
  final Map<Uuid, String> topicNames = new ConcurrentHashMap<>();
  volatile Admin admin;
  volatile boolean refreshWanted = true;

  /** The plan topics' ids as a lookup found them, and when that lookup started. */
  record PlanTopicIds(Set<Uuid> ids, long fromMs) {}

  /** The last successful {@link #lookUpPlanTopicIds} (null: none yet). */
  volatile PlanTopicIds planTopicIds;
  /** topic id -> when an assignment first met it without a name. */
  final Map<Uuid, Long> unnamedSince = new ConcurrentHashMap<>();
  private volatile boolean running = true;
  private RackplanClient client;
  /** The configuration the shared traffic feed was acquired for (null: none to release). */
  private RackplanConfig trafficConfig;
  private Thread topicThread;

  /** Readers without I/O (tests, and a broker without {@code rackplan.bootstrap.servers}). */
  ServerReaders(PlanStore store, TrafficStore traffic) {
    this.store = store;
    this.traffic = traffic;
  }

  /** The readers of ``config``, their threads started. */
  static ServerReaders start(RackplanConfig config) {
    boolean reads = !"none".equals(config.trafficTopic);
    // The traffic feed is the JVM's shared one (the Streams assignor reads the same: TrafficFeed).
    TrafficStore traffic = reads ? TrafficFeed.acquire(config).store : new TrafficStore(config.trafficMaxAgeMs);
    ServerReaders r = new ServerReaders(new PlanStore(), traffic);
    if (reads) r.trafficConfig = config;
    r.client = new RackplanClient(config, r.store, null, "rackplan-server-assignor", null).start();
    Map<String, Object> ac = RackplanServerAssignor.adminConfig(config);
    r.admin = Admin.create(ac);
    r.topicThread = new Thread(() -> r.refreshTopics(ac), "rackplan-server-assignor-topics");
    r.topicThread.setDaemon(true);
    r.topicThread.start();
    return r;
  }

  /**
   * Looks up the ids the plan topics have now, by name: {@code planTopic}, or every listed topic that
   * {@code pattern} matches. It needs Describe on them, which the Read the plan reader needs implies. A
   * plan topic that does not exist has no id; any other failure, or no answer by {@code deadlineMs},
   * leaves {@link #planTopicIds} as it was (logged).
   */
  void lookUpPlanTopicIds(java.util.regex.Pattern pattern, String planTopic, long deadlineMs) {
    Admin a = admin;
    if (a == null) return;
    long from = System.currentTimeMillis();
    try {
      java.util.List<String> names = new java.util.ArrayList<>();
      if (pattern == null) names.add(planTopic);
      else
        for (String n : a.listTopics().names().get(left(deadlineMs), TimeUnit.MILLISECONDS))
          if (pattern.matcher(n).matches()) names.add(n);
      Set<Uuid> ids = new java.util.HashSet<>();
      if (!names.isEmpty())
        for (Map.Entry<String, org.apache.kafka.common.KafkaFuture<TopicDescription>> e :
            a.describeTopics(names).topicNameValues().entrySet()) {
          try {
            TopicDescription d = e.getValue().get(left(deadlineMs), TimeUnit.MILLISECONDS);
            ids.add(d.topicId());
            topicNames.put(d.topicId(), d.name());
          } catch (java.util.concurrent.ExecutionException x) {
            if (!(x.getCause() instanceof org.apache.kafka.common.errors.UnknownTopicOrPartitionException)) throw x;
          }
        }
      planTopicIds = new PlanTopicIds(Set.copyOf(ids), from);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    } catch (Exception e) {
      LOG.warn("rackplan: ids of the plan topics not looked up (topics without a name stay unassigned): {}", e.toString());
    }
  }

  private static long left(long deadlineMs) {
    return Math.max(0, deadlineMs - System.currentTimeMillis());
  }

  /**
   * One round of topic names: every listed topic described, each on its own. A topic deleted between
   * the listing and the describe ({@code UnknownTopicOrPartitionException}) is skipped: it failed the
   * whole round before (a hunt found it), so no new topic was named until a round met no deletion,
   * and the plugin withheld the new topics meanwhile. Any other failure still fails the round (the
   * loop tries again), after the names that did answer are kept.
   */
  void refreshTopicNames(Admin a) throws Exception {
    Set<String> names = a.listTopics().names().get(10, TimeUnit.SECONDS);
    Exception failed = null;
    for (Map.Entry<String, org.apache.kafka.common.KafkaFuture<TopicDescription>> e : a.describeTopics(names).topicNameValues().entrySet()) {
      try {
        TopicDescription td = e.getValue().get(10, TimeUnit.SECONDS);
        topicNames.put(td.topicId(), td.name());
      } catch (java.util.concurrent.ExecutionException x) {
        if (!(x.getCause() instanceof org.apache.kafka.common.errors.UnknownTopicOrPartitionException)) failed = x;
      }
    }
    if (failed != null) throw failed;
  }

  private void refreshTopics(Map<String, Object> ac) {
    long last = 0;
    long answered = System.currentTimeMillis();
    while (running) {
      try {
        long now = System.currentTimeMillis();
        if (now - answered > ADMIN_RENEW_MS) {
          // No rebootstrap in the client (see adminConfig): a new one starts again from the bootstrap list.
          answered = now;
          Admin old = admin;
          admin = Admin.create(ac);
          old.close(java.time.Duration.ofSeconds(1));
          LOG.info("rackplan: no topic listing for {} s; admin client made anew", ADMIN_RENEW_MS / 1000);
        }
        if (refreshWanted || now - last > 30_000) {
          refreshTopicNames(admin);
          refreshWanted = false;
          last = now;
          answered = now;
        }
        Thread.sleep(200);
      } catch (InterruptedException e) {
        return;
      } catch (Exception e) {
        LOG.debug("rackplan: topic names not refreshed: {}", e.toString());
        try {
          Thread.sleep(1000);
        } catch (InterruptedException ie) {
          return;
        }
      }
    }
  }

  @Override
  public void close() {
    running = false;
    if (client != null) client.stop();
    if (client != null) client.close();
    if (trafficConfig != null) TrafficFeed.release(trafficConfig);
    trafficConfig = null;
    if (topicThread != null) topicThread.interrupt();
    // Not Admin.close()'s unbounded wait for calls in flight: a broker shutting down would wait out
    // a listing against peers already gone.
    if (admin != null) admin.close(java.time.Duration.ofSeconds(1));
  }
}
