package dev.rl.servlet;

import dev.rl.CompositeDecision;
import dev.rl.HeaderStyle;
import dev.rl.Policy;
import dev.rl.PolicyResponse;
import dev.rl.PreparedPolicies;
import dev.rl.RateLimitHeaders;
import dev.rl.RateLimiter;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import java.util.function.Predicate;
import java.util.function.ToLongFunction;

/**
 * A Jakarta Servlet filter that admits a request only if every policy fits, in one atomic
 * {@link RateLimiter#acquirePolicies} call (all policies on the request's key, decided and
 * rendered in one native call), and writes the core's
 * rate-limit fields on every response it decides (allowed ones too). A denied request gets 429,
 * {@code Retry-After} and the core's {@code application/problem+json} body, and never reaches the
 * servlet.
 *
 * <pre>{@code
 * RateLimitFilter f = RateLimitFilter.builder(limiter)
 *         .policies("burst: 10/s; 1000/h")
 *         .key(Keys.clientIp("X-Forwarded-For"))   // only behind a proxy you trust
 *         .build();
 * }</pre>
 *
 * <p>The servlet sees the decision as the request attribute {@link #DECISION_ATTRIBUTE}.
 *
 * <p><b>Limiter errors.</b> Redis trouble is absorbed by the core's local fallback; what still
 * throws (fallback disabled, a closed limiter, a key the core refuses) is handled as configured by
 * {@link Builder#failOpen(boolean)}: by default the request passes, without rate-limit fields, and
 * a warning is logged; fail-closed answers 503. Never silently: either way it is logged.
 */
public final class RateLimitFilter implements Filter {
    /** The request attribute holding the request's {@link CompositeDecision}. */
    public static final String DECISION_ATTRIBUTE = "dev.rl.CompositeDecision";

    private static final System.Logger LOG = System.getLogger(RateLimitFilter.class.getName());

    private final RateLimiter limiter;
    private final Function<HttpServletRequest, List<Policy>> policies;
    private final Function<HttpServletRequest, String> key;
    private final ToLongFunction<HttpServletRequest> cost;
    private final Predicate<HttpServletRequest> exempt;
    private final DeniedHandler onDenied;
    private final HeaderStyle style;
    private final boolean failOpen;
    /** Distinct policy lists seen, prepared (see {@link #prepared}). */
    private final Map<List<Policy>, PreparedPolicies> prepared = new ConcurrentHashMap<>();
    private static final int MAX_PREPARED = 256;
    /**
     * The unmodifiable list last prepared, by identity: {@code policies(String)} and a per-route
     * {@code policiesFor} hand back the same list object per request, and comparing references
     * spares hashing every policy of it on each request. A modifiable list is always looked up
     * by its contents, which may have changed.
     */
    private volatile Last last;

    private record Last(List<Policy> list, PreparedPolicies prepared) {}

    private RateLimitFilter(Builder b) {
        this.limiter = b.limiter;
        this.policies = Objects.requireNonNull(b.policies, "policies: set policies(...) or policiesFor(...)");
        this.key = b.key;
        this.cost = b.cost;
        this.exempt = b.exempt;
        this.onDenied = b.onDenied;
        this.style = b.style;
        this.failOpen = b.failOpen;
    }

    public static Builder builder(RateLimiter limiter) {
        return new Builder(limiter);
    }

    @Override
    public void doFilter(ServletRequest req, ServletResponse res, FilterChain chain)
            throws IOException, ServletException {
        if (!(req instanceof HttpServletRequest request) || !(res instanceof HttpServletResponse response)
                || exempt.test(request)) {
            chain.doFilter(req, res);
            return;
        }
        List<Policy> ps = policies.apply(request);
        if (ps == null || ps.isEmpty()) {
            chain.doFilter(req, res);
            return;
        }
        PolicyResponse r;
        try {
            String k = key.apply(request);
            long c = cost.applyAsLong(request);
            r = limiter.acquirePolicies(prepared(ps), k, c, null);
        } catch (RuntimeException e) {
            if (failOpen) {
                LOG.log(System.Logger.Level.WARNING, "rl: the limiter failed; request passes (fail-open)", e);
                chain.doFilter(req, res);
            } else {
                LOG.log(System.Logger.Level.WARNING, "rl: the limiter failed; request refused (fail-closed)", e);
                response.sendError(HttpServletResponse.SC_SERVICE_UNAVAILABLE);
            }
            return;
        }
        CompositeDecision d = r.decision();
        request.setAttribute(DECISION_ATTRIBUTE, d);
        for (Map.Entry<String, String> h : r.headers()) {
            response.setHeader(h.getKey(), h.getValue());
        }
        if (d.allowed()) {
            chain.doFilter(req, res);
            return;
        }
        if (onDenied != null && onDenied.denied(request, response, d)) {
            return;
        }
        byte[] body = r.problemBody().getBytes(StandardCharsets.UTF_8);
        response.setStatus(429);
        response.setContentType(RateLimitHeaders.PROBLEM_CONTENT_TYPE);
        response.setContentLength(body.length);
        response.getOutputStream().write(body);
    }

