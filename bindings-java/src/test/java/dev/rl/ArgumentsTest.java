package dev.rl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/**
 * Every bad input is an IllegalArgumentException whose message names the argument and the value,
 * thrown at the call (async variants too), with nothing sent to Redis.
 */
class ArgumentsTest {

    private static void rejects(String expectedFragment, Executable call) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, call);
        assertTrue(e.getMessage().contains(expectedFragment),
                "message \"" + e.getMessage() + "\" should contain \"" + expectedFragment + "\"");
    }

    /** The same bad input through every entry point that takes it. */
    private static void everyWay(RateLimiter l, String fragment, String key, long limit, long window, long cost) {
        rejects(fragment, () -> l.acquire(key, limit, window, cost));
        rejects(fragment, () -> l.acquireAsync(key, limit, window, cost));
        if (cost == 1) {
            rejects(fragment, () -> l.peek(key, limit, window));
            rejects(fragment, () -> l.peekAsync(key, limit, window));
        }
    }

    @Test
    void badArgumentsNeverReachRedis() {
        try (RateLimiter l = RateLimiter.open(TestSupport.redisUrl()); TestRedis redis = TestRedis.connect()) {
            l.acquire(TestSupport.key("warm"), 1, 1000); // connected, script loaded
            long evalshaBefore = redis.calls("evalsha") + redis.calls("eval") + redis.calls("del");
            String k = TestSupport.key("args");

            // null keys, both types
            rejects("`key`: must not be null", () -> l.acquire((String) null, 5, 1000));
            rejects("`key`: must not be null", () -> l.acquire((byte[]) null, 5, 1000));
            rejects("`key`: must not be null", () -> l.acquireAsync((String) null, 5, 1000));
            rejects("`key`: must not be null", () -> l.acquireAsync((byte[]) null, 5, 1000));
            rejects("`key`: must not be null", () -> l.peek((String) null, 5, 1000));
            rejects("`key`: must not be null", () -> l.peek((byte[]) null, 5, 1000));
            rejects("`key`: must not be null", () -> l.reset((String) null));
            rejects("`key`: must not be null", () -> l.reset((byte[]) null));
            rejects("`key`: must not be null", () -> l.resetAsync((byte[]) null));
            rejects("`key`: must not be null", () -> l.tryAcquire(null, 1000, 5));
            rejects("`key`: must not be null", () -> l.redisKey((String) null));

            // empty and oversized keys
            everyWay(l, "`key`: must not be empty", "", 5, 1000, 1);
            rejects("`key`: must not be empty", () -> l.acquire(new byte[0], 5, 1000));
            rejects("`key`: must not be empty", () -> l.reset(""));
            rejects("`key`: must not be empty", () -> l.resetAsync(""));
            rejects("`key`: must not be empty", () -> l.tryAcquire("", 1000, 5));
            rejects("`key`: is 65537 bytes", () -> l.acquire(new byte[65537], 5, 1000));

            // windowMs <= 0 and absurdly large
            everyWay(l, "`window_ms`: is 0;", k, 5, 0, 1);
            everyWay(l, "`window_ms`: is -1;", k, 5, -1, 1);
            everyWay(l, "`window_ms`: is -9223372036854775808;", k, 5, Long.MIN_VALUE, 1);
            everyWay(l, "`window_ms`: is 2592000001;", k, 5, 2_592_000_001L, 1);
            rejects("`window_ms`: is 0;", () -> l.tryAcquire(k, 0, 5));
            rejects("`window_ms`: is -1000;", () -> l.tryAcquire(k, -1000, 5));

            // maxReq / limit <= 0 and absurdly large
            rejects("`limit`: is 0;", () -> l.tryAcquire(k, 1000, 0));
            rejects("`limit`: is -5;", () -> l.tryAcquire(k, 1000, -5));
            rejects("`limit`: is -2147483648;", () -> l.tryAcquireAsync(k, 1000, Integer.MIN_VALUE));
            everyWay(l, "`limit`: is 0;", k, 0, 1000, 1);
            everyWay(l, "`limit`: is -1;", k, -1, 1000, 1);
            everyWay(l, "`limit`: is 1000000000000001;", k, 1_000_000_000_000_001L, 1000, 1);

            // cost <= 0 and cost > limit
            everyWay(l, "`cost`: is 0;", k, 5, 1000, 0);
            everyWay(l, "`cost`: is -3;", k, 5, 1000, -3);
            everyWay(l, "`cost`: is 6, above the limit 5", k, 5, 1000, 6);

            long evalshaAfter = redis.calls("evalsha") + redis.calls("eval") + redis.calls("del");
            assertEquals(evalshaBefore, evalshaAfter, "a rejected call must send nothing to Redis");
            assertEquals(0L, redis.call("EXISTS", "rl:{" + k + "}"));
        }
    }

    @Test
    void badOptionsAndUrls() {
        rejects("`url`: must not be null", () -> RateLimiter.builder(null));
        rejects("`url`", () -> RateLimiter.open("http://127.0.0.1:6379/"));
        rejects("`url`", () -> RateLimiter.open(""));
        rejects("`keyPrefix`", () -> RateLimiter.builder("memory://").keyPrefix("rl:{x}:").build());
        rejects("`requestTimeoutMs`: is 0 ms", () -> RateLimiter.builder("memory://").requestTimeout(Duration.ZERO).build());
        rejects("`requestTimeoutMs`: is -1 ms;", () -> RateLimiter.builder("memory://").requestTimeout(Duration.ofMillis(-1)).build());
        rejects("`connectTimeoutMs`: is 61000 ms", () -> RateLimiter.builder("memory://").connectTimeout(Duration.ofSeconds(61)).build());
        rejects("`requestTimeoutMs`", () -> RateLimiter.builder("memory://").requestTimeout(Duration.ofSeconds(Long.MAX_VALUE)).build());
        rejects("`maxClockSkewMs`: is -1 ms;", () -> RateLimiter.builder("memory://").maxClockSkewMs(-1).build());
        assertThrows(NullPointerException.class, () -> RateLimiter.builder("memory://").keyPrefix(null));
    }

    @Test
    void badFallbackOptions() {
        // Negative or unrepresentable values: refused by the binding, naming the option.
        rejects("`retryDelayMs`: is -1 ms;", () -> RateLimiter.builder("memory://").retryDelay(Duration.ofMillis(-1)).build());
        rejects("`retryDelayMs`: is 9223372036854775807000 ms;", () -> RateLimiter.builder("memory://").retryDelay(Duration.ofSeconds(Long.MAX_VALUE)).build());
        rejects("`degradeRttMs`: is -5 ms;", () -> RateLimiter.builder("memory://").degradeRtt(Duration.ofMillis(-5)).build());
        rejects("`degradeAfterMs`: is -1 ms;", () -> RateLimiter.builder("memory://").degradeAfter(Duration.ofMillis(-1)).build());
        rejects("`recoverRttMs`: is -1 ms;", () -> RateLimiter.builder("memory://").recoverRtt(Duration.ofMillis(-1)).build());
        rejects("`recoverAfterMs`: is -1 ms;", () -> RateLimiter.builder("memory://").recoverAfter(Duration.ofMillis(-1)).build());
        rejects("`instances`: is -1;", () -> RateLimiter.builder("memory://").instances(-1).build());
        rejects("`localMaxKeys`: is -5;", () -> RateLimiter.builder("memory://").localMaxKeys(-5).build());
        // The core's rules, in the core's words.
        rejects("`recoverRttMs`: is 10 ms, above degrade_rtt_ms (5 ms)",
                () -> RateLimiter.builder("memory://").recoverRtt(Duration.ofMillis(10)).build());
        rejects("`recoverRttMs`: is 30 ms, above degrade_rtt_ms (20 ms)", () -> RateLimiter.builder(TestSupport.redisUrl())
                .degradeRtt(Duration.ofMillis(20)).recoverRtt(Duration.ofMillis(30)).build());
        rejects("`degradeRttMs`: is 0 ms; must be between 1 and 60000 ms",
                () -> RateLimiter.builder("memory://").degradeRtt(Duration.ZERO).build());
        rejects("`degradeAfterMs`: is 61000 ms; must be between 1 and 60000 ms",
                () -> RateLimiter.builder("memory://").degradeAfter(Duration.ofSeconds(61)).build());
        rejects("`recoverAfterMs`: is 0 ms", () -> RateLimiter.builder("memory://").recoverAfter(Duration.ofNanos(999_999)).build());
        rejects("`instances`: is 0; must be between 1 and 1000000", () -> RateLimiter.builder("memory://").instances(0).build());
        rejects("`instances`: is 1000001; must be between 1 and 1000000",
                () -> RateLimiter.builder("memory://").instances(1_000_001).build());
        rejects("`localMaxKeys`: is 0; must be between 1 and 10000000",
                () -> RateLimiter.builder("memory://").localMaxKeys(0).build());
        rejects("`localMaxKeys`: is 10000001;", () -> RateLimiter.builder("memory://").localMaxKeys(10_000_001).build());
        rejects("`retryDelayMs`: is 60001 ms; must be between 0 and 60000 ms",
                () -> RateLimiter.builder("memory://").retryDelay(Duration.ofMillis(60_001)).build());
        // A request timeout under the retry delay means no retry, not an error.
        RateLimiter.builder("memory://").requestTimeout(Duration.ofMillis(20)).build().close();
        assertThrows(NullPointerException.class, () -> RateLimiter.builder("memory://").retryDelay(null));
        assertThrows(NullPointerException.class, () -> RateLimiter.builder("memory://").degradeRtt(null));
        // Every option at a valid non-default value.
        try (RateLimiter l = RateLimiter.builder(TestSupport.redisUrl())
                .requestTimeout(Duration.ofMillis(20))
                .retryDelay(Duration.ZERO)
                .localFallback(false)
                .degradeRtt(Duration.ofMillis(50))
                .degradeAfter(Duration.ofMillis(200))
                .recoverRtt(Duration.ofMillis(10))
                .recoverAfter(Duration.ofSeconds(1))
                .instances(3)
                .localMaxKeys(100)
                .build()) {
            assertEquals("redis", l.backend());
        }
    }

    @Test
    void theMemoryBackendRejectsTheSame() {
        try (RateLimiter l = RateLimiter.open("memory://")) {
            everyWay(l, "`key`: must not be empty", "", 5, 1000, 1);
            everyWay(l, "`window_ms`: is 0;", "k", 5, 0, 1);
            everyWay(l, "`limit`: is 0;", "k", 0, 1000, 1);
            everyWay(l, "`cost`: is 6, above the limit 5", "k", 5, 1000, 6);
        }
    }
}
