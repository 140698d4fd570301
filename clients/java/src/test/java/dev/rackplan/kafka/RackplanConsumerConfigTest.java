package dev.rackplan.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Map;
import org.apache.kafka.clients.consumer.ConsumerConfig;
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
}
