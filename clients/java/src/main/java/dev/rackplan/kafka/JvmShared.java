package dev.rackplan.kafka;

import java.util.HashMap;
import java.util.Map;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One value per key in this JVM, made by the first {@link #acquire} and closed by the last {@link
 * #release}: the readers a broker-side assignor needs (plan and traffic consumers, an admin client,
 * their threads).
 *
 * <p>Why: a broker builds its configured assignors anew each time it builds a group coordinator
 * configuration, which it does at start-up and again on later configuration rebuilds, and it never
 * closes the instances it stops using. When each instance made its own readers, one broker of the
 * test cluster held 23 sets after twenty minutes (92 clients, each connected to every broker, 740
 * connections into that broker alone), and every set polled. Instances with the same configuration
 * now share one set; an instance never closed keeps only its reference.
 */
public final class JvmShared<V extends AutoCloseable> {
  private static final Logger LOG = LoggerFactory.getLogger(JvmShared.class);

  private static final class Held<V> {
    final V value;
    int references;

    Held(V value) {
      this.value = value;
    }
  }

  private final Map<Object, Held<V>> held = new HashMap<>();

  /** The value for ``key``, made by ``make`` if no live one exists; each call needs one {@link #release}. */
  public synchronized V acquire(Object key, Supplier<V> make) {
    Held<V> h = held.get(key);
    if (h == null) {
      h = new Held<>(make.get());
      held.put(key, h);
    }
    h.references++;
    return h.value;
  }

  /** One reference to ``key``'s value given back; the last one closes it. */
  public synchronized void release(Object key) {
    Held<V> h = held.get(key);
    if (h == null) return;
    if (--h.references > 0) return;
    held.remove(key);
    try {
      h.value.close();
    } catch (Exception e) {
      LOG.warn("rackplan: closing shared readers failed: {}", e.toString());
    }
  }

  /** Live values (for tests and the JMX view). */
  public synchronized int size() {
    return held.size();
  }
}
