package dev.rackplan.kafka;

import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A count of one assignor instance's events that also adds to the JVM's total under its name: the
 * total is what the JMX beans show.
 *
 * <p>Why both: a broker builds its configured assignors again on every group coordinator
 * configuration rebuild and assigns with whichever instance it holds then, while the JMX name
 * ({@code dev.rackplan:type=RackplanServerAssignor}) can be registered once per JVM. A bean reading
 * one instance's counters stops moving as soon as the broker assigns with another; the JVM's totals
 * count every instance's assignments, and never go backwards (a monitoring counter), whichever
 * instance the broker keeps. The instance's own count stays for its tests.
 */
public final class Tally {
  private static final Map<String, AtomicLong> TOTALS = new ConcurrentHashMap<>();

  private final AtomicLong mine = new AtomicLong();
  private final AtomicLong total;

  /** A count adding to the JVM's total ``name``. */
  public Tally(String name) {
    total = TOTALS.computeIfAbsent(name, k -> new AtomicLong());
  }

  /** One more event: this instance's count and the JVM's total. */
  public void add() {
    mine.incrementAndGet();
    total.incrementAndGet();
  }

  /** This instance's count. */
  public long get() {
    return mine.get();
  }

  /** The JVM's total ``name``: every instance's events (0 before any). */
  public static long total(String name) {
    AtomicLong t = TOTALS.get(name);
    return t == null ? 0 : t.get();
  }

  /** The JVM's totals whose names start with ``prefix``, by the rest of the name (sorted). */
  public static Map<String, Long> totals(String prefix) {
    Map<String, Long> out = new TreeMap<>();
    for (Map.Entry<String, AtomicLong> e : TOTALS.entrySet())
      if (e.getKey().startsWith(prefix)) out.put(e.getKey().substring(prefix.length()), e.getValue().get());
    return out;
  }
}
