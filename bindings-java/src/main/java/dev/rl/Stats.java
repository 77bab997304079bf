package dev.rl;

/**
 * What {@link RateLimiter#stats()} reports: which path decides now, how often each path decided,
 * the local fallback's state machine, and Redis round trips. Every field of the core's
 * {@code Stats}; counters count since the limiter was opened.
 *
 * @param mode                the path new decisions take now: {@code "normal"} (Redis), {@code "local"}
 *                            (the fallback, while Redis is unhealthy) or {@code "memory"}; the same
 *                            strings as {@link Decision#mode()}
 * @param topology            {@code "standalone"}, {@code "sentinel"}, {@code "cluster"} or {@code "memory"}
 * @param decisionsNormal     decisions Redis made
 * @param decisionsLocal      decisions the local fallback made
 * @param decisionsMemory     decisions the memory backend made
 * @param transitionsToLocal  transitions normal to local
 * @param transitionsToNormal transitions local to normal
 * @param stateMs             how long the current state has lasted, in ms
 * @param stateReason         what caused the current state ({@code "start"} at first)
 * @param redisErrors         Redis calls that failed with a connection-class error
 * @param retries             of those, how many were retried
 * @param probes              recovery probes sent while local
 * @param repairs             repair calls that wrote permits admitted locally (or lost in a failover) back to Redis
 * @param repairedPermits     the permits those repairs added
 * @param failovers           new Redis primaries seen
 * @param instances           the divisor of the local budget ({@code limit / instances}): configured, or live
 *                            instances seen in Redis
 * @param localKeys           keys the local record holds (at most {@link RateLimiter.Builder#localMaxKeys(long)})
 * @param rttSamples          Redis round trips measured (of the last 1024 decisions)
 * @param rttLastUs           the last round trip, in microseconds
 * @param rttP50Us            median round trip, in microseconds
 * @param rttP99Us            99th percentile round trip, in microseconds
 * @param rttMaxUs            longest round trip, in microseconds
 */
public record Stats(
        String mode,
        String topology,
        long decisionsNormal,
        long decisionsLocal,
        long decisionsMemory,
        long transitionsToLocal,
        long transitionsToNormal,
        long stateMs,
        String stateReason,
        long redisErrors,
        long retries,
        long probes,
        long repairs,
        long repairedPermits,
        long failovers,
        long instances,
        long localKeys,
        long rttSamples,
        long rttLastUs,
        long rttP50Us,
        long rttP99Us,
        long rttMaxUs) {}
