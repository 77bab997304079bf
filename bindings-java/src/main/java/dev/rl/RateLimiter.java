package dev.rl;

import java.lang.ref.Cleaner;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;

/**
 * An exact sliding-window rate limiter: at most {@code limit} permits in ANY span of
 * {@code windowMs} milliseconds per key, shared by every process (in any language) that uses the
 * same Redis, decided by one atomic Lua script call on Redis's own clock. Backed by the native rl
 * core through JNI.
 *
 * <pre>{@code
 * try (RateLimiter limiter = RateLimiter.builder("redis://127.0.0.1:6379/").build()) {
 *     Decision d = limiter.acquire("api:order:create", 5000, 1000);
 *     if (!d.allowed()) {
 *         // 429, Retry-After: d.retryAfterMs()
 *     }
 * }
 * }</pre>
 *
 * <p>One instance per Redis deployment is enough for a whole process: it is thread-safe, keeps one
 * multiplexed, self-reconnecting connection, and limit and window are per call (a threshold change
 * needs no restart). Keys are {@code String}s (sent as UTF-8) or raw {@code byte[]}s; the same
 * characters give the same key either way.
 *
 * <p><b>Errors.</b> Bad arguments (null, empty key, limit/window/cost out of range, cost above the
 * limit) throw {@link IllegalArgumentException} naming the value, and nothing is sent to Redis;
 * {@code acquireAsync} throws them too, at the call. Backend failures are
 * {@link RateLimitException}s with a {@link RateLimitException#code() code}:
 * {@link BackendUnavailableException} when Redis does not answer within the configured timeout
 * (from {@code acquire}/{@code peek} only with {@link Builder#localFallback(boolean) localFallback(false)}),
 * {@link BackendErrorException} for an error reply, {@link ClockSkewException}. Any use after
 * {@link #close()} throws {@link IllegalStateException}.
 *
 * <p><b>Local fallback.</b> By default, while Redis is unreachable, failing, or slower than
 * {@link Builder#degradeRtt(Duration)} for {@link Builder#degradeAfter(Duration)}, {@code acquire}
 * and {@code peek} decide in process against this instance's share of the limit
 * ({@code limit / instances}) and report {@code mode() == "local"}; background probes return the
 * limiter to Redis when it answers fast again. {@link #stats()} shows which path decides now.
 *
 * <p><b>Async.</b> The {@code *Async} methods never block a Java thread: the call is sent from the
 * calling thread and the returned future is completed by a thread of the core's runtime. Dependent
 * stages added with {@code thenApply}/{@code thenAccept} run on that thread, so keep them short or
 * use the {@code *Async(fn, executor)} variants, or set {@link Builder#completionExecutor(Executor)}.
 */
public final class RateLimiter implements AutoCloseable {
    private static final Cleaner CLEANER = Cleaner.create();

    private final NativeHandle handle;
    private final Cleaner.Cleanable cleanable;
    private final Executor completionExecutor;
    private final String backend;

    private RateLimiter(long raw, Executor completionExecutor) {
        String kind;
        try {
            kind = Native.backend(raw);
        } catch (RuntimeException | Error e) {
            Native.close(raw);
            throw e;
        }
        this.backend = kind;
        this.completionExecutor = completionExecutor;
        this.handle = new NativeHandle(raw);
        // A limiter dropped without close() still frees its native side (and its connection).
        this.cleanable = CLEANER.register(this, handle);
    }

    /**
     * A builder for a limiter on {@code url}: {@code redis://[user:password@]host:port/db},
     * {@code rediss://} for TLS, {@code redis+sentinel://host:port,host:port/<master>[/db]},
     * {@code redis+cluster://host:port,host:port} (and {@code rediss+} variants), or
     * {@code memory://} for the in-process backend (exact within one process, nothing shared).
     */
    public static Builder builder(String url) {
        if (url == null) {
            throw new IllegalArgumentException("invalid argument `url`: must not be null (use \"memory://\" for the in-process backend)");
        }
        return new Builder(url);
    }

