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
        rejects("`key_prefix`", () -> RateLimiter.builder("memory://").keyPrefix("rl:{x}:").build());
        rejects("`request_timeout`: is 0 ms", () -> RateLimiter.builder("memory://").requestTimeout(Duration.ZERO).build());
        rejects("`request_timeout`: is -1;", () -> RateLimiter.builder("memory://").requestTimeout(Duration.ofMillis(-1)).build());
        rejects("`connect_timeout`: is 61000 ms", () -> RateLimiter.builder("memory://").connectTimeout(Duration.ofSeconds(61)).build());
        rejects("`request_timeout`", () -> RateLimiter.builder("memory://").requestTimeout(Duration.ofSeconds(Long.MAX_VALUE)).build());
        rejects("`max_clock_skew_ms`: is -1;", () -> RateLimiter.builder("memory://").maxClockSkewMs(-1).build());
        assertThrows(NullPointerException.class, () -> RateLimiter.builder("memory://").keyPrefix(null));
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
