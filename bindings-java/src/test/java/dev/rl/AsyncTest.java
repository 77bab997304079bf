package dev.rl;

import static org.junit.jupiter.api.Assertions.assertEquals;
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
     * While Redis holds every write (CLIENT PAUSE), 500 acquireAsync calls return at once, none
     * done; when Redis resumes, a runtime thread completes each of them (dependent stages added
     * before completion run there), and every call was counted once.
     */
    @Test
    void completesOnTheRuntimeWithoutBlockingTheCaller() throws Exception {
        try (RateLimiter l = RateLimiter.builder(TestSupport.redisUrl()).requestTimeout(java.time.Duration.ofSeconds(5)).build();
                TestRedis redis = TestRedis.connect()) {
            l.ping();
            String key = TestSupport.key("async-thread");
            List<CompletableFuture<String>> threads = new ArrayList<>();
            redis.call("CLIENT", "PAUSE", "1000", "WRITE");
            long t0 = System.nanoTime();
            for (int i = 0; i < 500; i++) {
                CompletableFuture<Decision> f = l.acquireAsync(key, 1_000_000, 60_000);
                threads.add(f.thenApply(d -> Thread.currentThread().getName()));
            }
            long issueMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            long doneEarly = threads.stream().filter(CompletableFuture::isDone).count();
            String caller = Thread.currentThread().getName();
            for (CompletableFuture<String> f : threads) {
                String name = f.get(10, TimeUnit.SECONDS);
                assertNotEquals(caller, name);
                assertEquals("rl-runtime", name);
            }
            System.out.printf("AsyncTest: issued 500 acquireAsync in %d ms while Redis was paused%n", issueMs);
            assertTrue(issueMs < 800, "issuing took " + issueMs + " ms: a Java thread waited");
            assertEquals(0, doneEarly);
            assertEquals(500, l.peek(key, 1_000_000, 60_000).used());
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
        try (RateLimiter l = RateLimiter.open(TestSupport.redisUrl())) {
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

    @Test
    void completionExecutorRunsDependentsElsewhere() throws Exception {
        ExecutorService pool = Executors.newSingleThreadExecutor(r -> new Thread(r, "app-pool"));
        try (RateLimiter l = RateLimiter.builder(TestSupport.redisUrl()).completionExecutor(pool).build()) {
            String name = l.acquireAsync(TestSupport.key("hop"), 5, 1000)
                    .thenApply(d -> Thread.currentThread().getName()).get(5, TimeUnit.SECONDS);
            assertEquals("app-pool", name);
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
        }
    }
}
