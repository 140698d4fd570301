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

  /**
   * Numeric ids (1 to 9 digits) first, in numeric order, then the others in string order. Called on
   * every comparison of the assignment's sorted sets and maps, so a plain loop, and the same id (the
   * common case: tasks of one sub-topology) answered at once.
   */
  static int compareIds(String a, String b) {
    if (a.equals(b)) return 0;
    boolean na = isNumber(a);
    boolean nb = isNumber(b);
    if (na && nb) return Integer.compare(Integer.parseInt(a), Integer.parseInt(b));
    if (na != nb) return na ? -1 : 1;
    return a.compareTo(b);
  }

  private static boolean isNumber(String s) {
    int n = s.length();
    if (n == 0 || n >= 10) return false;
    for (int i = 0; i < n; i++) if (!Character.isDigit(s.charAt(i))) return false;
    return true;
  }

  /**
   * The record's own hash is {@code 31 * subtopology's + partition}: sub-topologies "0", "1", ... hash
   * 31 apart, so a group of ten sub-topologies of 200 partitions fell into about 500 hash values, and
   * every map keyed by task walked chains (a fifth of a large group's assignment on the broker). Here
   * two tasks of different sub-topologies collide only if their partitions are 65,537 or more apart.
   */
  @Override
  public int hashCode() {
    return subtopology.hashCode() * 65_537 + partition;
  }

  @Override
  public String toString() {
    return subtopology + "_" + partition;
  }
}
