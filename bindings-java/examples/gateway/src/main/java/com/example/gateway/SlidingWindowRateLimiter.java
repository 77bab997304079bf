package com.example.gateway;

import dev.rl.RateLimitResult;
import dev.rl.RateLimiter;
import dev.rl.Stats;
import java.time.Duration;

/**
 * The design document's {@code SlidingWindowRateLimiter} (its section 2.2: Java 17, Redisson,
 * EVALSHA of {@code sliding_window.lua}), rewritten on the native rl library. Same public shape,
 * {@code tryAcquire(apiKey, windowMs, maxReq) -> RateLimitResult(allowed, remaining, current, mode)},
 * so the gateway code that calls it does not change. What changed underneath:
 *
 * <ul>
 *   <li>No script handling: the original called {@code evalSha("sliding_window.lua")} on a file
 *       name (there is no such SHA) and parsed the mixed reply ({@code 1, 4999, 1, "normal"}) as
 *       a {@code List<String>}. The native library loads the script by its real SHA, reloads it
 *       after a Redis restart ({@code NOSCRIPT}), and returns a typed record.</li>
 *   <li>Keys {@code rl:{apiKey}}: one hash tag, so the window lives in one Cluster slot (the
 *       original's {@code rl:api:X} / {@code rl:cfg:api:X} were CROSSSLOT). Gateways that still
 *       call the script can use the same key and share the window during a migration.</li>
 *   <li>Redis {@code TIME} decides, not {@code System.currentTimeMillis()}: client clock drift
 *       has no effect (the design's own scenario B).</li>
 *   <li>Exact: no random ZSET member to collide within a millisecond, every argument checked
 *       before anything is written, bad arguments are {@code IllegalArgumentException}s.</li>
 *   <li>Degradation is real: when Redis does not answer within the request timeout, refuses, or
 *       stays slow, the library itself decides locally: this instance's share of the limit
 *       ({@code maxReq / instances}, the design's "limit / 8") from an exact in-process sliding
 *       window, reported as {@code mode = "local"}; it never waits on a dead Redis longer than the
 *       timeout, returns to Redis by itself when Redis is healthy again, and writes the permits it
 *       admitted meanwhile back to Redis. (The original read a pre-allocated pool that nothing
 *       filled, and so rejected everything while degraded.) Other errors (a wrong type at the key,
 *       auth) are not hidden behind the fallback: they are configuration bugs and propagate.</li>
 * </ul>
 */
public class SlidingWindowRateLimiter implements AutoCloseable {
    private final RateLimiter limiter;

    /**
     * @param redisUrl  the shared Redis, e.g. {@code redis://10.0.0.5:6379/}
     * @param instances how many gateway instances share each limit (the local fallback's divisor)
     */
    public SlidingWindowRateLimiter(String redisUrl, int instances) {
        this.limiter = RateLimiter.builder(redisUrl)
                .requestTimeout(Duration.ofMillis(50))
                .retryDelay(Duration.ofMillis(10))
                .instances(instances)
                .build();
    }

    /** One request of {@code apiKey}: at most {@code maxReq} in any {@code windowMs}, fleet-wide. */
    public RateLimitResult tryAcquire(String apiKey, long windowMs, int maxReq) {
        return limiter.tryAcquire(apiKey, windowMs, maxReq);
    }

    /** Which path decides now, and how often each did (for a metrics endpoint). */
    public Stats stats() {
        return limiter.stats();
    }

    @Override
    public void close() {
        limiter.close();
    }
}
