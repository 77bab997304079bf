package dev.rl;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** The API's shape and semantics on both backends. */
class BasicTest {

    static RateLimiter open(String backend) {
        return backend.equals("redis") ? TestSupport.redis().build() : RateLimiter.open("memory://");
    }

    @ParameterizedTest
    @ValueSource(strings = {"redis", "memory"})
    void acquirePeekResetAndEveryDecisionField(String backend) {
        try (RateLimiter limiter = open(backend)) {
            assertEquals(backend, limiter.backend());
            String mode = backend.equals("redis") ? "normal" : "memory";
            String key = TestSupport.key("basic");

            Decision first = limiter.acquire(key, 3, 10_000, 2);
            assertTrue(first.allowed());
            assertEquals(1, first.remaining());
            assertEquals(2, first.used());
            assertEquals(0, first.retryAfterMs());
            assertEquals(10_000, first.resetAfterMs());
            assertEquals(mode, first.mode());
            assertTrue(Math.abs(first.nowMs() - System.currentTimeMillis()) < 5_000, "nowMs is Unix ms: " + first);

            Decision second = limiter.acquire(key, 3, 10_000);
            assertTrue(second.allowed());
            assertEquals(0, second.remaining());
            assertEquals(3, second.used());

            Decision denied = limiter.acquire(key, 3, 10_000);
            assertFalse(denied.allowed());
            assertEquals(0, denied.remaining());
            assertEquals(3, denied.used(), "a denied request takes nothing");
            assertTrue(denied.retryAfterMs() > 0 && denied.retryAfterMs() <= 10_000, denied.toString());
            assertTrue(denied.resetAfterMs() > 0 && denied.resetAfterMs() <= 10_000, denied.toString());

            Decision peek = limiter.peek(key, 3, 10_000);
            assertFalse(peek.allowed());
            assertEquals(3, peek.used());
            // A higher limit, passed per call, takes effect at once (online threshold change).
            assertTrue(limiter.peek(key, 4, 10_000).allowed());

            limiter.reset(key);
            Decision after = limiter.peek(key, 3, 10_000);
            assertTrue(after.allowed());
            assertEquals(0, after.used());
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"redis", "memory"})
    void tryAcquireHasTheDesignsShape(String backend) {
        try (RateLimiter limiter = open(backend)) {
            String apiKey = TestSupport.key("design");
            RateLimitResult r1 = limiter.tryAcquire(apiKey, 60_000, 2);
            RateLimitResult r2 = limiter.tryAcquire(apiKey, 60_000, 2);
            RateLimitResult r3 = limiter.tryAcquire(apiKey, 60_000, 2);
            String mode = backend.equals("redis") ? "normal" : "memory";
            assertEquals(new RateLimitResult(true, 1, 1, mode), r1);
            assertEquals(new RateLimitResult(true, 0, 2, mode), r2);
            assertEquals(new RateLimitResult(false, 0, 2, mode), r3);
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"redis", "memory"})
    void asyncVariants(String backend) throws Exception {
        try (RateLimiter limiter = open(backend)) {
            String key = TestSupport.key("async");
            Decision d = limiter.acquireAsync(key, 2, 60_000).get(5, TimeUnit.SECONDS);
            assertTrue(d.allowed());
            assertEquals(1, d.used());
            assertEquals(1, limiter.peekAsync(key, 2, 60_000).get(5, TimeUnit.SECONDS).used());
            RateLimitResult r = limiter.tryAcquireAsync(key, 60_000, 2).get(5, TimeUnit.SECONDS);
            assertEquals(2, r.current());
            assertFalse(limiter.acquireAsync(key.getBytes(StandardCharsets.UTF_8), 2, 60_000, 1)
                    .get(5, TimeUnit.SECONDS).allowed());
            assertEquals(null, limiter.resetAsync(key).get(5, TimeUnit.SECONDS));
            assertEquals(0, limiter.peek(key, 2, 60_000).used());
        }
    }

    @ParameterizedTest
    @ValueSource(strings = {"redis", "memory"})
    void stringAndByteKeysAreTheSameKey(String backend) {
        try (RateLimiter limiter = open(backend)) {
            String key = TestSupport.key("bytes") + ":ключ:鍵:🙂";
            byte[] bytes = key.getBytes(StandardCharsets.UTF_8);
            limiter.acquire(key, 10, 60_000, 3);
            assertEquals(3, limiter.peek(bytes, 10, 60_000).used());
            limiter.acquire(bytes, 10, 60_000, 2);
            assertEquals(5, limiter.peek(key, 10, 60_000).used());
            // Arbitrary binary keys, NUL bytes included, are keys too.
            byte[] binary = {0, (byte) 0xff, '{', '}', '%', 0};
            assertTrue(limiter.acquire(binary, 1, 60_000).allowed());
            assertFalse(limiter.acquire(binary, 1, 60_000).allowed());
            assertArrayEquals("rl:{\0\u00ff%7B%7D%25\0}".getBytes(StandardCharsets.ISO_8859_1), limiter.redisKey(binary));
        }
    }

    @Test
    void redisKeyIsWhatAScriptCallerUses() {
        try (RateLimiter limiter = open("redis"); TestRedis redis = TestRedis.connect()) {
            assertEquals("rl:{api:order:create}", limiter.redisKey("api:order:create"));
            assertEquals("rl:{a%7Db%7Bc%25}", limiter.redisKey("a}b{c%"));
            String key = TestSupport.key("layout");
            limiter.acquire(key, 10, 60_000, 4);
            List<?> list = (List<?>) redis.call("LRANGE", "rl:{" + key + "}", "0", "-1");
            assertEquals(4, TestSupport.windowSum(list), "the window's header counts the permits: " + list);
            assertEquals(List.of(4L), List.copyOf(TestSupport.windowBuckets(list).values()), list.toString());
        }
        try (RateLimiter limiter = RateLimiter.builder("memory://").keyPrefix("gw:").build()) {
            assertEquals("gw:{k}", limiter.redisKey("k"));
        }
    }

    @Test
    void pingAndToString() {
        RateLimiter limiter = open("redis");
        limiter.ping();
        assertEquals("RateLimiter[redis]", limiter.toString());
        limiter.close();
        assertEquals("RateLimiter[redis, closed]", limiter.toString());
    }

    @Test
    void clientClockIsCheckedAgainstRedisTime() {
        try (RateLimiter limiter = RateLimiter.builder(TestSupport.redisUrl()).clientClock(true).build()) {
            // This host's clock and the local redis-server's are the same clock.
            Decision d = limiter.acquire(TestSupport.key("clock"), 5, 1000);
            assertTrue(d.allowed());
        }
    }
}
