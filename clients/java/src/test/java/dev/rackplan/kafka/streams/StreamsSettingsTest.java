package dev.rackplan.kafka.streams;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.rackplan.kafka.RackplanServerAssignor;
import java.util.Map;
import org.apache.kafka.common.config.ConfigException;
import org.junit.jupiter.api.Test;

/**
 * The broker plugins' settings (docs/java.md, "Settings": an unknown {@code rackplan.*} key or a bad value
 * is refused, naming the key). Found by a hunt: each plugin checked only part of the settings the other
 * reads from the same broker properties.
 */
class StreamsSettingsTest {

  /**
   * Without {@code rackplan.bootstrap.servers} the Streams plugin builds no RackplanConfig, so nothing
   * else of {@code rackplan.*} is checked: a broker whose only rackplan plugin is the Streams one, with
   * the key mistyped, starts with a WARN and hands every group to Kafka's sticky (the KIP-848 plugin
   * refuses the same properties).
   */
  @Test
  void theStreamsPluginRefusesAMistypedKeyEvenWithoutBootstrap() {
    for (Map<String, String> bad : java.util.List.of(
        Map.of("rackplan.bootstrap.server", "broker-1:9092"),
        Map.of("rackplan.traffic.max.age.ms", "soon"),
        Map.of("rackplan.plan.topic.pattern", "(("))) {
      ConfigException e = assertThrows(ConfigException.class,
          () -> new RackplanStreamsTaskAssignor(new StreamsCatalog(), null).configure(bad), "accepted " + bad);
      assertTrue(e.getMessage().contains(bad.keySet().iterator().next()), e.getMessage());
    }
  }

  /**
   * The KIP-848 plugin, configured with the same broker properties, accepts the Streams settings' bad
   * values ({@code rackplan.streams.strategy}, {@code rackplan.streams.refresh.ms}) that the Streams
   * plugin refuses: RackplanConfig knows the keys but checks neither value.
   */
  @Test
  void theKip848PluginRefusesBadStreamsSettingsAsTheStreamsPluginDoes() {
    for (Map<String, String> bad : java.util.List.of(
        Map.of("rackplan.streams.strategy", "fastest"),
        Map.of("rackplan.streams.refresh.ms", "0"))) {
      assertThrows(ConfigException.class, () -> new RackplanStreamsTaskAssignor(new StreamsCatalog(), null).configure(bad));
      RackplanServerAssignor a = new RackplanServerAssignor();
      try {
        assertThrows(ConfigException.class, () -> a.configure(bad), "RackplanServerAssignor accepted " + bad);
      } finally {
        a.close();
      }
    }
  }
}
