package dev.rackplan.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rackplan.kafka.streams.RackplanStreamsTaskAssignorAccess;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * A broker builds its configured assignors again and again and never closes the ones it drops: their
 * readers (consumers, an admin client, threads) must be made once per JVM and configuration.
 */
class JvmSharedTest {
  static final class Value implements AutoCloseable {
    boolean closed;

    @Override
    public void close() {
      closed = true;
    }
  }

  @Test
  void oneValuePerKeyClosedByTheLastRelease() {
    JvmShared<Value> shared = new JvmShared<>();
    AtomicInteger made = new AtomicInteger();
    Value a = shared.acquire("k", () -> { made.incrementAndGet(); return new Value(); });
    Value b = shared.acquire("k", () -> { made.incrementAndGet(); return new Value(); });
    Value other = shared.acquire("other", Value::new);
    assertSame(a, b);
    assertNotSame(a, other);
    assertEquals(1, made.get());
    assertEquals(2, shared.size());
    shared.release("k");
    assertFalse(a.closed, "one reference is left");
    shared.release("k");
    assertTrue(a.closed, "the last reference closes it");
    shared.release("k"); // one release too many: nothing to close, nothing thrown
    assertEquals(1, shared.size());
    Value again = shared.acquire("k", Value::new);
    assertNotSame(a, again, "a closed value is never handed out again");
  }

  /** Twenty server assignors configured alike (a broker's rebuilds): one set of readers, closed with the last. */
  @Test
  void serverAssignorsConfiguredAlikeShareTheirReaders() {
    int before = RackplanServerAssignor.SHARED.size();
    Map<String, Object> props = Map.of(
        "rackplan.bootstrap.servers", "127.0.0.1:1", "rackplan.plan.topic", "shared-test.plans", "node.id", 1);
    List<RackplanServerAssignor> made = new ArrayList<>();
    for (int i = 0; i < 20; i++) {
      RackplanServerAssignor a = new RackplanServerAssignor();
      a.configure(props);
      made.add(a);
    }
    assertEquals(before + 1, RackplanServerAssignor.SHARED.size());
    RackplanServerAssignor other = new RackplanServerAssignor();
    other.configure(Map.of("rackplan.bootstrap.servers", "127.0.0.1:2", "rackplan.plan.topic", "shared-test.plans"));
    assertEquals(before + 2, RackplanServerAssignor.SHARED.size(), "another configuration reads on its own");
    other.close();
    for (RackplanServerAssignor a : made) a.close();
    assertEquals(before, RackplanServerAssignor.SHARED.size());
    made.get(0).close(); // closed twice: no second release
    assertEquals(before, RackplanServerAssignor.SHARED.size());
  }

  /**
   * Both broker-side assignors configured alike (one broker's rackplan.* properties): one traffic feed,
   * the same store weighed by both, its reader stopped with the last of them; another traffic topic
   * gets its own.
   */
  @Test
  void bothBrokerAssignorsShareOneTrafficFeed() {
    int before = TrafficFeed.live();
    Map<String, Object> props = Map.of(
        "rackplan.bootstrap.servers", "127.0.0.1:1", "rackplan.plan.topic", "feed-test.plans", "node.id", 4);
    RackplanServerAssignor server = new RackplanServerAssignor();
    server.configure(props);
    var streams = RackplanStreamsTaskAssignorAccess.configured(props);
    assertEquals(before + 1, TrafficFeed.live());
    assertSame(server.traffic(), RackplanStreamsTaskAssignorAccess.trafficOf(streams));
    RackplanServerAssignor other = new RackplanServerAssignor();
    other.configure(Map.of("rackplan.bootstrap.servers", "127.0.0.1:1", "rackplan.plan.topic", "feed-test.plans",
        "rackplan.traffic.topic", "feed-test.traffic"));
    assertEquals(before + 2, TrafficFeed.live(), "another traffic topic is read on its own");
    other.close();
    server.close();
    assertEquals(before + 1, TrafficFeed.live(), "the Streams assignor still reads it");
    streams.close();
    assertEquals(before, TrafficFeed.live());
  }

  @Test
  void streamsAssignorsConfiguredAlikeShareTheirCatalog() {
    int before = RackplanStreamsTaskAssignorAccess.sharedSize();
    Map<String, Object> props = Map.of("rackplan.bootstrap.servers", "127.0.0.1:1", "node.id", 3);
    var a = RackplanStreamsTaskAssignorAccess.configured(props);
    var b = RackplanStreamsTaskAssignorAccess.configured(props);
    assertEquals(before + 1, RackplanStreamsTaskAssignorAccess.sharedSize());
    assertSame(RackplanStreamsTaskAssignorAccess.catalogOf(a), RackplanStreamsTaskAssignorAccess.catalogOf(b));
    a.close();
    assertEquals(before + 1, RackplanStreamsTaskAssignorAccess.sharedSize());
    b.close();
    assertEquals(before, RackplanStreamsTaskAssignorAccess.sharedSize());
  }
}
