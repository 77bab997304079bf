package dev.rl.bench;

import dev.rl.RateLimiter;
import dev.rl.Stats;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * What a bench app (the gateway's, the Servlet's) records and reports at {@code /__stats}, the
 * line run.sh reads: the requests served and the most served in any window (by their arrival
 * times on the app's clock), rl's decision counts, and with timing on the limiter's and the
 * request's P50/P99/P99.9 in µs. Reporting forgets what it reported. One copy, added to both
 * bench modules' sources by their poms.
 */
public final class BenchStats {
    private BenchStats() {}

    /** Durations in ns, kept to be sorted when reported. */
    public static final class Timings {
        private long[] ns = new long[1 << 16];
        private int n;

        public synchronized void add(long d) {
            if (n == ns.length) {
                ns = Arrays.copyOf(ns, n * 2);
            }
            ns[n++] = d;
        }

        synchronized String drain(String name) {
            if (n == 0) {
                return "";
            }
            long[] s = Arrays.copyOf(ns, n);
            n = 0;
            Arrays.sort(s);
            return " " + name + "_n=" + s.length + " " + name + "_p50_us=" + s[(int) (s.length * 0.50)] / 1000 + " " + name
                    + "_p99_us=" + s[(int) (s.length * 0.99)] / 1000 + " " + name + "_p999_us=" + s[(int) (s.length * 0.999)] / 1000;
        }
    }

    /** How long the limiter took per request. */
    public static final Timings LIMITER_TIME = new Timings();
    /** How long the app took per request. */
    public static final Timings REQUEST_TIME = new Timings();
    /** Arrival times (ms) of the requests the app served. */
    private static final List<Long> SERVED = new ArrayList<>();

    /** Records a request served at {@code nowMs}. */
    public static void served(long nowMs) {
        synchronized (SERVED) {
            SERVED.add(nowMs);
        }
    }

    /** The stats line for windows of {@code windowMs}; {@code limiter} may be null (no limiter). */
    public static String report(long windowMs, RateLimiter limiter) {
        List<Long> t;
        synchronized (SERVED) {
            t = new ArrayList<>(SERVED);
            SERVED.clear();
        }
        t.sort(null);
        int most = 0;
        for (int a = 0, b = 0; b < t.size(); b++) {
            while (t.get(b) - t.get(a) >= windowMs) {
                a++;
            }
            most = Math.max(most, b - a + 1);
        }
        // How rl decided so far (a decision not from a lease made a Redis round trip).
        String rl = " rl_normal=0 rl_lease=0 leases_taken=0 lease_refunds=0";
        if (limiter != null) {
            Stats st = limiter.stats();
            rl = " rl_normal=" + st.decisionsNormal() + " rl_lease=" + st.decisionsLease() + " leases_taken="
                    + st.leasesTaken() + " lease_refunds=" + st.leaseRefunds();
        }
        return "served=" + t.size() + " most_in_window=" + most + rl + LIMITER_TIME.drain("limiter")
                + REQUEST_TIME.drain("gateway") + "\n";
    }
}
