package dev.rl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.redisson.Redisson;
import org.redisson.api.RScript;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

/**
 * A fleet mid-migration: 16 threads are the design's script-calling gateways (Redisson, the script
 * loaded from {@code lua/sliding_window.lua} and called by EVALSHA with the design's 2 keys and 6
 * arguments, hash-tagged), 16 threads use the native {@link RateLimiter}, all on one key. Together
 * they offer 3x the limit per window for 3 windows, and never get more than the limit admitted in
 * any window.
 *
 * <p><b>How exactness is measured.</b> The script's reply carries no time, and client clocks
 * would only bracket it. But the window's own record does: the key is a Redis LIST of buckets
 * {@code <ms>:<count>}, one per Redis-server millisecond that admitted anything (the newest one
 * inside the header item, see {@link TestSupport#windowBuckets}), written by the same atomic
 * script for both kinds of caller. A bucket for ms {@code t} is final once Redis time passes
 * {@code t}, and stays in the list until an admission at Redis time {@code >= t + window} drops
 * it; so a sampler that reads the whole list (one atomic LRANGE) every 50 ms, far more often than
 * once a window, sees every bucket with its final count (the maximum count seen per ms). From
 * those buckets the test then checks:
 * <ol>
 *   <li>completeness: their total equals the permits both kinds of client were told were admitted
 *       (so the record is the whole truth, nothing missed or invented);</li>
 *   <li>consistency: for every ms, the native decisions admitted at that {@code nowMs} are at most
 *       that bucket's count (the native times are the same Redis clock);</li>
 *   <li>exactness: the most permits in any span {@code (t - window, t]} equals the limit.</li>
 * </ol>
 */
class MixedFleetTest {
    static final int SCRIPT_THREADS = 16;
    static final int NATIVE_THREADS = 16;
    static final long LIMIT = 300;
    static final long WINDOW_MS = 1000;
    static final int WINDOWS = 3;

    private long maxGapNanos;

    @Test
    void scriptGatewaysAndNativeLimiterShareOneExactWindow() throws Exception {
        String lua = Files.readString(Path.of(System.getProperty("rl.script.path", "../lua/sliding_window.lua")),
                StandardCharsets.UTF_8);
        String apiKey = TestSupport.key("mixed");
        Config config = new Config();
        config.useSingleServer()
                .setAddress("redis://127.0.0.1:" + TestSupport.redisPort())
                .setConnectionMinimumIdleSize(4)
                .setConnectionPoolSize(SCRIPT_THREADS);
        RedissonClient redisson = Redisson.create(config);
        Map<Long, Long> buckets = new ConcurrentHashMap<>();
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicLong scriptAdmitted = new AtomicLong();
        AtomicLong scriptDenied = new AtomicLong();
        List<Decision> nativeDecisions = java.util.Collections.synchronizedList(new ArrayList<>());
        try (RateLimiter limiter = TestSupport.redis().build(); TestRedis sampler = TestRedis.connect()) {
            String zkey = "rl:{" + apiKey + "}";
            assertEquals(zkey, limiter.redisKey(apiKey), "the script callers' key is the native limiter's key");
            RScript script = redisson.getScript(StringCodec.INSTANCE);
            String sha = script.scriptLoad(lua);
            // The file the gateways load is the script compiled into the native library (a fleet
            // must run one version of the script: the layout of a window belongs to it).
            assertEquals(RateLimiter.scriptSha(), sha, "lua/sliding_window.lua differs from the script in librl_java");
            assertEquals(RateLimiter.scriptSource(), lua);
            // A script gateway, exactly as the design's Java caller (section 2.2), done right.
            ScriptGateway gateway = new ScriptGateway(script, sha, "gw-test");
            assertEquals(List.of(1L, LIMIT - 1, 1L, "normal"), gateway.raw(TestSupport.key("probe"), WINDOW_MS, LIMIT));

            long offersPerThread = 3 * LIMIT * WINDOWS / (SCRIPT_THREADS + NATIVE_THREADS);
            long durationNanos = TimeUnit.MILLISECONDS.toNanos(WINDOW_MS * WINDOWS);
            int threadsTotal = SCRIPT_THREADS + NATIVE_THREADS;
            CountDownLatch go = new CountDownLatch(1);
            List<Thread> threads = new ArrayList<>();
            long start = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(100);
            for (int t = 0; t < threadsTotal; t++) {
                final int id = t;
                final boolean native_ = t % 2 == 0;
                Thread th = new Thread(() -> {
                    try {
                        go.await();
                        for (long i = 0; i < offersPerThread; i++) {
                            TestSupport.sleepUntil(start + (i * threadsTotal + id) * durationNanos / (offersPerThread * threadsTotal));
                            if (native_) {
                                nativeDecisions.add(limiter.acquire(apiKey, LIMIT, WINDOW_MS));
                            } else {
                                RateLimitResult r = gateway.tryAcquire(apiKey, WINDOW_MS, (int) LIMIT);
                                assertEquals(LIMIT, r.remaining() + r.current(), r.toString());
                                assertTrue(r.current() <= LIMIT, r.toString());
                                (r.allowed() ? scriptAdmitted : scriptDenied).incrementAndGet();
                            }
                        }
                    } catch (Throwable e) {
                        failure.compareAndSet(null, e);
                    }
                }, (native_ ? "native-" : "script-") + t);
                th.start();
                threads.add(th);
            }
            go.countDown();
            // The sampler: one atomic LRANGE of the whole window every 50 ms.
            long last = System.nanoTime();
            while (threads.stream().anyMatch(Thread::isAlive)) {
                sample(sampler, zkey, buckets);
                long now = System.nanoTime();
                maxGapNanos = Math.max(maxGapNanos, now - last);
                last = now;
                Thread.sleep(50);
            }
            for (Thread th : threads) {
                th.join();
            }
            sample(sampler, zkey, buckets);
        } finally {
            redisson.shutdown();
        }
        if (failure.get() != null) {
            throw new AssertionError(failure.get());
        }

        long nativeAdmitted = nativeDecisions.stream().filter(Decision::allowed).count();
        long recorded = buckets.values().stream().mapToLong(Long::longValue).sum();
        assertTrue(scriptAdmitted.get() > 0 && nativeAdmitted > 0, "both kinds of caller got permits");
        // 1. completeness
        assertEquals(scriptAdmitted.get() + nativeAdmitted, recorded,
                "every admitted permit, script or native, is in the window's record (largest gap between samples: "
                        + TimeUnit.NANOSECONDS.toMillis(maxGapNanos) + " ms; script " + scriptAdmitted + ", native "
                        + nativeAdmitted + ")");
        // 2. consistency of the native decisions' Redis times with the record
        Map<Long, Long> nativePerMs = new HashMap<>();
        for (Decision d : nativeDecisions) {
            if (d.allowed()) {
                nativePerMs.merge(d.nowMs(), 1L, Long::sum);
            }
        }
        nativePerMs.forEach((ms, n) -> assertTrue(buckets.getOrDefault(ms, 0L) >= n,
                "native admissions at " + ms + " ms: " + n + ", bucket: " + buckets.get(ms)));
        // 3. exactness
        List<long[]> admitted = new ArrayList<>();
        buckets.forEach((ms, n) -> admitted.add(new long[] {ms, n}));
        long max = TestSupport.maxInAnyWindow(admitted, WINDOW_MS);
        System.out.printf("MixedFleetTest: script gateways admitted %d (denied %d), native admitted %d (denied %d); "
                        + "%d buckets; max in any %d ms window: %d (limit %d)%n",
                scriptAdmitted.get(), scriptDenied.get(), nativeAdmitted, nativeDecisions.size() - nativeAdmitted,
                buckets.size(), WINDOW_MS, max, LIMIT);
        assertEquals(LIMIT, max, "max admitted in any window, script and native together");
    }