    /** A limiter on {@code url} with default options. */
    public static RateLimiter open(String url) {
        return builder(url).build();
    }

    // ---- the design's shape ---------------------------------------------------------------

    /**
     * The design document's call: one permit from {@code apiKey}'s window of {@code maxReq} per
     * {@code windowMs}. A gateway that called {@code sliding_window.lua} with keys
     * {@code rl:{apiKey}} / {@code rl:cfg:{apiKey}} counts against this same window.
     */
    public RateLimitResult tryAcquire(String apiKey, long windowMs, int maxReq) {
        return acquire(apiKey, maxReq, windowMs, 1).toResult();
    }

    /** {@link #tryAcquire(String, long, int)} without blocking. */
    public CompletableFuture<RateLimitResult> tryAcquireAsync(String apiKey, long windowMs, int maxReq) {
        return acquireAsync(apiKey, maxReq, windowMs, 1).thenApply(Decision::toResult);
    }

    // ---- acquire ------------------------------------------------------------------------

    /** Takes one permit from {@code key}'s window if it fits. */
    public Decision acquire(String key, long limit, long windowMs) {
        return acquire(key, limit, windowMs, 1);
    }

    /**
     * Takes {@code cost} permits from {@code key}'s window if they fit: at most {@code limit} permits
     * in any {@code windowMs} span. A denied request takes nothing.
     */
    public Decision acquire(String key, long limit, long windowMs, long cost) {
        return acquire(utf8(key), limit, windowMs, cost);
    }

    /** {@link #acquire(String, long, long)} with a binary key. */
    public Decision acquire(byte[] key, long limit, long windowMs) {
        return acquire(key, limit, windowMs, 1);
    }

    /** {@link #acquire(String, long, long, long)} with a binary key. */
    public Decision acquire(byte[] key, long limit, long windowMs, long cost) {
        long h = handle.enter();
        try {
            return Native.decisionOf(Native.acquire(h, key, limit, windowMs, cost), 0);
        } finally {
            handle.exit();
        }
    }

    /** {@link #acquire(String, long, long)} without blocking. */
    public CompletableFuture<Decision> acquireAsync(String key, long limit, long windowMs) {
        return acquireAsync(key, limit, windowMs, 1);
    }

    /** {@link #acquire(String, long, long, long)} without blocking. */
    public CompletableFuture<Decision> acquireAsync(String key, long limit, long windowMs, long cost) {
        return acquireAsync(utf8(key), limit, windowMs, cost);
    }

    /** {@link #acquire(byte[], long, long)} without blocking. */
    public CompletableFuture<Decision> acquireAsync(byte[] key, long limit, long windowMs) {
        return acquireAsync(key, limit, windowMs, 1);
    }

    /** {@link #acquire(byte[], long, long, long)} without blocking. */
    public CompletableFuture<Decision> acquireAsync(byte[] key, long limit, long windowMs, long cost) {
        CompletableFuture<Decision> future = new CompletableFuture<>();
        long[] now;
        long h = handle.enter();
        try {
            now = Native.acquireAsync(h, key, limit, windowMs, cost, future);
        } finally {
            handle.exit();
        }
        if (now != null) {
            future.complete(Native.decisionOf(now, 0));
        }
        return hop(future);
    }

    // ---- several rules at once ---------------------------------------------------------------

    /**
     * Takes every rule's cost if every rule fits, else nothing from any: one atomic decision (on
     * Redis, one script call). Typical uses: per-IP + per-user limits on one request, or a burst and
     * a daily limit on one key ({@code Policy.parseAll("burst: 100/s; 5000/h")}). Keys of one call
     * must share a Redis Cluster slot unless {@code group} (nullable) names one for them; at most
     * 16 rules. Bad values throw {@link IllegalArgumentException} naming the value and its rule.
     */
    public CompositeDecision acquireAll(List<Rule> rules, String group) {
        Rules r = Rules.of(rules, group);
        long h = handle.enter();
        try {
            return Native.compositeOf(Native.acquireAll(h, r.keys, r.limits, r.windows, r.costs, r.group));
        } finally {
            handle.exit();
        }
    }

