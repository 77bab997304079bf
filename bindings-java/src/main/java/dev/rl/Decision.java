package dev.rl;

/**
 * The answer to one {@code acquire} or {@code peek}: every field of the core's decision. All times
 * are milliseconds on the deciding clock (Redis {@code TIME} for Redis, the system clock for the
 * memory backend).
 *
 * @param allowed      whether the permits were granted (for {@code peek}: whether one permit would be)
 * @param remaining    permits left in the window after this call: {@code limit - used}
 * @param used         permits counted in the window after this call (denied requests are not counted)
 * @param retryAfterMs 0 if allowed; otherwise the wait after which the same request fits, if nothing
 *                     else is admitted meanwhile
 * @param resetAfterMs when the window is empty again if nothing else is admitted; 0 if it is empty now
 * @param mode         which path decided: {@code "normal"} (Redis), {@code "memory"} (the in-process
 *                     backend) or {@code "local"} (the local fallback, while Redis is unhealthy: then
 *                     {@code remaining} counts down from this instance's share, {@code limit / instances});
 *                     the names of rl-core's modes, one shared string each
 * @param nowMs        the time of the decision on the deciding clock (Unix ms)
 */
public record Decision(
        boolean allowed, long remaining, long used, long retryAfterMs, long resetAfterMs, String mode, long nowMs) {

    /** The design's four-field shape of this decision ({@code current} is {@link #used()}). */
    public RateLimitResult toResult() {
        return new RateLimitResult(allowed, remaining, used, mode);
    }
}