    /**
     * {@code ps} prepared with this filter's style: once per distinct list (a route's), so a
     * request is one native call that decides and renders. Bounded: a {@code policiesFor} that
     * makes a new list per request only costs a preparation per request, never memory.
     */
    private PreparedPolicies prepared(List<Policy> ps) {
        Last l = last;
        if (l != null && l.list == ps) {
            return l.prepared;
        }
        PreparedPolicies p = prepared.get(ps);
        if (p == null) {
            if (prepared.size() >= MAX_PREPARED) {
                prepared.clear();
            }
            p = PreparedPolicies.of(ps, style);
            prepared.put(List.copyOf(ps), p);
        }
        if (List.copyOf(ps) == ps) {   // an unmodifiable list: its identity stands for its contents
            last = new Last(ps, p);
        }
        return p;
    }

    /** Configuration of a {@link RateLimitFilter}; only the policies are required. */
    public static final class Builder {
        private final RateLimiter limiter;
        private Function<HttpServletRequest, List<Policy>> policies;
        private Function<HttpServletRequest, String> key = Keys.clientIp();
        private ToLongFunction<HttpServletRequest> cost = r -> 1;
        private Predicate<HttpServletRequest> exempt = r -> false;
        private DeniedHandler onDenied;
        private HeaderStyle style = HeaderStyle.IETF;
        private boolean failOpen = true;

        private Builder(RateLimiter limiter) {
            this.limiter = Objects.requireNonNull(limiter, "limiter");
        }

        /** One policy string for every request, e.g. {@code "burst: 10/s; 1000/h"} (parsed by the core). */
        public Builder policies(String text) {
            List<Policy> ps = Policy.parseAll(text);
            this.policies = r -> ps;
            return this;
        }

        /**
         * The policies per request (e.g. per route: parse each string once, ahead of time, with
         * {@link Policy#parseAll}); null or empty leaves the request unlimited.
         */
        public Builder policiesFor(Function<HttpServletRequest, List<Policy>> policies) {
            this.policies = Objects.requireNonNull(policies, "policies");
            return this;
        }

        /** Who a request counts against; default {@link Keys#clientIp()}. */
        public Builder key(Function<HttpServletRequest, String> key) {
            this.key = Objects.requireNonNull(key, "key");
            return this;
        }

        /**
         * Shorthand for {@code key(Keys.clientIp(header))}: honour a forwarding header set by a
         * trusted proxy. Off unless called.
         */
        public Builder trustedProxyHeader(String header) {
            this.key = Keys.clientIp(header);
            return this;
        }

        /** Permits a request takes; default 1. */
        public Builder cost(ToLongFunction<HttpServletRequest> cost) {
            this.cost = Objects.requireNonNull(cost, "cost");
            return this;
        }

        /** Requests that pass unlimited and uncounted (health checks, say). */
        public Builder exempt(Predicate<HttpServletRequest> exempt) {
            this.exempt = Objects.requireNonNull(exempt, "exempt");
            return this;
        }

        /** Called for each denied request; may write its own response instead of the 429. */
        public Builder onDenied(DeniedHandler onDenied) {
            this.onDenied = onDenied;
            return this;
        }

        /** Which rate-limit fields to send; default {@link HeaderStyle#IETF}. */
        public Builder headerStyle(HeaderStyle style) {
            this.style = Objects.requireNonNull(style, "style");
            return this;
        }

        /**
         * When the limiter throws: true (default) lets the request pass without rate-limit
         * fields, false answers 503. Both log a warning.
         */
        public Builder failOpen(boolean failOpen) {
            this.failOpen = failOpen;
            return this;
        }

        public RateLimitFilter build() {
            return new RateLimitFilter(this);
        }
    }
}
