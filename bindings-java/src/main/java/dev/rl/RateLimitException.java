package dev.rl;

/**
 * A call could not be decided: the backend failed, or the native library did. Unchecked, like the
 * Redis client exceptions a gateway already handles. Bad arguments are not reported this way (they
 * are {@link IllegalArgumentException}s), nor is use after {@link RateLimiter#close()}
 * ({@link IllegalStateException}).
 */
public class RateLimitException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /** Why a call failed; {@link #id()} is the core's stable name of the kind. */
    public enum Code {
        /** Redis could not be reached in time (refused, timed out, dropped); retrying later may work. */
        BACKEND_UNAVAILABLE("backend_unavailable"),
        /** Redis answered with an error (wrong type at the key, script error, auth, OOM ...). */
        BACKEND_ERROR("backend_error"),
        /** The explicit client clock is too far from Redis time. */
        CLOCK_SKEW("clock_skew"),
        /** A bug in the native library (a Rust panic caught at the boundary). Please report it. */
        INTERNAL("internal");

        private final String id;

        Code(String id) {
            this.id = id;
        }

        /** The core's name for this kind, e.g. {@code "backend_unavailable"}. */
        public String id() {
            return id;
        }
    }

    private final Code code;

    protected RateLimitException(Code code, String message) {
        super(message);
        this.code = code;
    }

    /** Why the call failed. */
    public Code code() {
        return code;
    }
}
