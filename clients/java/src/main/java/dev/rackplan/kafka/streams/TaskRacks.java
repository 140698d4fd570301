package dev.rackplan.kafka.streams;

/**
 * What placing a task in a rack costs in cross-rack reads (KIP-925's traffic cost): the number of
 * the task's topic partitions with no replica in that rack. A null rack, or a partition whose
 * replicas' racks are unknown, never counts (nothing is known to cross).
 */
public interface TaskRacks {
  /** Source and changelog partitions of {@code task} read across racks by an active in {@code rack}. */
  int activeCross(Task task, String rack);

  /** Changelog partitions of {@code task} read across racks by a standby in {@code rack}. */
  int standbyCross(Task task, String rack);

  /**
   * The bytes/s of each partition {@link #activeCross} counts (the same partitions, in any order): what
   * an active in {@code rack} reads across racks by the agent's traffic. Empty when no traffic is
   * weighed, and then the assignment is exactly the count-only one.
   */
  default double[] activeCrossBytes(Task task, String rack) {
    return NO_BYTES;
  }

  /** No traffic weighed. */
  double[] NO_BYTES = new double[0];

  /** Nothing known: every placement costs nothing, so only stickiness and balance decide. */
  TaskRacks NONE = new TaskRacks() {
    @Override public int activeCross(Task task, String rack) { return 0; }
    @Override public int standbyCross(Task task, String rack) { return 0; }
  };
}
