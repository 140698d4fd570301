package dev.rackplan.kafka.streams;

import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.GroupListing;
import org.apache.kafka.clients.admin.ListGroupsOptions;
import org.apache.kafka.clients.admin.StreamsGroupDescription;
import org.apache.kafka.clients.admin.StreamsGroupMemberDescription;
import org.apache.kafka.clients.admin.StreamsGroupSubtopologyDescription;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Fills a {@link StreamsCatalog} from the cluster on a daemon thread, so that {@code assign} only
 * reads memory: every {@code rackplan.streams.refresh.ms} (and within a second of an assignment that
 * found no group) it lists the Streams groups, describes those this broker coordinates (all when
 * the broker's id is unknown) and their topics' partitions' replica racks. A failed round keeps the
 * previous snapshot and is retried with a backoff (1 s doubling to the refresh interval); a topic
 * that cannot be described (not created yet) or is not described within the round's 10 s is left out
 * and its partitions count as unknown.
 */
final class StreamsCatalogReader implements AutoCloseable {
  private static final Logger LOG = LoggerFactory.getLogger(StreamsCatalogReader.class);

  private final StreamsCatalog catalog;
  private final Supplier<Admin> adminFactory;
  private final long refreshMs;
  private final Integer nodeId;
  private final Thread thread;
  private volatile boolean running = true;
  private volatile boolean wanted = true;
  volatile long rounds;
  volatile String lastError = "";

  StreamsCatalogReader(StreamsCatalog catalog, Supplier<Admin> adminFactory, long refreshMs, Integer nodeId) {
    this.catalog = catalog;
    this.adminFactory = adminFactory;
    this.refreshMs = refreshMs;
    this.nodeId = nodeId;
    this.thread = new Thread(this::loop, "rackplan-streams-assignor-catalog");
    thread.setDaemon(true);
  }

  StreamsCatalogReader start() {
    thread.start();
    return this;
  }

  /** Asks for a refresh soon (an assignment found no group). */
  void want() {
    wanted = true;
  }

  private void loop() {
    Admin admin = null;
    long last = 0;
    long backoff = 1_000;
    while (running) {
      try {
        long now = System.currentTimeMillis();
        if ((wanted && now - last >= 1_000) || now - last >= refreshMs) {
          wanted = false;
          last = now;
          if (admin == null) admin = adminFactory.get();
          List<GroupTopology> next = describe(admin, nodeId, catalog.groups());
          for (String line : news(catalog.groups(), next)) LOG.info(line);
          catalog.replace(next);
          rounds++;
          backoff = 1_000;
        }
        Thread.sleep(100);
      } catch (InterruptedException e) {
        break;
      } catch (Exception e) {
        lastError = e.toString();
        LOG.debug("rackplan: Streams groups not described: {}", e.toString());
        wanted = true;
        try {
          Thread.sleep(backoff);
        } catch (InterruptedException ie) {
          break;
        }
        backoff = Math.min(backoff * 2, Math.max(1_000, refreshMs));
      }
    }
    if (admin != null) admin.close(java.time.Duration.ofSeconds(1));
  }

  /** One round with no previous one (tests). */
  static List<GroupTopology> describe(Admin admin, Integer nodeId) throws Exception {
    return describe(admin, nodeId, List.of());
  }

  /**
   * One round: the Streams groups (coordinated by {@code nodeId} when known) with their topics' racks. A
   * listed group that cannot be described this round (deleted since the listing, its coordinator moving)
   * keeps its description from {@code previous}, if any; the others are described all the same.
   */
  static List<GroupTopology> describe(Admin admin, Integer nodeId, List<GroupTopology> previous) throws Exception {
    Collection<GroupListing> listed = admin.listGroups(ListGroupsOptions.forStreamsGroups()).all().get(10, TimeUnit.SECONDS);
    List<String> ids = new ArrayList<>();
    for (GroupListing g : listed) ids.add(g.groupId());
    if (ids.isEmpty()) return List.of();
    // group by group: one that cannot be described (deleted since the listing, its coordinator moving) is
    // left out of this round, the others are described
    Map<String, StreamsGroupDescription> described = answered(admin.describeStreamsGroups(ids).describedGroups(), 10_000);
    List<StreamsGroupDescription> mine = new ArrayList<>();
    Set<String> topics = new TreeSet<>();
    for (StreamsGroupDescription d : described.values()) {
      Node c = d.coordinator();
      if (nodeId != null && c != null && c.id() != nodeId) continue;
      mine.add(d);
      for (StreamsGroupSubtopologyDescription s : d.subtopologies()) {
        topics.addAll(s.sourceTopics());
        topics.addAll(s.repartitionSourceTopics().keySet());
        topics.addAll(s.stateChangelogTopics().keySet());
      }
    }
    Map<String, List<Set<String>>> racks =
        topics.isEmpty() ? Map.of() : racks(admin.describeTopics(topics).topicNameValues(), 10_000);
    List<GroupTopology> out = new ArrayList<>();
    for (StreamsGroupDescription d : mine) out.add(topology(d, racks));
    Set<String> listedIds = new java.util.HashSet<>(ids);
    for (GroupTopology g : previous)
      if (listedIds.contains(g.groupId()) && !described.containsKey(g.groupId())) out.add(g);
    return out;
  }

  /**
   * The replica racks of the topics {@code described} answers within {@code timeoutMs} (one deadline for
   * all): a topic whose describe fails or is not answered in time (not created yet, a slow broker) is
   * left out, its partitions' racks unknown, and the round goes on.
   */
  static Map<String, List<Set<String>>> racks(Map<String, KafkaFuture<TopicDescription>> described, long timeoutMs)
      throws InterruptedException {
    Map<String, List<Set<String>>> racks = new TreeMap<>();
    for (Map.Entry<String, TopicDescription> e : answered(described, timeoutMs).entrySet())
      racks.put(e.getKey(), racksOf(e.getValue()));
    return racks;
  }

  /**
   * What each of {@code futures} answered within {@code timeoutMs} (one deadline for all), by name; a name
   * whose request failed or was not answered in time is left out (logged at debug).
   */
  static <T> Map<String, T> answered(Map<String, KafkaFuture<T>> futures, long timeoutMs) throws InterruptedException {
    long deadline = System.currentTimeMillis() + timeoutMs;
    Map<String, T> out = new TreeMap<>();
    for (Map.Entry<String, KafkaFuture<T>> e : futures.entrySet()) {
      try {
        long left = Math.max(0, deadline - System.currentTimeMillis());
        out.put(e.getKey(), e.getValue().get(left, TimeUnit.MILLISECONDS));
      } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException notYet) {
        LOG.debug("rackplan: {} not described: {}", e.getKey(),
            notYet instanceof java.util.concurrent.ExecutionException ? notYet.getCause() : notYet);
      }
    }
    return out;
  }

  /**
   * One line per group of {@code next} that is new or has other members than in {@code before}:
   * from that describe on, an assignment with those members is rackplan's (before it, a new group's
   * is Kafka's {@code sticky}, see docs/java.md), so operators and tests can tell when it applies.
   */
  static List<String> news(List<GroupTopology> before, List<GroupTopology> next) {
    Map<String, Set<String>> known = new TreeMap<>();
    for (GroupTopology g : before) known.put(g.groupId(), g.memberIds());
    List<String> out = new ArrayList<>();
    for (GroupTopology g : next) {
      if (g.memberIds().equals(known.get(g.groupId()))) continue;
      out.add("rackplan: Streams group " + g.groupId() + " described: " + count(g.memberIds().size(), "member") + ", "
          + count(g.subtopologies().size(), "sub-topology") + ", replica racks of " + count(g.topicRacks().size(), "topic"));
    }
    return out;
  }

  private static String count(int n, String noun) {
    return n + " " + (n == 1 ? noun : noun.endsWith("y") ? noun.substring(0, noun.length() - 1) + "ies" : noun + "s");
  }

  static List<Set<String>> racksOf(TopicDescription d) {
    List<Set<String>> out = new ArrayList<>();
    for (TopicPartitionInfo p : d.partitions()) {
      while (out.size() < p.partition()) out.add(Set.of());
      Set<String> r = new TreeSet<>();
      for (Node n : p.replicas()) if (n.hasRack()) r.add(n.rack());
      out.add(r);
    }
    return out;
  }

  /** A described group with the racks of the topics it names. */
  static GroupTopology topology(StreamsGroupDescription d, Map<String, List<Set<String>>> racks) {
    Set<String> members = new TreeSet<>();
    Set<String> processes = new TreeSet<>();
    for (StreamsGroupMemberDescription m : d.members()) {
      members.add(m.memberId());
      processes.add(m.processId());
    }
    Map<String, GroupTopology.Subtopology> subs = new TreeMap<>();
    Map<String, List<Set<String>>> mine = new TreeMap<>();
    for (StreamsGroupSubtopologyDescription s : d.subtopologies()) {
      List<String> sources = new ArrayList<>(new TreeSet<>(s.sourceTopics()));
      for (String t : new TreeSet<>(s.repartitionSourceTopics().keySet())) if (!sources.contains(t)) sources.add(t);
      List<String> logs = new ArrayList<>(new TreeSet<>(s.stateChangelogTopics().keySet()));
      subs.put(s.subtopologyId(), new GroupTopology.Subtopology(List.copyOf(sources), List.copyOf(logs)));
      for (String t : sources) if (racks.containsKey(t)) mine.put(t, racks.get(t));
      for (String t : logs) if (racks.containsKey(t)) mine.put(t, racks.get(t));
    }
    return new GroupTopology(d.groupId(), members, processes, subs, mine);
  }

  @Override
  public void close() {
    running = false;
    thread.interrupt();
  }
}