    private static void sample(TestRedis redis, String zkey, Map<Long, Long> buckets) {
        List<?> items = (List<?>) redis.call("LRANGE", zkey, "0", "-1");
        if (!items.isEmpty()) {
            TestSupport.windowBuckets(items).forEach((ms, n) -> buckets.merge(ms, n, Math::max));
        }
    }

    /**
     * The design's {@code SlidingWindowRateLimiter.tryAcquire}, as a script-calling gateway runs it,
     * with what SPEC §3 says it got wrong fixed on the caller's side: EVALSHA of the loaded
     * script's SHA (not of a file name), hash-tagged keys that share one Cluster slot and the
     * native layout, and a typed parse of the mixed reply (three integers and a string).
     */
    static final class ScriptGateway {
        private final RScript script;
        private final String sha;
        private final String clientId;

        ScriptGateway(RScript script, String sha, String clientId) {
            this.script = script;
            this.sha = sha;
            this.clientId = clientId;
        }

        List<Object> raw(String apiKey, long windowMs, long maxReq) {
            return script.evalSha(RScript.Mode.READ_WRITE, sha, RScript.ReturnType.MULTI,
                    List.of("rl:{" + apiKey + "}", "rl:cfg:{" + apiKey + "}"),
                    Long.toString(System.currentTimeMillis()), // checked, then ignored: Redis TIME decides
                    Long.toString(windowMs), Long.toString(maxReq), "0", "0", clientId);
        }

        RateLimitResult tryAcquire(String apiKey, long windowMs, int maxReq) {
            List<Object> r = raw(apiKey, windowMs, maxReq);
            long allowed = ((Number) r.get(0)).longValue();
            if (allowed < 0) {
                throw new IllegalArgumentException("the script rejected its arguments: " + r);
            }
            return new RateLimitResult(allowed == 1, ((Number) r.get(1)).longValue(), ((Number) r.get(2)).longValue(),
                    (String) r.get(3));
        }
    }
}