    /** {@link #acquireAll(List, String)} without blocking; argument errors throw at the call. */
    public CompletableFuture<CompositeDecision> acquireAllAsync(List<Rule> rules, String group) {
        Rules r = Rules.of(rules, group);
        CompletableFuture<CompositeDecision> future = new CompletableFuture<>();
        long[] now;
        long h = handle.enter();
        try {
            now = Native.acquireAllAsync(h, r.keys, r.limits, r.windows, r.costs, r.group, future);
        } finally {
            handle.exit();
        }
        if (now != null) {
            future.complete(Native.compositeOf(now));
        }
        return hop(future);
    }

    /**
     * One request under a middleware's policies: each policy on {@code key} asking {@code cost},
     * all or nothing ({@link #acquireAll}), and the response fields and problem body rendered
     * from the decision, in one native call. Bad values throw {@link IllegalArgumentException}
     * naming {@code policies}, {@code key}, {@code cost} or {@code group}.
     */
    public PolicyResponse acquirePolicies(PreparedPolicies policies, String key, long cost, String group) {
        byte[] k = utf8(key);
        byte[] g = group == null ? null : group.getBytes(StandardCharsets.UTF_8);
        long p = policiesHandle(policies);
        long[] out = Native.policyLongs(policies.size);
        byte[] text = new byte[policies.textCapacity];
        byte[] big;
        long h = handle.enter();
        try {
            big = Native.acquirePolicies(h, p, k, cost, g, out, text);
        } finally {
            handle.exit();
            java.lang.ref.Reference.reachabilityFence(policies);
        }
        return Native.policyResponseOf(out, big == null ? text : big);
    }

    /**
     * {@link #acquirePolicies} without blocking; argument errors throw at the call. A request
     * decided at once (a lease, the denial cache, memory) returns a completed future.
     */
    public CompletableFuture<PolicyResponse> acquirePoliciesAsync(PreparedPolicies policies, String key, long cost,
            String group) {
        byte[] k = utf8(key);
        byte[] g = group == null ? null : group.getBytes(StandardCharsets.UTF_8);
        long p = policiesHandle(policies);
        CompletableFuture<Object[]> future = new CompletableFuture<>();
        long[] out = Native.policyLongs(policies.size);
        byte[] text = new byte[policies.textCapacity];
        byte[] big;
        long h = handle.enter();
        try {
            big = Native.acquirePoliciesAsync(h, p, k, cost, g, future, out, text);
        } finally {
            handle.exit();
            java.lang.ref.Reference.reachabilityFence(policies);
        }
        if (!Native.pending(out)) {
            return hop(CompletableFuture.completedFuture(Native.policyResponseOf(out, big == null ? text : big)));
        }
        return hop(future.thenApply(Native::policyResponseOf));
    }

    private static long policiesHandle(PreparedPolicies policies) {
        if (policies == null) {
            throw new IllegalArgumentException("invalid argument `policies`: must not be null");
        }
        return policies.handle;
    }

    /**
     * Forgets everything admitted on {@code key} inside {@code group}: the window
     * {@link #acquireAll(List, String)} keeps for {@code key} with that group. The same key
     * ungrouped or in another group is untouched (each is a window of its own); a null
     * {@code group} makes this {@link #reset(String)}. Bad values throw
     * {@link IllegalArgumentException} naming {@code key} or {@code group}, before any I/O.
     *
     * @param key   the key, as in the call's {@link Rule} (UTF-8)
     * @param group the group the calls named, or null
     */
    public void resetInGroup(String key, String group) {
        byte[] k = utf8(key);
        byte[] g = group == null ? null : group.getBytes(StandardCharsets.UTF_8);
        long h = handle.enter();
        try {
            Native.resetInGroup(h, k, g);
        } finally {
            handle.exit();
        }
    }

