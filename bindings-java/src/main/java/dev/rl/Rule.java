package dev.rl;

/**
 * One rule of {@link RateLimiter#acquireAll}: at most {@code limit} permits in any
 * {@code windowMs} span of {@code key}'s window, and the call asks for {@code cost} of them. The
 * core checks every value when the rule is used (rules on one key must ask the same cost).
 *
 * @param key      the key, as for {@link RateLimiter#acquire(String, long, long, long)} (UTF-8)
 * @param limit    permits allowed in any window span
 * @param windowMs the window, in milliseconds
 * @param cost     permits this call takes
 */
public record Rule(String key, long limit, long windowMs, long cost) {

    /** The rule {@code policy} sets on {@code key}, asking {@code cost}. */
    public static Rule of(Policy policy, String key, long cost) {
        if (policy == null) {
            throw new IllegalArgumentException("invalid argument `policy`: must not be null");
        }
        return new Rule(key, policy.limit(), policy.windowMs(), cost);
    }
}
