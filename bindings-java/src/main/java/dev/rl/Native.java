package dev.rl;

import java.util.concurrent.CompletableFuture;

/**
 * The JNI surface of {@code librl_java} (see {@code bindings-java/src/lib.rs}). Package-private:
 * {@link RateLimiter} is the API. The {@code native} methods throw what {@link #error} makes; the
 * static Java methods below are called from native code (method ids cached by {@link #init}), so
 * exceptions and results are built in Java, with this class's loader, on any thread.
 */
final class Native {
    /** Must equal {@code ABI_VERSION} in lib.rs. */
    static final int ABI_VERSION = 2;

    static {
        NativeLoader.load();
        int found = abiVersion();
        if (found != ABI_VERSION) {
            throw new UnsatisfiedLinkError("rl_java native library " + NativeLoader.source()
                    + " has ABI version " + found + ", this jar needs " + ABI_VERSION
                    + " (a stale library on java.library.path?)");
        }
        init();
    }

    private Native() {}

    /** Forces the static initializer (loading the library) to run. */
    static void ensureLoaded() {}

    static native int abiVersion();

    private static native void init();

    /** {@code instancesSet == false}: instances are discovered ({@code instances} is ignored). */
    static native long open(String url, String keyPrefix, long connectTimeoutMs, long requestTimeoutMs,
            boolean clientClock, long maxClockSkewMs, long retryDelayMs, boolean localFallback, long degradeRttMs,
            long degradeAfterMs, long recoverRttMs, long recoverAfterMs, boolean instancesSet, long instances,
            long localMaxKeys);

    static native void close(long handle);

    static native String scriptSource();

    static native String scriptSha();

    static native String backend(long handle);

    static native byte[] redisKey(long handle, byte[] key);

    static native Decision acquire(long handle, byte[] key, long limit, long windowMs, long cost);

    static native Decision peek(long handle, byte[] key, long limit, long windowMs);

    static native void reset(long handle, byte[] key);

    static native void ping(long handle);

    static native Stats stats(long handle);

    static native void acquireAsync(long handle, byte[] key, long limit, long windowMs, long cost,
            CompletableFuture<Decision> future);

    static native void peekAsync(long handle, byte[] key, long limit, long windowMs,
            CompletableFuture<Decision> future);

    static native void resetAsync(long handle, byte[] key, CompletableFuture<Void> future);

    /** Test hook: panics in native code; 0 in this call, 1 on the runtime (fails {@code future}). */
    static native void selfTestPanic(int where, CompletableFuture<Object> future);

    // ---- called from native code ------------------------------------------------------------

    static final String[] MODES = {"normal", "memory", "local", "lease"};

    static Decision decision(boolean allowed, long remaining, long used, long retryAfterMs, long resetAfterMs,
            int mode, String modeName, long nowMs) {
        String m = mode >= 0 && mode < MODES.length ? MODES[mode] : modeName;
        return new Decision(allowed, remaining, used, retryAfterMs, resetAfterMs, m, nowMs);
    }

    /** {@code n}: the long components of {@link Stats} in declaration order (see lib.rs). */
    static Stats stats(int mode, String modeName, String topology, String stateReason, long[] n) {
        String m = mode >= 0 && mode < MODES.length ? MODES[mode] : modeName;
        return new Stats(m, topology, n[0], n[1], n[2], n[3], n[4], n[5], stateReason, n[6], n[7], n[8], n[9], n[10],
                n[11], n[12], n[13], n[14], n[15], n[16], n[17], n[18]);
    }

    static final int KIND_INTERNAL = 0;
    static final int KIND_INVALID_ARGUMENT = 1;
    static final int KIND_BACKEND_UNAVAILABLE = 2;
    static final int KIND_BACKEND = 3;
    static final int KIND_CLOCK_SKEW = 4;
    static final int KIND_ILLEGAL_STATE = 5;

    static RuntimeException error(int kind, String message, long clientMs, long serverMs, long skewMs,
            long maxSkewMs) {
        switch (kind) {
            case KIND_INVALID_ARGUMENT:
                return new IllegalArgumentException(message);
            case KIND_BACKEND_UNAVAILABLE:
                return new BackendUnavailableException(message);
            case KIND_BACKEND:
                return new BackendErrorException(message);
            case KIND_CLOCK_SKEW:
                return new ClockSkewException(message, clientMs, serverMs, skewMs, maxSkewMs);
            case KIND_ILLEGAL_STATE:
                return new IllegalStateException(message);
            default:
                return new NativePanicException(message);
        }
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static void complete(CompletableFuture future, Object value) {
        future.complete(value);
    }

    static void fail(CompletableFuture<?> future, Throwable error) {
        future.completeExceptionally(error);
    }

    /** A runtime thread was attached to the JVM (once per thread) to complete futures. */
    static void threadAttached(String name) {
        Thread.currentThread().setName(name);
    }
}
