package dev.rl;

/**
 * The design document's reply shape, {@code {allowed, remaining, current, mode}}, as returned by
 * {@link RateLimiter#tryAcquire(String, long, int)}: what the original Redisson gateway parsed out
 * of the script's reply, now typed.
 *
 * @param allowed   whether the request was admitted
 * @param remaining permits left in the current window
 * @param current   permits used in the current window, this request included if admitted
 * @param mode      which path decided ({@code "normal"} for Redis)
 */
public record RateLimitResult(boolean allowed, long remaining, long current, String mode) {}
