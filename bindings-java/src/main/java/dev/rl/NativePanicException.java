package dev.rl;

/**
 * A bug inside the native library: a Rust panic, caught at the JNI boundary so it never takes the
 * JVM down. The limiter stays usable. Please report the message.
 */
public final class NativePanicException extends RateLimitException {
    private static final long serialVersionUID = 1L;

    public NativePanicException(String message) {
        super(Code.INTERNAL, message);
    }
}
