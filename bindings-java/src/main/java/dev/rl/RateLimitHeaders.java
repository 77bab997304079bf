package dev.rl;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * HTTP response fields and the 429 body for a {@link CompositeDecision}, rendered by the core
 * ({@code rl_core::headers}) so that every middleware, in every language, sends the same thing:
 * <pre>
 * RateLimit-Policy: "burst";q=100;w=60, "daily";q=1000;w=86400
 * RateLimit: "burst";r=50;t=30, "daily";r=900;t=86400
 * Retry-After: 2                        (denied only; never earlier than a denying policy's t)
 * </pre>
 * {@code q} is the limit, {@code w} the window in seconds (rounded up), {@code r} what is left and
 * {@code t} the seconds until the policy's window is empty (allowed) or has room (denied).
 */
public final class RateLimitHeaders {
    /** The media type of {@link #problemBody}: {@code application/problem+json}. */
    public static final String PROBLEM_CONTENT_TYPE = Native.problemContentType();

    private RateLimitHeaders() {}

    /**
     * The fields for a request decided by {@code acquireAll} with one rule per policy, in the
     * policies' order, as (name, value) pairs in the order to send them.
     */
    public static List<Map.Entry<String, String>> render(List<Policy> policies, CompositeDecision decision,
            HeaderStyle style) {
        Flat f = flat(policies, decision);
        String[] nv = Native.renderHeaders(f.names, f.limits, f.windows, f.decisions, decision.allowed(),
                decision.retryAfterMs(), style == null ? null : style.wireName());
        List<Map.Entry<String, String>> out = new ArrayList<>(nv.length / 2);
        for (int i = 0; i + 1 < nv.length; i += 2) {
            out.add(Map.entry(nv[i], nv[i + 1]));
        }
        return Collections.unmodifiableList(out);
    }

    /** The RFC 9457 body of a 429 ({@link #PROBLEM_CONTENT_TYPE}), naming the violated policies. */
    public static String problemBody(List<Policy> policies, CompositeDecision decision) {
        Flat f = flat(policies, decision);
        return Native.problemBody(f.names, f.limits, f.windows, f.decisions, decision.retryAfterMs());
    }

    /** Policies and decisions as the parallel arrays the native call takes. */
    private record Flat(String[] names, long[] limits, long[] windows, long[] decisions) {}

    /** Policies as the parallel arrays native calls take (names, limits, windows). */
    record PolicyArrays(String[] names, long[] limits, long[] windows) {
        static PolicyArrays of(List<Policy> policies) {
            if (policies == null) {
                throw new IllegalArgumentException("invalid argument `policies`: must not be null");
            }
            int n = policies.size();
            String[] names = new String[n];
            long[] limits = new long[n];
            long[] windows = new long[n];
            for (int i = 0; i < n; i++) {
                Policy p = policies.get(i);
                if (p == null) {
                    throw new IllegalArgumentException("invalid argument `policies`: policy " + i + " is null");
                }
                names[i] = p.name();
                limits[i] = p.limit();
                windows[i] = p.windowMs();
            }
            return new PolicyArrays(names, limits, windows);
        }
    }

    private static Flat flat(List<Policy> policies, CompositeDecision decision) {
        PolicyArrays a = PolicyArrays.of(policies);
        if (decision == null) {
            throw new IllegalArgumentException("invalid argument `decision`: must not be null");
        }
        List<Decision> ds = decision.decisions();
        long[] flat = new long[ds.size() * 6];
        for (int i = 0; i < ds.size(); i++) {
            Decision d = ds.get(i);
            flat[i * 6] = d.allowed() ? 1 : 0;
            flat[i * 6 + 1] = d.remaining();
            flat[i * 6 + 2] = d.used();
            flat[i * 6 + 3] = d.retryAfterMs();
            flat[i * 6 + 4] = d.resetAfterMs();
            flat[i * 6 + 5] = d.nowMs();
        }
        return new Flat(a.names(), a.limits(), a.windows(), flat);
    }
}
