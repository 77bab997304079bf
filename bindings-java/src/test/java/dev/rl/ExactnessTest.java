package dev.rl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * 32 threads offer 3x the limit on one key, spread evenly over 3 windows; the most admitted in any
 * window span (t - window, t], computed from the decisions' own Redis times, is exactly the limit.
 */
class ExactnessTest {
    static final int THREADS = 32;
    static final long LIMIT = 500;
    static final long WINDOW_MS = 1000;
    static final int WINDOWS = 3;

    interface Call {
        void offer(RateLimiter l, String key, ConcurrentLinkedQueue<Decision> out, List<CompletableFuture<Decision>> pending);
    }

    @Test
    void syncAcquire() throws Exception {
        run("sync", (l, key, out, pending) -> out.add(l.acquire(key, LIMIT, WINDOW_MS)));
    }

    @Test
    void asyncAcquire() throws Exception {
        run("async", (l, key, out, pending) -> pending.add(l.acquireAsync(key, LIMIT, WINDOW_MS).whenComplete((d, e) -> {
            if (d != null) {
                out.add(d);
            }
        })));
    }

    private void run(String what, Call call) throws Exception {
        String key = TestSupport.key("exact-" + what);
        long offersPerThread = 3 * LIMIT * WINDOWS / THREADS;
        long durationNanos = TimeUnit.MILLISECONDS.toNanos(WINDOW_MS * WINDOWS);
        ConcurrentLinkedQueue<Decision> decisions = new ConcurrentLinkedQueue<>();
        List<CompletableFuture<Decision>> pending = new java.util.concurrent.CopyOnWriteArrayList<>();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        try (RateLimiter limiter = TestSupport.redis().build()) {
            limiter.ping();
            CountDownLatch go = new CountDownLatch(1);
            List<Thread> threads = new ArrayList<>();
            long start = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(50);
            for (int t = 0; t < THREADS; t++) {
                final int id = t;
                Thread th = new Thread(() -> {
                    try {
                        go.await();
                        for (long i = 0; i < offersPerThread; i++) {
                            // Paced: each thread spreads its offers evenly, threads interleaved.
                            TestSupport.sleepUntil(start + (i * THREADS + id) * durationNanos / (offersPerThread * THREADS));
                            call.offer(limiter, key, decisions, pending);
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                });
                th.start();
                threads.add(th);
            }
            go.countDown();
            for (Thread th : threads) {
                th.join(60_000);
            }
            CompletableFuture.allOf(pending.toArray(new CompletableFuture<?>[0])).get(30, TimeUnit.SECONDS);
        }
        if (failure.get() != null) {
            throw new AssertionError(failure.get());
        }
        long offered = offersPerThread * THREADS;
        assertEquals(offered, decisions.size());
        List<long[]> admitted = new ArrayList<>();
        for (Decision d : decisions) {
            assertEquals("normal", d.mode());
            if (d.allowed()) {
                admitted.add(new long[] {d.nowMs(), 1});
                assertTrue(d.used() <= LIMIT, d.toString());
            }
        }
        long max = TestSupport.maxInAnyWindow(admitted, WINDOW_MS);
        System.out.printf("ExactnessTest(%s): %d threads offered %d over %d windows of %d ms (limit %d): admitted %d, "
                + "max in any window %d%n", what, THREADS, offered, WINDOWS, WINDOW_MS, LIMIT, admitted.size(), max);
        assertEquals(LIMIT, max, "max admitted in any window");
        // Three windows' worth: at least the first window's limit and at most one limit per started window.
        assertTrue(admitted.size() >= 2 * LIMIT && admitted.size() <= (WINDOWS + 1) * LIMIT, "admitted " + admitted.size());
    }
}
