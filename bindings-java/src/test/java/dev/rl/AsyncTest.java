package dev.rl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** How async calls complete: on the core's runtime, without a Java thread waiting. */
class AsyncTest {

    /**
     * While Redis holds every write (CLIENT PAUSE WRITE, until UNPAUSE), 500 acquireAsync calls
     * return, none of them done: no caller waited for Redis. The fallback is off, so nothing but
     * Redis can decide them (no local decision, no local record for {@code peek} to read); when
     * Redis resumes, a runtime thread completes each of them (dependent stages added before
     * completion run there), and Redis counted every call once.
     */
    @Test
    void completesOnTheRuntimeWithoutBlockingTheCaller() throws Exception {
        try (RateLimiter l = RateLimiter.builder(TestSupport.redisUrl())
                        .localFallback(false)
                        .requestTimeout(java.time.Duration.ofSeconds(30))
                        .build();
                TestRedis redis = TestRedis.connect()) {
            l.ping();
            String key = TestSupport.key("async-thread");
            List<CompletableFuture<Decision>> decisions = new ArrayList<>();
            List<CompletableFuture<String>> threads = new ArrayList<>();
            long issueMs;
            long doneEarly;
            redis.call("CLIENT", "PAUSE", "60000", "WRITE");
            try {
                long t0 = System.nanoTime();
                for (int i = 0; i < 500; i++) {
                    CompletableFuture<Decision> f = l.acquireAsync(key, 1_000_000, 60_000);
                    decisions.add(f);
                    threads.add(f.thenApply(d -> Thread.currentThread().getName()));
                }
                issueMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
                // Redis answers nothing while paused, and the 30 s timeout is far off.
                doneEarly = decisions.stream().filter(CompletableFuture::isDone).count();
            } finally {
                redis.call("CLIENT", "UNPAUSE");
            }
            assertEquals(0, doneEarly, "calls completed while Redis held every write");
            String caller = Thread.currentThread().getName();
            for (CompletableFuture<String> f : threads) {
                String name = f.get(10, TimeUnit.SECONDS);
                assertNotEquals(caller, name);
                assertEquals("rl-runtime", name);
            }
            for (CompletableFuture<Decision> f : decisions) {
                assertEquals("normal", f.get().mode(), "Redis decided");
            }
            // Reported, not asserted: how long issuing takes depends on the machine's load.
            System.out.printf("AsyncTest: issued 500 acquireAsync in %d ms while Redis was paused%n", issueMs);
            assertEquals(500, l.peek(key, 1_000_000, 60_000).used());
            List<?> window = (List<?>) redis.call("LRANGE", l.redisKey(key), "0", "-1");
            assertEquals(500, TestSupport.windowSum(window), "Redis's own record of the window: " + window);
        }
    }

    /**
     * A dependent stage that makes a synchronous rl call runs on a runtime thread: the library hands
     * that worker's other tasks to another thread first (tokio block_in_place), so many such
     * callbacks at once do not deadlock the runtime. (Blocking on something else there, such as
     * {@code join()} of another rl future, can: the README says to use an executor for that.)
     */
    @Test
    void syncCallsInsideCallbacksDoNotDeadlockTheRuntime() throws Exception {
        // Redis decides every call (a loaded machine's slow round trips must not send some local:
        // their repair then counted a few twice, 610 for 600).
        try (RateLimiter l = RateLimiter.builder(TestSupport.redisUrl()).degradeRttMs(5_000).build()) {
            String key = TestSupport.key("async-nested");
            List<CompletableFuture<Decision>> fs = new ArrayList<>();
            for (int i = 0; i < 200; i++) {
                fs.add(l.acquireAsync(key, 1_000_000, 60_000)
                        .thenApply(d -> l.acquire(key, 1_000_000, 60_000))
                        .thenCompose(d -> l.acquireAsync(key, 1_000_000, 60_000))
                        .thenApply(d -> l.peek(key, 1_000_000, 60_000)));
            }
            CompletableFuture.allOf(fs.toArray(new CompletableFuture<?>[0])).get(30, TimeUnit.SECONDS);
            assertEquals(600, l.peek(key, 1_000_000, 60_000).used());
        }
    }

    /**
     * A dependent stage added before completion runs on the completion executor. Redis holds the
     * call (CLIENT PAUSE WRITE) until the stage is added: a stage added to a future already
     * complete runs on the caller's thread, by CompletableFuture's rules, which a fast Redis made
     * this test hit now and then.
     */
    @Test
    void completionExecutorRunsDependentsElsewhere() throws Exception {
        ExecutorService pool = Executors.newSingleThreadExecutor(r -> new Thread(r, "app-pool"));
        try (RateLimiter l = RateLimiter.builder(TestSupport.redisUrl())
                        .completionExecutor(pool)
                        .localFallback(false)
                        .requestTimeout(java.time.Duration.ofSeconds(30))
                        .build();
                TestRedis redis = TestRedis.connect()) {
            l.ping();
            CompletableFuture<String> name;
            redis.call("CLIENT", "PAUSE", "60000", "WRITE");
            try {
                name = l.acquireAsync(TestSupport.key("hop"), 5, 1000).thenApply(d -> Thread.currentThread().getName());
                assertFalse(name.isDone(), "Redis answered while paused");
            } finally {
                redis.call("CLIENT", "UNPAUSE");
            }
            assertEquals("app-pool", name.get(5, TimeUnit.SECONDS));
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void memoryBackendCompletesAtOnce() {
        try (RateLimiter l = RateLimiter.open("memory://")) {
            CompletableFuture<Decision> f = l.acquireAsync("k", 1, 1000);
            assertTrue(f.isDone(), "the memory backend answers during the call itself");
            assertTrue(f.join().allowed());
            assertEquals(0, f.join().remaining());
            // Several rules, decided at once too: every field of every rule's decision arrives.
            CompletableFuture<CompositeDecision> all = l.acquireAllAsync(
                    java.util.List.of(new Rule("a", 5, 1000, 2), new Rule("b", 3, 60_000, 1)), "g");
            assertTrue(all.isDone(), "the memory backend answers during the call itself");
            CompositeDecision c = all.join();
            assertTrue(c.allowed());
            assertEquals(2, c.decisions().size());
            Decision a = c.decisions().get(0);
            Decision b = c.decisions().get(1);
            assertEquals(3, a.remaining());
            assertEquals(2, a.used());
            assertEquals(2, b.remaining());
            assertEquals(1, b.used());
            assertTrue(b.resetAfterMs() > 59_000 && b.resetAfterMs() <= 60_000, b.toString());
            assertEquals(c.mode(), a.mode());
            assertTrue(c.nowMs() > 0 && a.nowMs() > 0, c.toString());
            CompletableFuture<CompositeDecision> denied = l.acquireAllAsync(
                    java.util.List.of(new Rule("a", 5, 1000, 1), new Rule("b", 3, 60_000, 3)), "g");
            assertFalse(denied.join().allowed());
            assertTrue(denied.join().retryAfterMs() > 0, denied.join().toString());
        }
    }
}