    /** {@link #resetInGroup(String, String)} without blocking; argument errors throw at the call. */
    public CompletableFuture<Void> resetInGroupAsync(String key, String group) {
        byte[] k = utf8(key);
        byte[] g = group == null ? null : group.getBytes(StandardCharsets.UTF_8);
        CompletableFuture<Void> future = new CompletableFuture<>();
        long h = handle.enter();
        try {
            Native.resetInGroupAsync(h, k, g, future);
        } finally {
            handle.exit();
        }
        return hop(future);
    }

    /** Rules as the parallel arrays the native call takes (a null key stays null: the core names it). */
    private record Rules(byte[][] keys, long[] limits, long[] windows, long[] costs, byte[] group) {
        static Rules of(List<Rule> rules, String group) {
            if (rules == null) {
                throw new IllegalArgumentException("invalid argument `rules`: must not be null");
            }
            int n = rules.size();
            byte[][] keys = new byte[n][];
            long[] limits = new long[n];
            long[] windows = new long[n];
            long[] costs = new long[n];
            for (int i = 0; i < n; i++) {
                Rule r = rules.get(i);
                if (r == null) {
                    throw new IllegalArgumentException("invalid argument `rules`: rule " + i + " is null");
                }
                keys[i] = r.key() == null ? null : r.key().getBytes(StandardCharsets.UTF_8);
                limits[i] = r.limit();
                windows[i] = r.windowMs();
                costs[i] = r.cost();
            }
            byte[] g = group == null ? null : group.getBytes(StandardCharsets.UTF_8);
            return new Rules(keys, limits, windows, costs, g);
        }
    }

    // ---- peek, reset, ping ----------------------------------------------------------------

    /** The window's state without taking anything; {@code allowed} tells whether one permit would fit. */
    public Decision peek(String key, long limit, long windowMs) {
        return peek(utf8(key), limit, windowMs);
    }

    /** {@link #peek(String, long, long)} with a binary key. */
    public Decision peek(byte[] key, long limit, long windowMs) {
        long h = handle.enter();
        try {
            return Native.peek(h, key, limit, windowMs);
        } finally {
            handle.exit();
        }
    }

    /** {@link #peek(String, long, long)} without blocking. */
    public CompletableFuture<Decision> peekAsync(String key, long limit, long windowMs) {
        return peekAsync(utf8(key), limit, windowMs);
    }

    /** {@link #peek(byte[], long, long)} without blocking. */
    public CompletableFuture<Decision> peekAsync(byte[] key, long limit, long windowMs) {
        CompletableFuture<Decision> future = new CompletableFuture<>();
        long h = handle.enter();
        try {
            Native.peekAsync(h, key, limit, windowMs, future);
        } finally {
            handle.exit();
        }
        return hop(future);
    }

    /** Forgets everything admitted on {@code key}. */
    public void reset(String key) {
        reset(utf8(key));
    }

    /** {@link #reset(String)} with a binary key. */
    public void reset(byte[] key) {
        long h = handle.enter();
        try {
            Native.reset(h, key);
        } finally {
            handle.exit();
        }
    }

    /** {@link #reset(String)} without blocking. */
    public CompletableFuture<Void> resetAsync(String key) {
        return resetAsync(utf8(key));
    }

    /** {@link #reset(byte[])} without blocking. */
    public CompletableFuture<Void> resetAsync(byte[] key) {
        CompletableFuture<Void> future = new CompletableFuture<>();
        long h = handle.enter();
        try {
            Native.resetAsync(h, key, future);
        } finally {
            handle.exit();
        }
        return hop(future);
    }

    /**
     * Checks that the backend answers (connecting if needed), for readiness probes and fail-fast
     * startup. Throws {@link BackendUnavailableException} if it does not in time.
     */
    public void ping() {
        long h = handle.enter();
        try {
            Native.ping(h);
        } finally {
            handle.exit();
        }
    }

    // ---- introspection and lifecycle --------------------------------------------------------

    /**
     * The limiter's statistics: the path new decisions take now, decisions per path, the local
     * fallback's transitions and current state, Redis errors, retries, probes and repairs, and Redis
     * round trips. Never blocks and does no I/O.
     */
    public Stats stats() {
        long h = handle.enter();
        try {
            return Native.stats(h);
        } finally {
            handle.exit();
        }
    }

