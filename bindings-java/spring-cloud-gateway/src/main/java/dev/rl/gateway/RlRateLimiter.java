package dev.rl.gateway;

import dev.rl.Policy;
import dev.rl.PolicyResponse;
import dev.rl.PreparedPolicies;
import dev.rl.RateLimitHeaders;
import dev.rl.RateLimiter;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import org.springframework.cloud.gateway.filter.ratelimit.AbstractRateLimiter;
import org.springframework.cloud.gateway.support.ConfigurationService;
import reactor.core.publisher.Mono;
import reactor.util.context.ContextView;

/**
 * rl as a Spring Cloud Gateway {@code RateLimiter}, for the {@code RequestRateLimiter} filter
 * (in place of {@code RedisRateLimiter}): every policy of the route in one atomic
 * {@link RateLimiter#acquirePoliciesAsync} call (which also renders the response fields), never blocking a Netty thread, and the core's
 * {@code RateLimit-Policy} / {@code RateLimit} fields on every response ({@code Retry-After} too on
 * a denial, which the filter answers with 429).
 *
 * <pre>
 * spring.cloud.gateway.server.webflux.routes:
 *   - id: orders
 *     uri: http://orders:8080
 *     predicates: [Path=/orders/**]
 *     filters:
 *       - name: RequestRateLimiter
 *         args:
 *           rate-limiter: "#{@rlRateLimiter}"
 *           key-resolver: "#{@rlKeyResolver}"
 * rl.routes.orders.policies: "burst: 10/s; 100/m"
 * </pre>
 * A route's policies come from its filter args ({@code rl-rate-limiter.policies}, as
 * {@code redis-rate-limiter.*} for RedisRateLimiter), else {@code rl.routes.<id>}, else
 * {@code rl.policies}; a route with none is an error, not unlimited.
 *
 * <p>The key function is the filter's {@code KeyResolver} ({@link RlKeyResolver}: the client's
 * address, or a trusted proxy's header when configured). The SCG filter API gives the limiter no
 * request, so cost is per route ({@code rl.routes.<id>.cost}) and exemption is by not adding the
 * filter to a route. A denial is the filter's 429 with the fields above; {@link RlProblemBodyFilter}
 * (auto-configured) gives it the core's problem body.
 */
public class RlRateLimiter extends AbstractRateLimiter<RlRateLimiter.Config> {
    /** The filter-args prefix of a route's own settings. */
    public static final String CONFIGURATION_PROPERTY_NAME = "rl-rate-limiter";

    private static final System.Logger LOG = System.getLogger(RlRateLimiter.class.getName());

    private final RateLimiter limiter;
    private final RlProperties properties;
    private final Map<String, Route> routes = new ConcurrentHashMap<>();

    /** A route's settings in its filter args: {@code rl-rate-limiter.policies}, {@code .cost}. */
    public static class Config {
        private String policies;
        private Long cost;

        public String getPolicies() {
            return policies;
        }

        public Config setPolicies(String policies) {
            this.policies = policies;
            return this;
        }

        public Long getCost() {
            return cost;
        }

        public Config setCost(Long cost) {
            this.cost = cost;
            return this;
        }
    }

    /** A route's policies (checked once, with the header style) and cost. */
    private record Route(PreparedPolicies policies, long cost) {}

    public RlRateLimiter(RateLimiter limiter, RlProperties properties, ConfigurationService configurationService) {
        super(Config.class, CONFIGURATION_PROPERTY_NAME, configurationService);
        this.limiter = limiter;
        this.properties = properties;
    }

    @Override
    public Mono<Response> isAllowed(String routeId, String id) {
        Route route;
        String key;
        try {
            route = routes.computeIfAbsent(routeId, this::route);
            key = properties.isPerRouteKeys() ? routeId + "|" + id : id;
        } catch (RuntimeException e) {
            return Mono.error(e);
        }
        // One native call decides every policy and renders the fields (and a denial's body). A
        // decision made at once (a lease, the denial cache, memory: most of a hot route's) is
        // answered as a plain value: no future to adapt, no hop back to the event loop. Such an
        // answer completes the filter synchronously, which Reactor Netty before 1.3.8 could
        // mishandle on a reused connection (see ReactorNettyCheck).
        return Mono.deferContextual(ctx -> {
                    CompletableFuture<PolicyResponse> asked =
                            limiter.acquirePoliciesAsync(route.policies, key, route.cost, null);
                    if (asked.isDone() && !asked.isCompletedExceptionally()) {
                        return Mono.just(response(asked.join(), ctx));
                    }
                    return EventLoopCompletion.onCallersLoop(asked).map(r -> response(r, ctx));
                })
                .onErrorResume(e -> {
                    boolean open = properties.isFailOpen();
                    LOG.log(System.Logger.Level.WARNING, "rl: the limiter failed on route " + routeId + "; request "
                            + (open ? "passes (fail-open)" : "denied (fail-closed)"), e);
                    return Mono.just(new Response(open, Map.of()));
                });
    }

    /** The filter's answer: the core's fields, and a denial's problem body for {@link RlProblemBodyFilter}. */
    private static Response response(PolicyResponse r, ContextView ctx) {
        Map<String, String> headers = new LinkedHashMap<>();
        for (Map.Entry<String, String> h : r.headers()) {
            headers.put(h.getKey(), h.getValue());
        }
        boolean allowed = r.decision().allowed();
        if (!allowed) {
            ctx.<RlProblemBodyFilter.Slot>getOrEmpty(RlProblemBodyFilter.Slot.class).ifPresent(slot -> {
                slot.contentType = RateLimitHeaders.PROBLEM_CONTENT_TYPE;
                slot.body = r.problemBody();
            });
        }
        return new Response(allowed, headers);
    }

    private Route route(String routeId) {
        Config own = getConfig().get(routeId);
        RlProperties.Route configured = properties.getRoutes().get(routeId);
        String text = own != null && own.getPolicies() != null ? own.getPolicies()
                : configured != null && configured.getPolicies() != null ? configured.getPolicies()
                : properties.getPolicies();
        if (text == null) {
            throw new IllegalStateException("rl: route " + routeId + " uses the rl RateLimiter but has no policies: set rl.routes."
                    + routeId + ".policies, rl.policies, or the filter arg " + CONFIGURATION_PROPERTY_NAME + ".policies");
        }
        long cost = own != null && own.getCost() != null ? own.getCost() : configured != null ? configured.getCost() : 1;
        return new Route(PreparedPolicies.of(Policy.parseAll(text), properties.getHeaderStyle()), cost);
    }
}
