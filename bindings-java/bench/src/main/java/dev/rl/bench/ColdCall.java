package dev.rl.bench;

import dev.rl.HeaderStyle;
import dev.rl.PolicyResponse;
import dev.rl.PreparedPolicies;
import dev.rl.RateLimiter;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * One prepared-policies call every few ms, as a middleware at moderate load makes them, timed
 * from the call to the fields in a map: what a call costs from Java when the caches are cold,
 * beside {@code cargo run --release -p rl-cli --example cold_call} (the core alone, the same
 * arguments). 300,000 calls in a closed loop first, so the JIT has compiled the path.
 *
 * <pre>
 * MAIN=dev.rl.bench.ColdCall bash bindings-java/bench/run.sh [URL] [SWEEP_MB] [GAP_MS] [N] [async|sync]
 * </pre>
 * URL {@code memory://} (the default), or the private Redis's ({@code redis}), which decides from
 * leases; SWEEP_MB 0 (a sweep of that many MB between calls pushes code and data out of the
 * caches); GAP_MS 4; N 5000, the first fifth unmeasured. Prints P50 / P99 / P99.9, the measured
 * calls by mode (a probe of the lease path must show only {@code lease}) and the calls slower than
 * 60 µs with their mode's initial.
 */
public final class ColdCall {
    public static void main(String[] args) throws Exception {
        String url = arg(args, 0, "memory://");
        if (url.equals("redis")) {
            url = System.getenv("RL_TEST_REDIS_URL");
        }
        int sweepMb = Integer.parseInt(arg(args, 1, "0"));
        long gapMs = Long.parseLong(arg(args, 2, "4"));
        int n = Integer.parseInt(arg(args, 3, "5000"));
        boolean sync = arg(args, 4, "async").equals("sync");
        RateLimiter.Builder b = RateLimiter.builder(url);
        if (!url.startsWith("memory")) {
            b.option("leases", "on");
        }
        long sink = 0;
        try (RateLimiter limiter = b.build()) {
            PreparedPolicies policies = PreparedPolicies.of("500/s", HeaderStyle.IETF);
            for (int i = 0; i < 300_000; i++) {
                sink += call(limiter, policies, "warm-" + (i % 100), sync).headers().size();
            }
            byte[] sweep = new byte[sweepMb << 20];
            long[] took = new long[n];
            String[] modes = new String[n];
            for (int i = 0; i < n; i++) {
                Thread.sleep(gapMs);
                for (int j = 0; j < sweep.length; j += 64) {
                    sweep[j]++;
                }
                long t0 = System.nanoTime();
                PolicyResponse r = call(limiter, policies, "client-1", sync);
                took[i] = System.nanoTime() - t0;
                sink += r.headers().size();
                modes[i] = r.decision().mode();
            }
            long[] measured = Arrays.copyOfRange(took, n / 5, n);
            StringBuilder slow = new StringBuilder();
            int slowCount = 0;
            Map<String, Integer> byMode = new java.util.TreeMap<>();
            for (int i = n / 5; i < n; i++) {
                byMode.merge(modes[i], 1, Integer::sum);
                if (took[i] > 60_000) {
                    slowCount++;
                    slow.append(' ').append(i).append(':').append(took[i] / 1000).append(modes[i].charAt(0));
                }
            }
            Arrays.sort(measured);
            System.out.printf("%s call: P50 %.1f µs  P99 %.1f µs  P99.9 %.1f µs%n", sync ? "sync" : "async",
                    q(measured, 0.5), q(measured, 0.99), q(measured, 0.999));
            System.out.println("measured calls by mode: " + byMode);
            System.out.println("slower than 60 µs: " + slowCount + " (call:µs and the mode's initial)" + slow);
        }
        System.err.println(sink + fieldsSeen);
    }

    private static PolicyResponse call(RateLimiter limiter, PreparedPolicies policies, String key, boolean sync) {
        PolicyResponse r = sync ? limiter.acquirePolicies(policies, key, 1, null)
                : limiter.acquirePoliciesAsync(policies, key, 1, null).join();
        Map<String, String> fields = new LinkedHashMap<>();
        for (Map.Entry<String, String> f : r.headers()) {
            fields.put(f.getKey(), f.getValue());
        }
        fieldsSeen += fields.size();
        return r;
    }

    /** Printed at the end, so the fields' map is not optimised away. */
    private static long fieldsSeen;

    private static double q(long[] sorted, double p) {
        return sorted[Math.min(sorted.length - 1, (int) (sorted.length * p))] / 1e3;
    }

    private static String arg(String[] args, int i, String fallback) {
        return args.length > i ? args[i] : fallback;
    }
}
