package dev.rl;

import java.nio.charset.StandardCharsets;

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

    /**
     * Decides and writes the answer into {@code out} (sized by {@link #policyLongs}) and
     * {@code text}, or into a new array it returns when the text does not fit (null when it
     * does): see {@link #policyResponseOf}. Java allocates, native code only fills: objects made
     * from native code cost several times more on a middleware's cold path.
     */
    static native byte[] acquirePolicies(long handle, long policies, byte[] key, long cost, byte[] group,
            long[] out, byte[] text);

    /**
     * The same when decided at once. Otherwise {@code out} is left as it was (the fields' length
     * -1, see {@link #pending}) and native code completes {@code future} with
     * {@code Object[] {long[] out, byte[] text}}.
     */
    static native byte[] acquirePoliciesAsync(long handle, long policies, byte[] key, long cost, byte[] group,
            CompletableFuture<Object[]> future, long[] out, byte[] text);

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
        return compositeOf(f, f.length);
    }

    /** {@link #compositeOf(long[])} from the first {@code n} longs of {@code f}. */
    static CompositeDecision compositeOf(long[] f, int n) {
        Decision[] ds = new Decision[(n - 4) / 7];
        for (int i = 0; i < ds.length; i++) {
            ds[i] = decisionOf(f, 4 + 7 * i);
        }
        return new CompositeDecision(f[0] != 0, f[1], MODES[(int) f[2]], f[3], java.util.List.of(ds));
    }

    /** The longs of a prepared-policies answer for {@code policies} policies. */
    static long[] policyLongs(int policies) {
        long[] out = new long[4 + 7 * policies + 2];
        out[out.length - 2] = -1;
        return out;
    }

    /** Whether {@code out} ({@link #policyLongs}) is still unanswered. */
    static boolean pending(long[] out) {
        return out[out.length - 2] < 0;
    }

    /** A prepared-policies answer that came through the future: {@code Object[] {long[], byte[]}}. */
    static PolicyResponse policyResponseOf(Object[] r) {
        return policyResponseOf((long[]) r[0], (byte[]) r[1]);
    }

    /**
     * A prepared-policies answer: {@code out} holds the composite decision's longs
     * ({@link #compositeOf}), then the byte lengths of the fields and of the body (-1: none);
     * {@code text} holds each field as {@code name \n value \n}, then the body, in UTF-8.
     */
    static PolicyResponse policyResponseOf(long[] out, byte[] text) {
        int n = out.length - 2;
        int fieldsEnd = (int) out[n];
        int bodyLength = (int) out[n + 1];
        java.util.List<java.util.Map.Entry<String, String>> fields = new java.util.ArrayList<>(4);
        for (int at = 0; at < fieldsEnd;) {
            int nameEnd = indexOf(text, (byte) '\n', at);
            int valueEnd = indexOf(text, (byte) '\n', nameEnd + 1);
            fields.add(java.util.Map.entry(
                    new String(text, at, nameEnd - at, StandardCharsets.UTF_8),
                    new String(text, nameEnd + 1, valueEnd - nameEnd - 1, StandardCharsets.UTF_8)));
            at = valueEnd + 1;
        }
        String body = bodyLength < 0 ? null : new String(text, fieldsEnd, bodyLength, StandardCharsets.UTF_8);
        return new PolicyResponse(compositeOf(out, n), java.util.Collections.unmodifiableList(fields), body);
    }

    private static int indexOf(byte[] a, byte b, int from) {
        for (int i = from; i < a.length; i++) {
            if (a[i] == b) {
                return i;
            }
        }
        throw new IllegalStateException("rl: a malformed native answer (no field separator after " + from + ")");
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
