package dev.rl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** close(), use after close, close racing with calls, and panics: exceptions, never a crash. */
class LifecycleTest {

    @ParameterizedTest
    @ValueSource(strings = {"redis", "memory"})
    void everyCallAfterCloseIsIllegalState(String backend) {
        RateLimiter l = BasicTest.open(backend);
        l.acquire("k", 1, 1000);
        l.close();
        l.close(); // twice is fine
        assertTrue(l.isClosed());
        List<Executable> calls = List.of(
                () -> l.acquire("k", 1, 1000),
                () -> l.acquire("k", 1, 1000, 1),
                () -> l.acquire(new byte[] {1}, 1, 1000),
                () -> l.acquireAsync("k", 1, 1000),
                () -> l.acquireAsync(new byte[] {1}, 1, 1000, 1),
                () -> l.tryAcquire("k", 1000, 1),
                () -> l.tryAcquireAsync("k", 1000, 1),
                () -> l.peek("k", 1, 1000),
                () -> l.peekAsync("k", 1, 1000),
                () -> l.reset("k"),
                () -> l.resetAsync("k"),
                () -> l.ping(),
                () -> l.stats(),
                () -> l.redisKey("k"));
        for (Executable call : calls) {
            IllegalStateException e = assertThrows(IllegalStateException.class, call);
            assertEquals("the RateLimiter is closed", e.getMessage());
        }
        // Argument errors are still reported as such... only if the limiter is open: a closed one says so first.
        assertThrows(IllegalStateException.class, () -> l.acquire(new byte[0], 0, 0));
    }

    @Test
    void nativeNullHandleIsIllegalStateToo() {
        // Below the Java guard: the native side refuses handle 0 by itself.
        assertThrows(IllegalStateException.class, () -> Native.acquire(0, new byte[] {1}, 1, 1000, 1));
        assertThrows(IllegalStateException.class, () -> Native.ping(0));
        assertThrows(IllegalStateException.class, () -> Native.acquireAsync(0, new byte[] {1}, 1, 1000, 1, new CompletableFuture<>()));
        Native.close(0); // a no-op
    }

