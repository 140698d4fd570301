package dev.rackplan.kafka;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Each partition's replica racks as a small id into a table of distinct rack sets (bit sets of rack
 * indexes, any number of racks): partitions share few distinct sets, and the balance only asks whether
 * a rack is in a partition's set. A set with no bit is "unknown": nobody reads it across racks.
 *
 * <p>Why not a {@code long} per partition: that holds 64 racks, and a cluster with a rack per broker
 * has more; the balancer then had to decline the group (Kafka's rack-blind {@code uniform} assigned).
 */
final class RackMasks {
  /** Per topic, per partition, the id of its rack set. */
  final int[][] idOf;
  /** Per id, its rack set's words (bit r of word r / 64 is rack r), no trailing zero word. */
  final long[][] words;

  private RackMasks(int[][] idOf, long[][] words) {
    this.idOf = idOf;
    this.words = words;
  }

  int kinds() {
    return words.length;
  }

  /** Whether rack {@code rack} holds a replica of set {@code id}. */
  boolean has(int id, int rack) {
    long[] w = words[id];
    return rack >= 0 && (rack >> 6) < w.length && (w[rack >> 6] & (1L << (rack & 63))) != 0;
  }

  /** The racks of set {@code id}, ascending (none: unknown). */
  int[] racks(int id) {
    long[] w = words[id];
    int n = 0;
    for (long x : w) n += Long.bitCount(x);
    int[] out = new int[n];
    n = 0;
    for (int i = 0; i < w.length; i++)
      for (long x = w[i]; x != 0; x &= x - 1) out[n++] = i * 64 + Long.numberOfTrailingZeros(x);
    return out;
  }

  /** Whether a member of rack {@code rack} (-1: none) reads set {@code id} from another rack (unknown set: no). */
  boolean isCross(int rack, int id) {
    return rack >= 0 && words[id].length > 0 && !has(id, rack);
  }

  /** From one bit mask per partition (racks 0-63), as the balancer's tests give them. */
  static RackMasks of(long[][] rackMask) {
    Builder b = new Builder(rackMask.length);
    long[] one = new long[1];
    for (int t = 0; t < rackMask.length; t++) {
      b.topic(t, rackMask[t].length);
      for (int p = 0; p < rackMask[t].length; p++) {
        one[0] = rackMask[t][p];
        b.partition(t, p, one, 1);
      }
    }
    return b.build();
  }

  /** Interns rack sets given as words, partition by partition; the same set twice in a row costs a comparison. */
  static final class Builder {
    private final int[][] idOf;
    private final List<long[]> sets = new ArrayList<>();
    private final Map<Long, int[]> byHash = new HashMap<>();
    private int lastId = -1;

    Builder(int topics) {
      idOf = new int[topics][];
    }

    void topic(int t, int partitions) {
      idOf[t] = new int[partitions];
    }

    /** Partition p of topic t has the rack set {@code w[0, len)} (trailing zero words allowed). */
    void partition(int t, int p, long[] w, int len) {
      while (len > 0 && w[len - 1] == 0) len--;
      if (lastId >= 0 && same(sets.get(lastId), w, len)) {
        idOf[t][p] = lastId;
        return;
      }
      for (int i = 0; i < Math.min(16, sets.size()); i++) // few distinct sets in most groups: a scan, no hashing
        if (same(sets.get(i), w, len)) {
          idOf[t][p] = lastId = i;
          return;
        }
      long h = len;
      for (int i = 0; i < len; i++) h = h * 1_000_003L ^ w[i];
      int[] ids = byHash.get(h);
      int id = -1;
      for (int i = 0; ids != null && i < ids.length && id < 0; i++) if (same(sets.get(ids[i]), w, len)) id = ids[i];
      if (id < 0) {
        id = sets.size();
        sets.add(Arrays.copyOf(w, len));
        int[] grown = ids == null ? new int[1] : Arrays.copyOf(ids, ids.length + 1);
        grown[grown.length - 1] = id;
        byHash.put(h, grown);
      }
      idOf[t][p] = lastId = id;
    }

    private static boolean same(long[] a, long[] w, int len) {
      return a.length == len && Arrays.equals(a, 0, len, w, 0, len);
    }

    /** The table, its racks renumbered by {@code renumber[old] = new} (null: as given). */
    RackMasks build(int[] renumber) {
      long[][] words = sets.toArray(new long[0][]);
      if (renumber != null)
        for (int id = 0; id < words.length; id++) {
          long[] out = new long[0];
          long[] w = words[id];
          for (int r = 0; r < w.length * 64; r++) {
            if ((w[r >> 6] & (1L << (r & 63))) == 0) continue;
            int n = renumber[r];
            if ((n >> 6) >= out.length) out = Arrays.copyOf(out, (n >> 6) + 1);
            out[n >> 6] |= 1L << (n & 63);
          }
          words[id] = out;
        }
      return new RackMasks(idOf, words);
    }

    RackMasks build() {
      return build(null);
    }
  }
}
