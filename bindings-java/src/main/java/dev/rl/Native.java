package dev.rl;

import java.util.concurrent.CompletableFuture;

/**
 * The JNI surface of {@code librl_java} (see {@code bindings-java/src/lib.rs}). Package-private:
 * {@link RateLimiter} is the API. The {@code native} methods throw what {@link #error} makes; the
 * static Java methods below are called from native code (method ids cached by {@link #init}), so
 * exceptions and results are built in Java, with this class's loader, on any thread. {@link Stats}
 * is made by its canonical constructor, whose components native code derives from rl-core's table.
 */
final class Native {
    /** Must equal {@code ABI_VERSION} in lib.rs. */
    static final int ABI_VERSION = 5;

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

    /**
     * A limiter on {@code url} with the options a builder was given: {@code names[i]} (rl-core's
     * external snake_case names) set to {@code values[i]} (a boxed number, {@code Boolean},
     * {@code String}, {@code Duration}, or {@code null} for the default). The core holds every
     * default and rule; its errors name the option as Java spells it.
     */
    static native long open(String url, String[] names, Object[] values);

    static native void close(long handle);

    /** The core's close: returns unused leases to Redis (blocking; never throws for Redis). */
    static native void returnLeases(long handle);

    static native String scriptSource();

    static native String scriptSha();

    static native String backend(long handle);

    static native byte[] redisKey(long handle, byte[] key);

    /** The decision as {@link #decisionOf} reads it. */
    static native long[] acquire(long handle, byte[] key, long limit, long windowMs, long cost);

    static native Decision peek(long handle, byte[] key, long limit, long windowMs);

    static native void reset(long handle, byte[] key);

    static native void ping(long handle);

    static native Stats stats(long handle);

    /**
     * The decision ({@link #decisionOf}) when it was made at once, for the caller to complete
     * {@code future} with; null when {@code future} is completed by native code.
     */
    static native long[] acquireAsync(long handle, byte[] key, long limit, long windowMs, long cost,
            CompletableFuture<Decision> future);

    static native void peekAsync(long handle, byte[] key, long limit, long windowMs,
            CompletableFuture<Decision> future);

    static native void resetAsync(long handle, byte[] key, CompletableFuture<Void> future);

    /** The decision as {@link #compositeOf} reads it. */
    static native long[] acquireAll(long handle, byte[][] keys, long[] limits, long[] windowsMs,
            long[] costs, byte[] group);

    static native void resetInGroup(long handle, byte[] key, byte[] group);

    static native void resetInGroupAsync(long handle, byte[] key, byte[] group, CompletableFuture<Void> future);

    /** As {@link #acquireAsync}: the decision ({@link #compositeOf}) if made at once, else null. */
    static native long[] acquireAllAsync(long handle, byte[][] keys, long[] limits, long[] windowsMs,
            long[] costs, byte[] group, CompletableFuture<CompositeDecision> future);

    /** {@code [String[] names, long[] limits, long[] windowsMs]} of a policy string. */
    static native Object[] parsePolicies(String text);

    /** The core's check of a policy; its name (canonical text when {@code name} is null). */
    static native String policyName(String name, long limit, long windowMs);

    /** Response fields as {@code [name0, value0, name1, value1, ...]}; decisions six longs each. */
    static native String[] renderHeaders(String[] names, long[] limits, long[] windowsMs, long[] decisions,
            boolean allowed, long retryAfterMs, String style);

    static native String problemBody(String[] names, long[] limits, long[] windowsMs, long[] decisions,
            long retryAfterMs);

    static native String problemContentType();

    /** {@link PreparedPolicies#of}: a handle freed by {@link #freePolicies}. */
    static native long preparePolicies(String[] names, long[] limits, long[] windowsMs, String style);

    static native void freePolicies(long policies);

    /** {@code [long[] decision, String[] fields, String body]} ({@link #policyResponseOf}). */
    static native Object[] acquirePolicies(long handle, long policies, byte[] key, long cost, byte[] group);

    /** The same when decided at once; null when {@code future} is completed with it by native code. */
    static native Object[] acquirePoliciesAsync(long handle, long policies, byte[] key, long cost, byte[] group,
            CompletableFuture<Object[]> future);

    /** The names of rl-core's modes ({@code Mode::ALL}), in order. */
    private static native String[] modes();

    // ---- called from native code ------------------------------------------------------------

    /** A decision's mode crosses JNI as its index here; interned, so each is one shared string. */
    static final String[] MODES = interned(modes());

    private static String[] interned(String[] names) {
        for (int i = 0; i < names.length; i++) {
            names[i] = names[i].intern();
        }
        return names;
    }

    static Decision decision(boolean allowed, long remaining, long used, long retryAfterMs, long resetAfterMs,
            int mode, long nowMs) {
        return new Decision(allowed, remaining, used, retryAfterMs, resetAfterMs, MODES[mode], nowMs);
    }

    /**
     * A decision from seven longs at {@code at}: allowed (0/1), remaining, used, retryAfterMs,
     * resetAfterMs, the mode's index in {@link #MODES}, nowMs. Calls answered on the caller's
     * thread return their decision this way rather than build it by calling back into Java, which
     * costs most where it matters: a gateway's request every few ms, on cold caches.
     */
    static Decision decisionOf(long[] f, int at) {
        return new Decision(f[at] != 0, f[at + 1], f[at + 2], f[at + 3], f[at + 4], MODES[(int) f[at + 5]], f[at + 6]);
    }

    /** A composite decision: allowed (0/1), retryAfterMs, mode index, nowMs, then seven longs per rule. */
    static CompositeDecision compositeOf(long[] f) {
        Decision[] ds = new Decision[(f.length - 4) / 7];
        for (int i = 0; i < ds.length; i++) {
            ds[i] = decisionOf(f, 4 + 7 * i);
        }
        return new CompositeDecision(f[0] != 0, f[1], MODES[(int) f[2]], f[3], java.util.List.of(ds));
    }

    /** A prepared-policies call's answer: the decision, the fields as name/value pairs, the body. */
    static PolicyResponse policyResponseOf(Object[] r) {
        String[] nv = (String[]) r[1];
        @SuppressWarnings("unchecked")
        java.util.Map.Entry<String, String>[] fields = new java.util.Map.Entry[nv.length / 2];
        for (int i = 0; i < fields.length; i++) {
            fields[i] = java.util.Map.entry(nv[2 * i], nv[2 * i + 1]);
        }
        return new PolicyResponse(compositeOf((long[]) r[0]), java.util.List.of(fields), (String) r[2]);
    }

    static CompositeDecision composite(boolean allowed, long retryAfterMs, int mode, long nowMs,
            Object[] decisions) {
        Decision[] ds = new Decision[decisions.length];
        for (int i = 0; i < ds.length; i++) {
            ds[i] = (Decision) decisions[i];
        }
        return new CompositeDecision(allowed, retryAfterMs, MODES[mode], nowMs, java.util.List.of(ds));
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
