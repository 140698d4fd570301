package dev.rackplan.it;

import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.streams.StreamsConfig;

/**
 * A Kafka Streams instance of a KIP-1071 Streams group ({@code group.protocol=streams}): the broker
 * assigns its tasks. The topology is {@link StreamsApp}'s (sub-topology 0 reads {@code inputTopic}
 * and repartitions by value, sub-topology 1 counts in the store {@code counts}).
 *
 * <p>Arguments: {@code bootstrap applicationId process rack stateDir inputTopic assignor [standbys]}:
 * before the instance starts, the group config {@code streams.num.standby.replicas} is set to
 * {@code standbys} (1) and, unless {@code assignor} is {@code -}, {@code streams.assignor.name}
 * (KIP-1357) to {@code assignor}. Every change of the instance's tasks is printed as one line
 * {@code {"process":"p","state":"RUNNING","active":[...],"standby":[...],"at_ms":...}}. It stops
 * when stdin closes.
 */
public final class StreamsGroupApp {
  private StreamsGroupApp() {}

  public static void main(String[] args) throws Exception {
    String bootstrap = args[0], appId = args[1], process = args[2], rack = args[3], stateDir = args[4];
    String input = args[5], assignor = args[6];
    int standbys = args.length > 7 ? Integer.parseInt(args[7]) : 1;
    // KIP-1071: the standbys and the assignor are the group's configs (the app's num.standby.replicas is ignored)
    List<AlterConfigOp> ops = new java.util.ArrayList<>();
    ops.add(new AlterConfigOp(new ConfigEntry("streams.num.standby.replicas", Integer.toString(standbys)), AlterConfigOp.OpType.SET));
    if (!assignor.equals("-"))
      ops.add(new AlterConfigOp(new ConfigEntry("streams.assignor.name", assignor), AlterConfigOp.OpType.SET));
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
      ConfigResource group = new ConfigResource(ConfigResource.Type.GROUP, appId);
      admin.incrementalAlterConfigs(Map.of(group, ops)).all().get(30, TimeUnit.SECONDS);
    }

    Properties p = new Properties();
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(StreamsConfig.CLIENT_ID_CONFIG, process);
    p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
    p.put(StreamsConfig.GROUP_PROTOCOL_CONFIG, "streams");
    p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, standbys);
    p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
    p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 3);
    p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 500);
    p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
    p.put("client.rack", rack); // a Streams group member's rack: the top-level client.rack (Kafka 4.4's StreamThread)

    StreamsApp.runPrinting(StreamsApp.topology(input), p, process, () -> "");
  }
}
