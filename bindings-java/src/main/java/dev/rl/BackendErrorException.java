package dev.rl;

/** Redis answered with an error (a wrong type at the key, a script error, auth, OOM ...). */
public final class BackendErrorException extends RateLimitException {
    private static final long serialVersionUID = 1L;

    public BackendErrorException(String message) {
        super(Code.BACKEND_ERROR, message);
    }
}
