package dev.rackplan.kafka;

import java.util.Arrays;
import java.util.List;

/**
 * Partition bytes/s as the prices of {@link RackStickyBalancer}'s convex edges (pure, no Kafka types).
 *
 * <p>Why runs: in a partition class that may go both to member classes in its replicas' racks and to
 * others, only <em>how many</em> of its partitions cross is a flow decision; <em>which</em> cross is
 * not: the lightest should. So the class's crossing units cost its partitions' bytes/s in ascending
 * order, a convex cost, and partitions of one weight level form one run (one augmenting path can move
 * a whole run). Weights are quantised to {@code q} levels of the heaviest partition's bytes/s: {@code
 * q} is at most 2^20 (exact up to a millionth of the heaviest partition), lower when the prices would
 * come near a long's range, and halved while the runs number more than {@link #MAX_RUNS} (a bound on
 * the augmenting paths on the coordinator's thread: traffic then weighs in coarser levels).
 */
final class TrafficRuns {
  private TrafficRuns() {}

  /** Runs over all convex edges at most (the quantum count is halved until they fit). */
  static final int MAX_RUNS = 4096;

  static final int MAX_QUANTA = 1 << 20;

  /**
   * The partitions ({@code topic << 32 | partition}) of a class, lightest first, ties by their order in
   * {@code parts} (topic, partition). Sorted as primitive keys, the weight as a float (its bits order
   * non-negative floats) above the position: weights within a float's precision (about 6e-8 of each
   * other, far below a level) count as equal.
   */
  static long[] lightestFirst(long[] parts, int size, double[][] weight) {
    long[] keys = new long[size];
    for (int i = 0; i < size; i++) keys[i] = ((long) Float.floatToIntBits((float) weightOf(weight, parts[i])) << 32) | i;
    Arrays.sort(keys);
    long[] out = new long[size];
    for (int i = 0; i < size; i++) out[i] = parts[(int) keys[i]];
    return out;
  }

  static double weightOf(double[][] weight, long part) {
    return weight[(int) (part >>> 32)][(int) part];
  }

  /** A weight's level among {@code q} of {@code max}. */
  static long level(double w, double max, int q) {
    return max <= 0 ? 0 : Math.round(w / max * q);
  }

  /**
   * The quantum count: at most {@link #MAX_QUANTA}, with {@code q x scale x (nodes + 2)} far below a
   * long's range (path costs sum at most that many prices), and at most {@link #MAX_RUNS} runs; 0 when
   * even one level would overflow (the caller weighs without traffic).
   */
  static int quanta(List<long[]> classes, double[][] weight, double max, long scale, int nodes) {
    long room = Long.MAX_VALUE / 8 / Math.max(1, scale) / (nodes + 2L);
    if (room < 1) return 0;
    int q = (int) Math.min(MAX_QUANTA, room);
    while (q > 1 && runCount(classes, weight, max, q) > MAX_RUNS) q >>= 1;
    return q;
  }

  static long runCount(List<long[]> classes, double[][] weight, double max, int q) {
    long n = 0;
    for (long[] sorted : classes) {
      long last = -1;
      for (long part : sorted) {
        long l = level(weightOf(weight, part), max, q);
        if (l != last) n++;
        last = l;
      }
    }
    return n;
  }

  /** {levels, counts} of a class's runs, lightest first. */
  static long[][] runs(long[] sorted, double[][] weight, double max, int q) {
    long[] levels = new long[sorted.length];
    long[] counts = new long[sorted.length];
    int n = 0;
    for (long part : sorted) {
      long l = level(weightOf(weight, part), max, q);
      if (n > 0 && levels[n - 1] == l) counts[n - 1]++;
      else {
        levels[n] = l;
        counts[n++] = 1;
      }
    }
    return new long[][] {Arrays.copyOf(levels, n), Arrays.copyOf(counts, n)};
  }
}
