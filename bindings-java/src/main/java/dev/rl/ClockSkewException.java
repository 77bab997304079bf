package dev.rl;

/**
 * The explicit client clock ({@link RateLimiter.Builder#clientClock(boolean)}) is further from Redis
 * {@code TIME} than {@link RateLimiter.Builder#maxClockSkewMs(long)} allows; nothing was decided.
 */
public final class ClockSkewException extends RateLimitException {
    private static final long serialVersionUID = 1L;
    private final long clientMs;
    private final long serverMs;
    private final long skewMs;
    private final long maxSkewMs;

    public ClockSkewException(String message, long clientMs, long serverMs, long skewMs, long maxSkewMs) {
        super(Code.CLOCK_SKEW, message);
        this.clientMs = clientMs;
        this.serverMs = serverMs;
        this.skewMs = skewMs;
        this.maxSkewMs = maxSkewMs;
    }

    /** The client's time, Unix ms. */
    public long clientMs() {
        return clientMs;
    }

    /** Redis time, Unix ms. */
    public long serverMs() {
        return serverMs;
    }

    /** The distance between the two. */
    public long skewMs() {
        return skewMs;
    }

    /** The distance allowed. */
    public long maxSkewMs() {
        return maxSkewMs;
    }
}
