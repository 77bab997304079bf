package dev.rl;

import java.util.List;

/**
 * The answer to one {@link RateLimiter#acquireAll} call: every field of the core's composite
 * decision.
 *
 * @param allowed      whether the cost was taken from every rule (if false, nothing was taken)
 * @param retryAfterMs 0 if allowed; otherwise the wait after which every rule fits
 * @param mode         which path decided ({@code "normal"}, {@code "memory"} or {@code "local"}),
 *                     as {@link Decision#mode()}
 * @param nowMs        the latest of the rules' decision times (Unix ms, deciding clock)
 * @param decisions    one decision per rule, in the order given; a rule's {@code allowed} says
 *                     whether it alone would admit the cost
 */
public record CompositeDecision(
        boolean allowed, long retryAfterMs, String mode, long nowMs, List<Decision> decisions) {}
