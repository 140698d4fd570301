package dev.rackplan.kafka;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Instant;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.kafka.streams.processor.TaskId;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsAssignment;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsAssignment.AssignedTask;
import org.apache.kafka.streams.processor.assignment.KafkaStreamsState;
import org.apache.kafka.streams.processor.assignment.ProcessId;
import org.apache.kafka.streams.processor.internals.StreamsLeaderState;
import org.junit.jupiter.api.Test;

/**
 * RackplanTaskAssignor's fallback equals what Kafka Streams assigns without a custom assignor
 * (HighAvailabilityTaskAssignor with its RackAwareTaskAssignor, or FallbackPriorTaskAssignor after a
 * failed lag fetch) on random leader states built by Kafka's own classes (StreamsLeaderState): the
 * fallback sees only the KIP-924 view, Kafka's assignor the internal state behind it.
 */
class HighAvailabilityParityTest {
  static final int STATES = 300;

  static Map<ProcessId, List<Set<TaskId>>> byClient(List<KafkaStreamsAssignment> out) {
    Map<ProcessId, List<Set<TaskId>>> m = new TreeMap<>();
    for (KafkaStreamsAssignment a : out) {
      Set<TaskId> active = new TreeSet<>(), standby = new TreeSet<>();
      for (AssignedTask t : a.tasks().values()) (t.type() == AssignedTask.Type.ACTIVE ? active : standby).add(t.id());
      m.put(a.processId(), List.of(active, standby));
    }
    return m;
  }

  /** No lag of the view is 0 or more and none is unknown: the case a failed lag fetch cannot be told from. */
  static boolean allRunning(StreamsLeaderState s) {
    for (KafkaStreamsState c : s.view.kafkaStreamsStates(true).values())
      for (long lag : c.statefulTasksToLagSums().values()) if (lag != HighAvailabilityFallback.LATEST_OFFSET) return false;
    return true;
  }

  @Test
  void equalsKafkasDefaultAssignmentOnRandomStates() {
    Map<String, Integer> seen = new TreeMap<>();
    int rackAwareUsed = 0;
    for (long seed = 1; seed <= STATES; seed++) {
      StreamsLeaderState s = StreamsLeaderState.random(seed);
      Instant before = Instant.now();
      HighAvailabilityFallback.Result mine = HighAvailabilityFallback.assign(s.view);
      StreamsLeaderState.Assignment kafka = s.kafkaDefault();
      String where = "seed " + seed + " (" + s.summary + ")";
      assertEquals(kafka.tasks(), byClient(mine.assignment()), where);
      if (!(s.lagFetchFailed && allRunning(s))) {
        assertEquals(kafka.assignor(), mine.assignor(), where);
        assertEquals(kafka.probing(), mine.probing(), where);
      }
      for (KafkaStreamsAssignment a : mine.assignment()) {
        assertEquals(mine.probing(), a.followupRebalanceDeadline().isPresent(), where);
        a.followupRebalanceDeadline().ifPresent(d -> assertFalse(
            d.isBefore(before.plusMillis(s.configs.probingRebalanceIntervalMs() - 1_000)), where));
      }
      seen.merge(mine.assignor() + (mine.probing() ? "+probing" : ""), 1, Integer::sum);
      if (kafka.rackAware()) rackAwareUsed++;
    }
    // The random states reach every path: both of Kafka's assignors, with and without a probing rebalance.
    assertTrue(seen.keySet().containsAll(Set.of("HighAvailabilityTaskAssignor", "HighAvailabilityTaskAssignor+probing",
        "FallbackPriorTaskAssignor+probing")), seen.toString());
    assertTrue(rackAwareUsed > STATES / 4, "states Kafka optimised rack-aware: " + rackAwareUsed);
  }

  @Test
  void neverPutsATasksActiveAndStandbyOnOneClientAndEveryTaskIsActiveOnce() {
    for (long seed = 1; seed <= STATES; seed++) {
      StreamsLeaderState s = StreamsLeaderState.random(seed);
      RackplanTaskAssignor a = RackplanTaskAssignor.forTest("parity", new PlanStore(), 60_000);
      List<KafkaStreamsAssignment> out = List.copyOf(a.assign(s.view).assignment());
      Map<TaskId, Integer> actives = new HashMap<>();
      for (KafkaStreamsAssignment x : out) {
        Set<TaskId> active = new TreeSet<>(), standby = new TreeSet<>();
        for (AssignedTask t : x.tasks().values()) {
          (t.type() == AssignedTask.Type.ACTIVE ? active : standby).add(t.id());
          if (t.type() == AssignedTask.Type.ACTIVE) actives.merge(t.id(), 1, Integer::sum);
        }
        active.retainAll(standby);
        assertTrue(active.isEmpty(), "seed " + seed + ": active and standby of " + active + " on " + x.processId());
        assertTrue(x.followupRebalanceDeadline().isPresent(), "rackplan's follow-up");
      }
      assertEquals(s.view.allTasks().keySet(), actives.keySet(), "seed " + seed);
      assertTrue(actives.values().stream().allMatch(n -> n == 1), "seed " + seed);
      assertTrue(a.lastFallbackAssignor.endsWith("TaskAssignor") && !a.lastFallbackAssignor.contains("Sticky"),
          a.lastFallbackAssignor);
    }
  }
}