    /**
     * The Lua script this library runs ({@code lua/sliding_window.lua} of the rl version it was
     * built from). A gateway that still calls the script by EVALSHA during a migration should
     * {@code SCRIPT LOAD} exactly this text, so both kinds of caller share the same window layout.
     */
    public static String scriptSource() {
        return Native.scriptSource();
    }

    /** The SHA1 of {@link #scriptSource()}: what EVALSHA takes. */
    public static String scriptSha() {
        return Native.scriptSha();
    }

    /** {@code "redis"} or {@code "memory"}. */
    public String backend() {
        return backend;
    }

    /**
     * The Redis key that holds {@code key}'s window, e.g. {@code rl:{api:order:create}} for
     * {@code api:order:create}: what a script-calling gateway passes as {@code KEYS[1]} to share it.
     * ({@code %}, <code>{</code> and <code>}</code> in a key are escaped as {@code %25},
     * {@code %7B}, {@code %7D}.)
     */
    public String redisKey(String key) {
        return new String(redisKey(utf8(key)), StandardCharsets.UTF_8);
    }

    /** {@link #redisKey(String)} for a binary key. */
    public byte[] redisKey(byte[] key) {
        long h = handle.enter();
        try {
            return Native.redisKey(h, key);
        } finally {
            handle.exit();
        }
    }

    /** Whether {@link #close()} was called. */
    public boolean isClosed() {
        return handle.isClosed();
    }

    /**
     * Returns this limiter's unused leases to Redis (waiting for that, at most the request timeout
     * per leased key; leases Redis cannot take back age out, as after a crash, and close never
     * throws for it), then releases the native limiter and its connection. Idempotent and
     * thread-safe; calls in flight finish normally (the memory is freed when the last one
     * returns), later calls throw {@link IllegalStateException}. A limiter dropped without close
     * is freed by a {@link Cleaner} but does not return its leases.
     */
    @Override
    public void close() {
        if (!handle.isClosed()) {
            long h;
            try {
                h = handle.enter();
            } catch (IllegalStateException closedMeanwhile) {
                return;
            }
            try {
                Native.returnLeases(h);
            } finally {
                handle.exit();
            }
        }
        cleanable.clean();
    }

    @Override
    public String toString() {
        return "RateLimiter[" + backend + (isClosed() ? ", closed]" : "]");
    }

    private <T> CompletableFuture<T> hop(CompletableFuture<T> future) {
        if (completionExecutor == null) {
            return future;
        }
        return future.whenCompleteAsync((value, error) -> {}, completionExecutor);
    }

    private static byte[] utf8(String key) {
        if (key == null) {
            throw new IllegalArgumentException("invalid argument `key`: must not be null");
        }
        return key.getBytes(StandardCharsets.UTF_8);
    }

    /**
     * Options of a {@link RateLimiter}. The option setters come from {@link OptionsBuilder},
     * generated from rl-core's option table (each with its doc, default and accepted range); only
     * the options set are passed to the core, which holds every default and rule.
     */
    public static final class Builder extends OptionsBuilder<Builder> {
        private final String url;
        private Executor completionExecutor;

        private Builder(String url) {
            this.url = url;
        }

        /**
         * Completes the {@code *Async} futures on {@code executor} instead of the core's runtime
         * thread, for dependent stages that block. Default none (fastest).
         */
        public Builder completionExecutor(Executor executor) {
            this.completionExecutor = executor;
            return this;
        }

        /**
         * The limiter. Does no I/O (Redis is connected on first use; call {@link RateLimiter#ping()}
         * to fail fast); throws {@link IllegalArgumentException} for a bad URL or option, naming
         * the option as its setter is spelled (e.g. {@code retryDelayMs}).
         */
        public RateLimiter build() {
            String[] names = options.keySet().toArray(new String[0]);
            Object[] values = options.values().toArray();
            return new RateLimiter(Native.open(url, names, values), completionExecutor);
        }
    }
}
