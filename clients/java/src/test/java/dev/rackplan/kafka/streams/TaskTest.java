package dev.rackplan.kafka.streams;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** Tasks' order (numeric sub-topology ids first, numerically) and hash (no chains on a grid of tasks). */
class TaskTest {
  @Test
  void numericIdsComeFirstInNumericOrderThenTheOthersAsStrings() {
    List<String> ids = List.of("0", "2", "10", "123456789", "1234567890", "a", "b-1", "");
    List<Task> sorted = new ArrayList<>();
    for (String id : List.of("b-1", "10", "", "1234567890", "a", "0", "123456789", "2")) sorted.add(new Task(id, 0));
    sorted.sort(null);
    List<String> got = new ArrayList<>();
    for (Task t : sorted) got.add(t.subtopology());
    // "1234567890" has ten digits: ordered as a string, with "" and the names
    assertEquals(List.of("0", "2", "10", "123456789", "", "1234567890", "a", "b-1"), got);
    assertTrue(new Task("3", 7).compareTo(new Task("3", 8)) < 0);
    assertEquals(0, new Task("3", 7).compareTo(new Task(new String("3"), 7)));
    assertEquals(ids.size(), new HashSet<>(ids).size());
  }

  @Test
  void aGridOfSubtopologiesAndPartitionsHashesWithoutCollisions() {
    Set<Integer> hashes = new HashSet<>();
    int n = 0;
    for (int s = 0; s < 100; s++)
      for (int p = 0; p < 1_000; p++) {
        hashes.add(new Task(Integer.toString(s), p).hashCode());
        n++;
      }
    assertEquals(n, hashes.size());
    assertEquals(new Task("x", 3).hashCode(), new Task(new String("x"), 3).hashCode());
  }
}
