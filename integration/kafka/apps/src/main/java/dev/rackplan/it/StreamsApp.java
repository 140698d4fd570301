package dev.rackplan.it;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;

/**
 * A Kafka Streams instance: {@code input} re-keyed by value (a repartition), counted in a state store.
 *
 * <p>Arguments: {@code bootstrap applicationId processId rack stateDir inputTopic [standbys] [strategy]
 * [planTopic [registrationsTopic]]}; with a plan topic, tasks are assigned by rackplan's {@code
 * RackplanTaskAssignor} (clients/java), which looks at the plan topic again every 3 s (KIP-924
 * follow-up rebalances) and, at the group leader, registers the app's clients on the registrations
 * topic. Lines then also carry {@code plan_assignments} and {@code fallback} (which of Kafka's
 * assignors the JVM's newest fallback ran).
 * Sub-topology 0 reads {@code inputTopic} and writes the repartition topic; sub-topology 1 reads the
 * repartition topic and keeps the store {@code counts} (changelog {@code <app>-counts-changelog}).
 * Every change of the instance's tasks is printed as one line
 * {@code {"process":"p","state":"RUNNING","active":["0_1",...],"standby":[...],"at_ms":...}}.
 * It stops when stdin closes.
 */
public final class StreamsApp {
  private StreamsApp() {}

  static String list(TreeSet<String> ids) {
    List<String> quoted = new ArrayList<>();
    for (String id : ids) quoted.add("\"" + id + "\"");
    return "[" + String.join(",", quoted) + "]";
  }

  public static void main(String[] args) throws Exception {
    String bootstrap = args[0], appId = args[1], process = args[2], rack = args[3], stateDir = args[4];
    String input = args[5];
    int standbys = args.length > 6 ? Integer.parseInt(args[6]) : 1;
    String strategy = args.length > 7 ? args[7] : StreamsConfig.RACK_AWARE_ASSIGNMENT_STRATEGY_BALANCE_SUBTOPOLOGY;

    Properties p = new Properties();
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(StreamsConfig.CLIENT_ID_CONFIG, process);
    p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
    p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, standbys);
    p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
    p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 3);
    p.put(StreamsConfig.RACK_AWARE_ASSIGNMENT_STRATEGY_CONFIG, strategy);
    p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 500);
    p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
    p.put(StreamsConfig.consumerPrefix("client.rack"), rack);
    p.put(StreamsConfig.consumerPrefix("session.timeout.ms"), 10000);
    p.put(StreamsConfig.consumerPrefix("heartbeat.interval.ms"), 1000);
    if (args.length > 8) {
      p.put(StreamsConfig.TASK_ASSIGNOR_CLASS_CONFIG, "dev.rackplan.kafka.RackplanTaskAssignor");
      p.put("rackplan.plan.topic", args[8]);
      p.put("rackplan.streams.followup.ms", "3000");
      if (args.length > 9) p.put("rackplan.registrations.topic", args[9]);
    }

    runPrinting(topology(input), p, process, () -> args.length > 8
        ? ",\"plan_assignments\":" + dev.rackplan.kafka.RackplanTaskAssignor.planAssignments()
            + ",\"fallback\":\"" + dev.rackplan.kafka.RackplanTaskAssignor.lastFallback() + "\""
        : "");
  }

  /** The app: {@code input} re-keyed by value (a repartition), counted in the store {@code counts}. */
  static Topology topology(String input) {
    StreamsBuilder builder = new StreamsBuilder();
    builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
        .groupBy((k, v) -> v, Grouped.with("by-value", Serdes.String(), Serdes.String()))
        .count(Materialized.as("counts"));
    return builder.build();
  }

  /**
   * Runs {@code topology} with {@code p} until stdin closes, printing every change of the instance's
   * tasks as one JSON line (with {@code extra} fields, a string starting with a comma or empty).
   */
  static void runPrinting(Topology topology, Properties p, String process, Supplier<String> extra) throws Exception {
    AtomicBoolean stop = new AtomicBoolean(false);
    Thread stdin = new Thread(() -> {
      try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
        while (r.readLine() != null) { /* EOF stops */ }
      } catch (Exception ignored) {
        // a closed pipe is a stop too
      }
      stop.set(true);
    });
    stdin.setDaemon(true);
    stdin.start();

    try (KafkaStreams streams = new KafkaStreams(topology, p)) {
      streams.start();
      String last = "";
      while (!stop.get()) {
        TreeSet<String> active = new TreeSet<>();
        TreeSet<String> standby = new TreeSet<>();
        for (ThreadMetadata t : streams.metadataForLocalThreads()) {
          for (TaskMetadata task : t.activeTasks()) active.add(task.taskId().toString());
          for (TaskMetadata task : t.standbyTasks()) standby.add(task.taskId().toString());
        }
        String line = "{\"process\":\"" + process + "\",\"state\":\"" + streams.state() + "\",\"active\":"
            + list(active) + ",\"standby\":" + list(standby) + extra.get();
        if (!line.equals(last)) {
          System.out.println(line + ",\"at_ms\":" + System.currentTimeMillis() + "}");
          System.out.flush();
          last = line;
        }
        Thread.sleep(200);
      }
    }
  }
}
