package dev.rackplan.kafka.streams;

/**
 * A Streams task as the broker names it: sub-topology id and partition. Ordered by sub-topology
 * (numerically when both ids are numbers, as Kafka numbers them) then partition, so every loop over
 * tasks, and so the assignment, is deterministic.
 */
public record Task(String subtopology, int partition) implements Comparable<Task> {
  @Override
  public int compareTo(Task o) {
    int c = compareIds(subtopology, o.subtopology);
    return c != 0 ? c : Integer.compare(partition, o.partition);
  }

  static int compareIds(String a, String b) {
    boolean na = a.chars().allMatch(Character::isDigit) && !a.isEmpty() && a.length() < 10;
    boolean nb = b.chars().allMatch(Character::isDigit) && !b.isEmpty() && b.length() < 10;
    if (na && nb) return Integer.compare(Integer.parseInt(a), Integer.parseInt(b));
    if (na != nb) return na ? -1 : 1;
    return a.compareTo(b);
  }

  @Override
  public String toString() {
    return subtopology + "_" + partition;
  }
}
