package dev.rackplan.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.lang.reflect.Constructor;
import java.lang.reflect.Proxy;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.DescribeTopicsResult;
import org.apache.kafka.clients.admin.ListTopicsResult;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.admin.TopicListing;
import org.apache.kafka.common.KafkaFuture;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.errors.TopicAuthorizationException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.internals.KafkaFutureImpl;
import org.junit.jupiter.api.Test;

/**
 * The KIP-848 plugin's topic-name round ({@link ServerReaders#refreshTopicNames}) when a listed topic is
 * gone by the time it is described (found by a hunt: the whole round failed, so no topic created meanwhile
 * got a name and the plugin withheld it from every group until a round met no deletion).
 */
class ServerReadersTest {
  static final Uuid ORDERS = new Uuid(1, 1), PAYMENTS = new Uuid(2, 2);

  /** An Admin listing {@code described}'s names and answering each describe with its future. */
  static Admin admin(Map<String, KafkaFuture<TopicDescription>> described) throws Exception {
    Constructor<ListTopicsResult> c = ListTopicsResult.class.getDeclaredConstructor(KafkaFuture.class);
    c.setAccessible(true);
    Map<String, TopicListing> listings = new TreeMap<>();
    for (String n : described.keySet()) listings.put(n, new TopicListing(n, Uuid.randomUuid(), false));
    ListTopicsResult listed = c.newInstance(KafkaFuture.completedFuture(listings));
    java.lang.reflect.Method byName = DescribeTopicsResult.class.getDeclaredMethod("ofTopicNames", Map.class);
    byName.setAccessible(true);
    return (Admin) Proxy.newProxyInstance(Admin.class.getClassLoader(), new Class<?>[] {Admin.class}, (proxy, method, args) -> {
      switch (method.getName()) {
        case "listTopics": return listed;
        case "describeTopics": return byName.invoke(null, described);
        default: throw new UnsupportedOperationException(method.getName());
      }
    });
  }

  static KafkaFuture<TopicDescription> answered(String name, Uuid id) {
    return KafkaFuture.completedFuture(new TopicDescription(name, false, List.of(), Set.of(), id));
  }

  static KafkaFuture<TopicDescription> failed(Throwable t) {
    KafkaFutureImpl<TopicDescription> f = new KafkaFutureImpl<>();
    f.completeExceptionally(t);
    return f;
  }

  @Test
  void aTopicDeletedBetweenTheListingAndTheDescribeDoesNotFailTheRound() throws Exception {
    ServerReaders r = new ServerReaders(new PlanStore(), new TrafficStore(0));
    Map<String, KafkaFuture<TopicDescription>> described = new TreeMap<>();
    described.put("orders", answered("orders", ORDERS));
    described.put("deleted", failed(new UnknownTopicOrPartitionException("gone")));
    described.put("payments", answered("payments", PAYMENTS));
    r.refreshTopicNames(admin(described));
    assertEquals(Map.of(ORDERS, "orders", PAYMENTS, "payments"), Map.copyOf(r.topicNames));
  }

  /** Another failure still fails the round (the loop tries again), with the names that answered kept. */
  @Test
  void anotherFailureFailsTheRoundKeepingTheNamesThatAnswered() throws Exception {
    ServerReaders r = new ServerReaders(new PlanStore(), new TrafficStore(0));
    Map<String, KafkaFuture<TopicDescription>> described = new TreeMap<>();
    described.put("orders", answered("orders", ORDERS));
    described.put("secret", failed(new TopicAuthorizationException("no")));
    assertThrows(java.util.concurrent.ExecutionException.class, () -> r.refreshTopicNames(admin(described)));
    assertEquals(Map.of(ORDERS, "orders"), Map.copyOf(r.topicNames));
  }
}
