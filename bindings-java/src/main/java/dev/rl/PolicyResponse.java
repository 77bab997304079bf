package dev.rl;

import java.util.List;
import java.util.Map;

/**
 * What {@link RateLimiter#acquirePolicies} answers for one request: the decision (one rule per
 * policy, in the policies' order) and the response rendered from it by the core, exactly as
 * {@link RateLimitHeaders#render} and {@link RateLimitHeaders#problemBody} would.
 *
 * @param decision    the all-or-nothing decision
 * @param headers     the response fields, as (name, value) pairs in the order to send them
 *                    ({@code Retry-After} too on a denial)
 * @param problemBody the {@code application/problem+json} body of a denial
 *                    ({@link RateLimitHeaders#PROBLEM_CONTENT_TYPE}); null when allowed
 */
public record PolicyResponse(CompositeDecision decision, List<Map.Entry<String, String>> headers, String problemBody) {}
