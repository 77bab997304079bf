package dev.rl;

/**
 * Redis could not be reached within the configured timeouts (connection refused, timed out, or
 * dropped). Nothing was decided; the limiter reconnects by itself, so a later call may succeed.
 */
public final class BackendUnavailableException extends RateLimitException {
    private static final long serialVersionUID = 1L;

    public BackendUnavailableException(String message) {
        super(Code.BACKEND_UNAVAILABLE, message);
    }
}
