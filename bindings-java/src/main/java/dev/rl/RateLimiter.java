package dev.rl;

import java.lang.ref.Cleaner;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Objects;
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
            return Native.acquire(h, key, limit, windowMs, cost);
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
        long h = handle.enter();
        try {
            Native.acquireAsync(h, key, limit, windowMs, cost, future);
        } finally {
            handle.exit();
        }
        return hop(future);
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
     * Releases the native limiter and its connection. Idempotent and thread-safe; calls in flight
     * finish normally (the memory is freed when the last one returns), later calls throw
     * {@link IllegalStateException}.
     */
    @Override
    public void close() {
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

    /** Options of a {@link RateLimiter}; every one has a default that suits a gateway on a nearby Redis. */
    public static final class Builder {
        private final String url;
        private String keyPrefix;
        private Duration connectTimeout = Duration.ofMillis(500);
        private Duration requestTimeout = Duration.ofMillis(500);
        private boolean clientClock;
        private long maxClockSkewMs = 1000;
        private Duration retryDelay = Duration.ofMillis(50);
        private boolean localFallback = true;
        private Duration degradeRtt = Duration.ofMillis(5);
        private Duration degradeAfter = Duration.ofMillis(100);
        private Duration recoverRtt = Duration.ofMillis(2);
        private Duration recoverAfter = Duration.ofMillis(500);
        private boolean instancesSet;
        private long instances;
        private long localMaxKeys = 10_000;
        private Executor completionExecutor;

        private Builder(String url) {
            this.url = url;
        }

        /** Prepended to every Redis key; no braces (the hash tag is the user key). Default {@code "rl:"}. */
        public Builder keyPrefix(String keyPrefix) {
            this.keyPrefix = Objects.requireNonNull(keyPrefix, "keyPrefix");
            return this;
        }

        /** Longest wait to establish a connection (1 ms to 60 s). Default 500 ms. */
        public Builder connectTimeout(Duration timeout) {
            this.connectTimeout = Objects.requireNonNull(timeout, "connectTimeout");
            return this;
        }

        /**
         * Longest a caller waits for one decision, connecting included (1 ms to 60 s); past it the
         * call throws {@link BackendUnavailableException}. Default 500 ms.
         */
        public Builder requestTimeout(Duration timeout) {
            this.requestTimeout = Objects.requireNonNull(timeout, "requestTimeout");
            return this;
        }

        /**
         * Decide on this host's clock instead of Redis {@code TIME} (legacy callers, tests); each
         * call is refused with {@link ClockSkewException} when the clocks differ by more than
         * {@link #maxClockSkewMs(long)}. Default off: Redis time, immune to client clock drift.
         */
        public Builder clientClock(boolean on) {
            this.clientClock = on;
            return this;
        }

        /** Allowed distance between the client clock and Redis time. Default 1000 ms. */
        public Builder maxClockSkewMs(long ms) {
            this.maxClockSkewMs = ms;
            return this;
        }

        /**
         * Wait before the one retry of a call that failed with a connection-class error (refused or
         * dropped connection, {@code READONLY}, {@code LOADING}, {@code TRYAGAIN}, {@code CLUSTERDOWN},
         * {@code MASTERDOWN}, {@code BUSY}, {@code OOM}); at most the request timeout, zero allowed.
         * Default 50 ms (so a request timeout below 50 ms needs a shorter retry delay too).
         */
        public Builder retryDelay(Duration delay) {
            this.retryDelay = Objects.requireNonNull(delay, "retryDelay");
            return this;
        }

        /**
         * {@code true} (default): while Redis is unhealthy, {@code acquire} and {@code peek} decide
         * locally ({@code mode() == "local"}, against {@code limit / instances}) instead of throwing.
         * {@code false}: they throw {@link BackendUnavailableException} when Redis cannot be reached.
         */
        public Builder localFallback(boolean on) {
            this.localFallback = on;
            return this;
        }

        /**
         * Normal to local when the round trips of real calls stay above this (1 ms to 60 s) for
         * {@link #degradeAfter(Duration)}. Default 5 ms.
         */
        public Builder degradeRtt(Duration rtt) {
            this.degradeRtt = Objects.requireNonNull(rtt, "degradeRtt");
            return this;
        }

        /** See {@link #degradeRtt(Duration)} (1 ms to 60 s). Default 100 ms. */
        public Builder degradeAfter(Duration period) {
            this.degradeAfter = Objects.requireNonNull(period, "degradeAfter");
            return this;
        }

        /**
         * Local to normal when background probes see round trips below this (1 ms to 60 s, at most
         * {@link #degradeRtt(Duration)}) for {@link #recoverAfter(Duration)}. Default 2 ms.
         */
        public Builder recoverRtt(Duration rtt) {
            this.recoverRtt = Objects.requireNonNull(rtt, "recoverRtt");
            return this;
        }

        /** See {@link #recoverRtt(Duration)} (1 ms to 60 s). Default 500 ms. */
        public Builder recoverAfter(Duration period) {
            this.recoverAfter = Objects.requireNonNull(period, "recoverAfter");
            return this;
        }

        /**
         * How many instances share each limit (1 to 1,000,000): the local budget is
         * {@code limit / instances}, rounded down. Default: discovered from the live instances'
         * heartbeats in Redis (8, the design's fleet size, before any was seen).
         */
        public Builder instances(long n) {
            this.instances = n;
            this.instancesSet = true;
            return this;
        }

        /** Most keys the local record keeps, least recently used forgotten first (1 to 10,000,000). Default 10,000. */
        public Builder localMaxKeys(long n) {
            this.localMaxKeys = n;
            return this;
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
         * to fail fast); throws {@link IllegalArgumentException} for a bad URL or option.
         */
        public RateLimiter build() {
            long raw = Native.open(url, keyPrefix, millis("connect_timeout", connectTimeout),
                    millis("request_timeout", requestTimeout), clientClock, maxClockSkewMs,
                    millis("retry_delay", retryDelay), localFallback, millis("degrade_rtt", degradeRtt),
                    millis("degrade_after", degradeAfter), millis("recover_rtt", recoverRtt),
                    millis("recover_after", recoverAfter), instancesSet, instances, localMaxKeys);
            return new RateLimiter(raw, completionExecutor);
        }

        private static long millis(String name, Duration d) {
            try {
                return d.toMillis();
            } catch (ArithmeticException e) {
                throw new IllegalArgumentException("invalid argument `" + name + "`: " + d + " is out of range");
            }
        }
    }
}
