package dev.rackplan.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigException;
import org.junit.jupiter.api.Test;

/**
 * What RackplanConsumer adds to the application's config. client.id defaults to the member's rackplan
 * id: DescribeGroups shows client.id, not the subscription's user data, and the agent matches a live
 * member to its registration by it (issue 24: without it the live locality alert could not place Java
 * members and counted them as local).
 */
class RackplanConsumerConfigTest {
  static Object clientId(Map<String, Object> app) {
    return RackplanConsumer.tagged(app).get(ConsumerConfig.CLIENT_ID_CONFIG);
  }

  @Test
  void clientIdDefaultsToTheRackplanMemberIdThenTheInstanceId() {
    assertEquals("pay-az-a-1", clientId(Map.of(RackplanConfig.MEMBER_ID, "pay-az-a-1")));
    assertEquals("inst-1", clientId(Map.of(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "inst-1")));
    assertEquals("pay-az-a-1", clientId(Map.of(
        RackplanConfig.MEMBER_ID, "pay-az-a-1", ConsumerConfig.GROUP_INSTANCE_ID_CONFIG, "inst-1")));
  }

  @Test
  void theApplicationsClientIdIsKeptAndNoIdMeansKafkasDefault() {
    assertEquals("mine", clientId(Map.of(RackplanConfig.MEMBER_ID, "pay-az-a-1", ConsumerConfig.CLIENT_ID_CONFIG, "mine")));
    assertEquals(null, clientId(Map.of()));
    assertEquals(null, clientId(Map.of(RackplanConfig.MEMBER_ID, " ")));
  }

  /** A consumer of ``protocol`` (classic: with RackplanAssignor) against no broker. */
  static Map<String, Object> consumer(String protocol) {
    Map<String, Object> p = new HashMap<>();
    p.put("bootstrap.servers", "127.0.0.1:1");
    p.put("group.id", "g");
    p.put("group.instance.id", "i-1");
    p.put("group.protocol", protocol);
    p.put("key.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
    p.put("value.deserializer", "org.apache.kafka.common.serialization.StringDeserializer");
    if (protocol.equals("classic")) p.put("partition.assignment.strategy", RackplanAssignor.class.getName());
    return p;
  }

  static long liveThreads(String part) {
    return Thread.getAllStackTraces().keySet().stream().filter(t -> t.isAlive() && t.getName().contains(part)).count();
  }

  /** A bad rackplan.* value of a classic member: a ConfigException naming the key, not Kafka's KafkaException around it. */
  @Test
  void aClassicMembersBadRackplanValueIsAConfigExceptionNamingTheKey() {
    Map<String, Object> p = consumer("classic");
    p.put("rackplan.fallback", "sticky");
    ConfigException e = assertThrows(ConfigException.class, () -> new RackplanConsumer<String, String>(p).close());
    assertTrue(e.getMessage().contains("rackplan.fallback"), e.getMessage());
    p.remove("rackplan.fallback");
    p.remove("group.instance.id");
    e = assertThrows(ConfigException.class, () -> new RackplanConsumer<String, String>(p).close());
    assertTrue(e.getMessage().contains("rackplan.member.id"), e.getMessage());
  }

  /** KIP-848: a bad rackplan.* value is refused before Kafka's consumer (and its background thread) exists. */
  @Test
  void aKip848MembersBadRackplanValueLeavesNoConsumerThreadBehind() throws Exception {
    long before = liveThreads("consumer_background_thread");
    Map<String, Object> p = consumer("consumer");
    p.put("rackplan.plan.poll.ms", "-5");
    ConfigException e = assertThrows(ConfigException.class, () -> new RackplanConsumer<String, String>(p));
    assertTrue(e.getMessage().contains("rackplan.plan.poll.ms"), e.getMessage());
    Thread.sleep(500);
    assertEquals(before, liveThreads("consumer_background_thread"), "leaked background threads");
  }

  /**
   * KIP-848: the plan topic joins the member's subscription only to bump the group's epoch. Once the bumps
   * for a plan are over the member is back on the application's topics; otherwise another assignor (a
   * roll-back to uniform) would hand the plan topic to the application.
   */
  @Test
  void aKip848MemberLeavesThePlanTopicOnceItsBumpsAreOver() {
    Map<String, Object> p = consumer("consumer");
    p.put("rackplan.plan.poll.ms", "100");
    try (RackplanConsumer<String, String> c = new RackplanConsumer<>(p)) {
      c.subscribe(List.of("t"));
      // A plan that gives this member what it holds (nothing): one bump, then back.
      c.plans.apply("consumer/g", Fixtures.plan("g", 5, Fixtures.FP,
          Map.of("i-1", List.<TopicPartition>of(), "i-2", List.of(Fixtures.tp("t", 0)))));
      c.onPlan(c.plans.latest("consumer/g"));
      boolean bumped = false;
      long end = System.currentTimeMillis() + 8_000;
      while (System.currentTimeMillis() < end && !(bumped && c.subscription().equals(Set.of("t")))) {
        c.poll(Duration.ofMillis(100));
        bumped |= c.subscription().contains("_rackplan.plans");
      }
      assertTrue(bumped, "the plan bumped the epoch");
      assertEquals(Set.of("t"), c.subscription(), "subscription after the plan's bumps ended");
    }
  }
}
