package dev.rackplan.oracle;

import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.util.function.Supplier;

/**
 * Wall and thread-CPU time of assignor calls, for the benchmarks (the oracle's
 * {@code oracle_*} output fields; see {@link Oracle}).
 *
 * <p>CPU is {@link ThreadMXBean#getCurrentThreadCpuTime}: the calling thread
 * only, so the JIT compiler's and the garbage collector's threads are not in it
 * (the benchmark reads the whole JVM's CPU from outside when it needs it). On a
 * JVM without thread CPU time it reads -1.
 */
final class Clock {
    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();

    private long wall;
    private long cpu;

    private Clock() {
    }

    static long threadCpu() {
        return THREADS.isCurrentThreadCpuTimeSupported() ? THREADS.getCurrentThreadCpuTime() : -1L;
    }

    /** A clock started now; {@link #stop()} turns it into the elapsed times. */
    static Clock start() {
        Clock c = new Clock();
        c.cpu = threadCpu();
        c.wall = System.nanoTime();
        return c;
    }

    void stop() {
        wall = System.nanoTime() - wall;
        long now = threadCpu();
        cpu = cpu < 0 || now < 0 ? -1L : now - cpu;
    }

    /** {@code oracle_first_ns} and {@code oracle_first_cpu_ns}: the call that made the answer. */
    void report(ObjectNode out) {
        out.put("oracle_first_ns", wall);
        out.put("oracle_first_cpu_ns", cpu);
    }

    /**
     * {@code repeat} more timed calls: {@code prepare} builds each call's fresh input (untimed) and
     * returns the call; adds {@code oracle_timing_ns} and {@code oracle_cpu_ns} when {@code repeat > 0}.
     */
    static void repeat(ObjectNode out, int repeat, Supplier<Runnable> prepare) {
        if (repeat <= 0)
            return;
        ArrayNode timing = out.putArray("oracle_timing_ns");
        ArrayNode cpus = out.putArray("oracle_cpu_ns");
        for (int i = 0; i < repeat; i++) {
            Runnable call = prepare.get();
            Clock c = start();
            call.run();
            c.stop();
            timing.add(c.wall);
            cpus.add(c.cpu);
        }
    }
}
