package dev.rl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * The local fallback (on by default) and {@link RateLimiter#stats()}: with nothing listening at the
 * URL, the first call is refused, retried once after {@code retryDelay}, then decided locally
 * against {@code limit / instances}; with {@code localFallback(false)} the same calls throw.
 */
class FallbackTest {

    @Test
    void nothingListeningDecidesLocallyWithTheInstancesShare() throws Exception {
        String url = "redis://127.0.0.1:" + TestSupport.freePort() + "/";
        // degradeRtt is raised so that only the refusal and its retry (asserted below) can send it local.
        try (RateLimiter l = RateLimiter.builder(url).instances(4).retryDelay(Duration.ofMillis(20))
                .degradeRtt(Duration.ofSeconds(60)).build()) {
            String key = TestSupport.key("fallback");
            long t0 = System.nanoTime();
            Decision first = l.acquire(key, 100, 60_000);
            long firstMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            System.out.printf("FallbackTest: first call decided locally after %d ms: %s%n", firstMs, first);
            assertTrue(firstMs >= 20 && firstMs < 5_000, "refused, retried after 20 ms, then local: " + firstMs + " ms");
            assertEquals("local", first.mode());
            assertTrue(first.allowed());
            assertEquals(1, first.used());
            assertEquals(24, first.remaining(), "the local budget is 100 / 4 = 25");
            int allowed = 1;
            for (int i = 2; i <= 25; i++) {
                Decision d = l.acquire(key, 100, 60_000);
                assertEquals("local", d.mode());
                assertTrue(d.allowed(), "call " + i + ": " + d);
                assertEquals(i, d.used());
                assertEquals(25 - d.used(), d.remaining());
                allowed++;
            }
            assertEquals(25, allowed);
            Decision denied = l.acquire(key, 100, 60_000);
            assertFalse(denied.allowed(), denied.toString());
            assertEquals("local", denied.mode());
            assertEquals(25, denied.used());
            assertEquals(0, denied.remaining());
            assertTrue(denied.retryAfterMs() > 0 && denied.retryAfterMs() <= 60_000, denied.toString());
            // The design's shape reports it too.
            assertEquals(new RateLimitResult(false, 0, 25, "local"), l.tryAcquire(key, 60_000, 100));

            Stats s = l.stats();
            System.out.println("FallbackTest: " + s);
            assertEquals("local", s.mode());
            assertEquals("standalone", s.topology());
            assertEquals(27, s.decisionsLocal());
            assertEquals(0, s.decisionsNormal());
            assertEquals(0, s.decisionsMemory());
            assertEquals(1, s.transitionsToLocal());
            assertEquals(0, s.transitionsToNormal());
            assertTrue(s.redisErrors() >= 1, s.toString());
            assertTrue(s.retries() >= 1, s.toString());
            assertEquals(4, s.instances());
            assertEquals(1, s.localKeys());
            assertFalse(s.stateReason().isEmpty());

            // Async calls are local too, and a peek.
            Decision async = l.acquireAsync(key, 100, 60_000).get(5, TimeUnit.SECONDS);
            assertEquals("local", async.mode());
            assertFalse(async.allowed());
            Decision other = l.acquireAsync(TestSupport.key("fallback-other"), 8, 60_000).get(5, TimeUnit.SECONDS);
            assertEquals(new Decision(true, 1, 1, 0, other.resetAfterMs(), "local", other.nowMs()), other,
                    "a budget of 8 / 4 = 2");
            assertEquals("local", l.peek(key, 100, 60_000).mode());
            assertEquals(30, l.stats().decisionsLocal());
            // ping still talks to Redis.
            assertThrows(BackendUnavailableException.class, l::ping);
        }
    }

    @Test
    void withoutTheFallbackTheSameCallsThrow() throws Exception {
        String url = "redis://127.0.0.1:" + TestSupport.freePort() + "/";
        try (RateLimiter l = RateLimiter.builder(url).instances(4).localFallback(false).build()) {
            String key = TestSupport.key("no-fallback");
            BackendUnavailableException e = assertThrows(BackendUnavailableException.class, () -> l.acquire(key, 100, 60_000));
            assertEquals(RateLimitException.Code.BACKEND_UNAVAILABLE, e.code());
            assertThrows(BackendUnavailableException.class, () -> l.peek(key, 100, 60_000));
            ExecutionException ee = assertThrows(ExecutionException.class,
                    () -> l.acquireAsync(key, 100, 60_000).get(5, TimeUnit.SECONDS));
            assertInstanceOf(BackendUnavailableException.class, ee.getCause());
            Stats s = l.stats();
            assertEquals("normal", s.mode());
            assertEquals(0, s.decisionsLocal());
            assertEquals(0, s.transitionsToLocal());
            assertTrue(s.redisErrors() >= 1, s.toString());
        }
    }

    @Test
    void memoryStats() {
        try (RateLimiter l = RateLimiter.open("memory://")) {
            Stats before = l.stats();
            assertEquals("memory", before.mode());
            assertEquals("memory", before.topology());
            assertEquals(0, before.decisionsMemory());
            String key = TestSupport.key("stats-memory");
            for (int i = 0; i < 5; i++) {
                l.acquire(key, 3, 60_000);
            }
            Stats s = l.stats();
            assertEquals(5, s.decisionsMemory());
            assertEquals(0, s.decisionsNormal());
            assertEquals(0, s.decisionsLocal());
            assertEquals(0, s.rttSamples());
        }
    }

    @Test
    void redisStats() {
        try (RateLimiter l = TestSupport.redis().build()) {
            String key = TestSupport.key("stats-redis");
            for (int i = 0; i < 5; i++) {
                l.acquire(key, 3, 60_000);
            }
            Stats s = l.stats();
            System.out.println("FallbackTest: " + s);
            assertEquals("normal", s.mode());
            assertEquals("standalone", s.topology());
            // The 5th call is denied from the local denial cache (on by default), after Redis
            // denied the 4th: 4 normal decisions, 1 cached denial.
            assertEquals(4, s.decisionsNormal());
            assertEquals(1, s.denialsCached());
            assertEquals(0, s.decisionsLocal());
            assertEquals(0, s.transitionsToLocal());
            assertEquals(0, s.redisErrors());
            assertTrue(s.rttSamples() > 0, s.toString());
            assertTrue(s.rttMaxUs() > 0 && s.rttMaxUs() >= s.rttP50Us(), s.toString());
            assertTrue(s.instances() >= 1, s.toString());
            l.reset(key);
        }
    }
}
