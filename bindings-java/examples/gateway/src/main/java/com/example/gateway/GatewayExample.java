package com.example.gateway;

import dev.rl.Decision;
import dev.rl.NativeLoader;
import dev.rl.RateLimitResult;
import dev.rl.RateLimiter;
import dev.rl.Stats;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

/**
 * A gateway using rl-java from the local Maven repository: the rewritten design class, the full
 * API, async, and the local fallback when Redis is unreachable. Exits non-zero (throws) if
 * anything is not as expected.
 *
 * <p>Argument: a Redis URL (default {@code $RL_TEST_REDIS_URL}, else {@code redis://127.0.0.1:6379/}).
 */
public final class GatewayExample {
    private GatewayExample() {}

    public static void main(String[] args) throws Exception {
        String url = args.length > 0 ? args[0]
                : System.getenv().getOrDefault("RL_TEST_REDIS_URL", "redis://127.0.0.1:6379/");
        System.out.println("rl native library: " + NativeLoader.source());
        String api = "example:order:create:" + UUID.randomUUID();

        // The design's class, unchanged for its callers: 3 per 10 s.
        try (SlidingWindowRateLimiter gateway = new SlidingWindowRateLimiter(url, 8)) {
            int allowed = 0;
            for (int i = 1; i <= 4; i++) {
                RateLimitResult r = gateway.tryAcquire(api, 10_000, 3);
                System.out.println("request " + i + ": " + r);
                check(r.mode().equals("normal"), "Redis decides");
                allowed += r.allowed() ? 1 : 0;
            }
            check(allowed == 3, "3 of 4 admitted");
        }

        // The full API: cost, every field, async.
        try (RateLimiter limiter = RateLimiter.open(url)) {
            Decision d = limiter.acquire(api + ":bulk", 100, 1000, 40);
            System.out.println("acquire cost 40 of 100/s: " + d);
            Decision a = limiter.acquireAsync(api + ":bulk", 100, 1000, 70).get(5, TimeUnit.SECONDS);
            System.out.println("acquireAsync cost 70: " + a + (a.allowed() ? "" : " -> 429, Retry-After " + a.retryAfterMs() + " ms"));
            check(d.allowed() && !a.allowed() && a.retryAfterMs() > 0, "the second bulk request does not fit");
        }

        // Redis unreachable (nothing listens on port 1): the instance's share, decided locally.
        try (SlidingWindowRateLimiter offline = new SlidingWindowRateLimiter("redis://127.0.0.1:1/", 8)) {
            RateLimitResult r = offline.tryAcquire(api, 1000, 80);
            System.out.println("Redis down: " + r);
            check(r.allowed() && r.mode().equals("local") && r.remaining() == 80 / 8 - 1, "local fallback, limit/8");
            Stats s = offline.stats();
            System.out.println("Redis down: " + s);
            check(s.mode().equals("local") && s.decisionsLocal() == 1 && s.instances() == 8, "stats say local");
        }
        System.out.println("example: ok");
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError("example failed: " + what);
        }
    }
}