    /**
     * 16 threads hammer one limiter (sync and async) while it is closed under them: each call
     * either completes (a decision, or a RateLimitException if the loaded machine makes Redis
     * slower than the timeout) or throws IllegalStateException; no crash, no other error, and every
     * future that was handed out completes.
     */
    @ParameterizedTest
    @ValueSource(strings = {"redis", "memory"})
    void closeRacingWithCalls(String backend) throws Exception {
        for (int round = 0; round < (backend.equals("redis") ? 5 : 50); round++) {
            RateLimiter l = BasicTest.open(backend);
            CountDownLatch started = new CountDownLatch(16);
            AtomicReference<Throwable> unexpected = new AtomicReference<>();
            AtomicLong ok = new AtomicLong();
            AtomicLong refused = new AtomicLong();
            List<Thread> threads = new ArrayList<>();
            for (int t = 0; t < 16; t++) {
                final boolean async = t % 2 == 0;
                Thread th = new Thread(() -> {
                    started.countDown();
                    try {
                        hammer(l, async, ok, refused);
                    } catch (Throwable e) {
                        unexpected.compareAndSet(null, e);
                    }
                });
                th.start();
                threads.add(th);
            }
            started.await();
            Thread.sleep(round % 3);
            l.close();
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            for (Thread th : threads) {
                th.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime())));
                assertFalse(th.isAlive(), "a thread still runs 30 s after the close: a call hung (round " + round + ")");
            }
            if (unexpected.get() != null) {
                throw new AssertionError("unexpected failure", unexpected.get());
            }
            assertTrue(ok.get() + refused.get() > 0);
        }
    }

    /** Calls until the limiter is closed (IllegalStateException) or 10,000 calls are done. */
    private static void hammer(RateLimiter l, boolean async, AtomicLong ok, AtomicLong refused) {
        List<CompletableFuture<Decision>> mine = new ArrayList<>();
        try {
            for (int i = 0; i < 10_000; i++) {
                try {
                    if (async) {
                        mine.add(l.acquireAsync("race", 1_000_000, 60_000));
                        if (mine.size() == 32) { // bounded in flight, like a real caller
                            settle(mine);
                        }
                    } else {
                        l.acquire("race", 1_000_000, 60_000);
                    }
                    ok.incrementAndGet();
                } catch (IllegalStateException e) {
                    refused.incrementAndGet();
                    return;
                } catch (RateLimitException e) {
                    ok.incrementAndGet(); // Redis slower than the timeout on a loaded machine: a legitimate answer
                }
            }
        } finally {
            settle(mine); // every call that got in completes
        }
    }

    /** Waits for each future: a decision or a RateLimitException; anything else fails the test. */
    private static void settle(List<CompletableFuture<Decision>> futures) {
        for (CompletableFuture<Decision> f : futures) {
            try {
                f.get(10, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                if (!(e.getCause() instanceof RateLimitException)) {
                    throw new AssertionError("a future failed unexpectedly", e.getCause());
                }
            } catch (Exception e) {
                throw new AssertionError("a future did not complete", e);
            }
        }
        futures.clear();
    }

    /**
     * Limiters dropped without close() are freed by the Cleaner, native side and Redis connection
     * both: the connections 20 dropped Redis limiters made leave Redis once the GC has run. (2000
     * dropped memory limiters first: no crash; LeakTest measures memory.)
     */
    @Test
    void aLimiterDroppedWithoutCloseIsFreedByTheCleaner() throws Exception {
        for (int i = 0; i < 2000; i++) {
            RateLimiter l = RateLimiter.open("memory://");
            l.acquire("k", 1, 1000);
        }
        try (TestRedis redis = TestRedis.connect()) {
            Set<String> before = clientIds(redis);
            Set<String> opened = openAndDrop(20);
            opened.removeAll(before);
            assertTrue(opened.size() >= 20, "each limiter connected: " + opened);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            Set<String> left;
            do {
                System.gc();
                Thread.sleep(100);
                left = new HashSet<>(opened);
                left.retainAll(clientIds(redis));
            } while (!left.isEmpty() && System.nanoTime() < deadline);
            assertTrue(left.isEmpty(), left.size() + " of " + opened.size() + " connections of dropped limiters still open after 20 s of GC");
        }
    }

    /** Opens {@code n} Redis limiters, connects each with a call, and drops them; returns the client ids Redis then had. */
    private static Set<String> openAndDrop(int n) {
        List<RateLimiter> limiters = new ArrayList<>();
        String key = TestSupport.key("cleaner");
        for (int i = 0; i < n; i++) {
            RateLimiter l = RateLimiter.open(TestSupport.redisUrl());
            l.acquire(key, 1_000_000, 60_000);
            limiters.add(l);
        }
        try (TestRedis redis = TestRedis.connect()) {
            return clientIds(redis);
        }
    }

    /** The ids of the connections Redis has now ({@code CLIENT LIST}). */
    private static Set<String> clientIds(TestRedis redis) {
        Set<String> ids = new HashSet<>();
        for (String line : ((String) redis.call("CLIENT", "LIST")).split("\n")) {
            for (String field : line.trim().split(" ")) {
                if (field.startsWith("id=")) {
                    ids.add(field.substring(3));
                }
            }
        }
        return ids;
    }

    // The panic tests need the library built with the `test-panic` feature (test.sh does): its
    // marker keys make a call panic, on the caller's thread or inside the call's future.

    @Test
    void aPanicInNativeCodeIsAJavaException() {
        System.err.println("LifecycleTest: the native test hook panics now; Rust prints the panic message, expected");
        try (RateLimiter l = RateLimiter.open("memory://")) {
            NativePanicException e = assertThrows(NativePanicException.class,
                    () -> l.acquire("rl-test-panic:caller", 1, 1000));
            assertEquals(RateLimitException.Code.INTERNAL, e.code());
            assertTrue(e.getMessage().contains("test-panic hook (Caller)"), e.getMessage());
            // The limiter survived it.
            assertTrue(l.acquire("after-panic", 1, 1000).allowed());
        }
    }

    @Test
    void aPanicOnTheRuntimeFailsTheFuture() throws Exception {
        try (RateLimiter l = RateLimiter.open(TestSupport.redisUrl())) {
            CompletableFuture<Decision> f = l.acquireAsync("rl-test-panic:future", 1, 1000);
            CompletableFuture<String> thread = f.handle((d, e) -> Thread.currentThread().getName());
            ExecutionException e = assertThrows(ExecutionException.class, () -> f.get(5, TimeUnit.SECONDS));
            NativePanicException p = assertInstanceOf(NativePanicException.class, e.getCause());
            assertTrue(p.getMessage().contains("test-panic hook (Future)"), p.getMessage());
            // It panicked after the Redis round trip, on a thread of the core's runtime (or, had the
            // future completed before whenComplete was added, on this one).
            String name = thread.get(5, TimeUnit.SECONDS);
            assertTrue(name.startsWith("rl-") || name.equals(Thread.currentThread().getName()), name);
            // The runtime survived it.
            assertTrue(l.acquireAsync(TestSupport.key("after-panic"), 1, 1000).get(5, TimeUnit.SECONDS).allowed());
        }
    }
}
