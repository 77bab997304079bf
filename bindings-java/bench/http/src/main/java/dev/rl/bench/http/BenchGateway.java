package dev.rl.bench.http;

import com.sun.net.httpserver.HttpServer;
import dev.rl.bench.BenchStats;
import dev.rl.gateway.RlKeyResolver;
import dev.rl.gateway.RlRateLimiter;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.Executors;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.cloud.gateway.filter.ratelimit.RedisRateLimiter;
import org.springframework.cloud.gateway.route.RouteLocator;
import org.springframework.cloud.gateway.route.builder.RouteLocatorBuilder;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Primary;

/**
 * The benchmark's gateway: route {@code /bench/**} to an in-process upstream (the JDK's HTTP
 * server on a loopback port) limited by {@code bench.mode}: {@code none}, {@code rl} (rl's
 * RlRateLimiter, policies from {@code rl.routes.bench.policies}; {@code rl-leases} the same, with
 * {@code rl.options.leases=on} given by the run script) or {@code redis} (SCG's
 * RedisRateLimiter, a token bucket: replenish {@code limit / window} per second, burst
 * {@code limit}) or {@code allow} (the same filter with a limiter that allows everything: the
 * filter's own cost). {@code /__stats?window=MS} (unlimited route) reports what the upstream served
 * and the most it served in any window, then forgets it ({@link BenchStats}); with
 * {@code bench.time=true} also the limiter's time per request (the filter's ask to its answer)
 * and the gateway's (first filter to response, the upstream included).
 */
@SpringBootApplication
public class BenchGateway {
    public static void main(String[] args) {
        SpringApplication.run(BenchGateway.class, args);
    }

    /** Times the gateway per {@code /bench} request (with {@code bench.time=true}). */
    @Bean
    org.springframework.cloud.gateway.filter.GlobalFilter timeGateway(@Value("${bench.time:false}") boolean time) {
        class Timed implements org.springframework.cloud.gateway.filter.GlobalFilter, org.springframework.core.Ordered {
            @Override
            public reactor.core.publisher.Mono<Void> filter(org.springframework.web.server.ServerWebExchange exchange,
                    org.springframework.cloud.gateway.filter.GatewayFilterChain chain) {
                if (!time || !exchange.getRequest().getPath().value().startsWith("/bench")) {
                    return chain.filter(exchange);
                }
                long t0 = System.nanoTime();
                return chain.filter(exchange).doFinally(s -> BenchStats.REQUEST_TIME.add(System.nanoTime() - t0));
            }

            @Override
            public int getOrder() {
                return org.springframework.core.Ordered.HIGHEST_PRECEDENCE;
            }
        }
        return new Timed();
    }

    @Bean(destroyMethod = "")
    HttpServer upstream(dev.rl.RateLimiter limiter) throws IOException {
        HttpServer s = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 1024);
        s.createContext("/bench", ex -> {
            BenchStats.served(System.currentTimeMillis());
            reply(ex, "ok");
        });
        s.createContext("/__stats", ex -> {
            long window = Long.parseLong(ex.getRequestURI().getQuery().replace("window=", ""));
            reply(ex, BenchStats.report(window, limiter));
        });
        s.setExecutor(Executors.newFixedThreadPool(4));
        s.start();
        return s;
    }

    private static void reply(com.sun.net.httpserver.HttpExchange ex, String text) throws IOException {
        byte[] body = text.getBytes(StandardCharsets.UTF_8);
        ex.sendResponseHeaders(200, body.length);
        try (OutputStream out = ex.getResponseBody()) {
            out.write(body);
        }
    }

    /** SCG's limiter; primary, so the RequestRateLimiter factory has one default. */
    @Bean
    @Primary
    RedisRateLimiter redisRateLimiter(@Value("${bench.limit}") int limit, @Value("${bench.window-ms}") long windowMs) {
        int perSecond = (int) Math.max(1, limit * 1000L / windowMs);
        return new RedisRateLimiter(perSecond, limit, 1);
    }

    @Bean
    RouteLocator routes(RouteLocatorBuilder b, HttpServer upstream, @Value("${bench.mode}") String mode,
            @Value("${bench.time:false}") boolean time,
            @Value("${bench.limit}") long limit, @Value("${bench.window-ms}") long windowMs,
            RlRateLimiter rl, RedisRateLimiter redis, RlKeyResolver keys) {
        String uri = "http://127.0.0.1:" + upstream.getAddress().getPort();
        return b.routes()
                .route("stats", r -> r.path("/__stats").uri(uri))
                .route("bench", r -> r.path("/bench/**").filters(f -> {
                    org.springframework.cloud.gateway.filter.ratelimit.RateLimiter<?> limiter = switch (mode) {
                        case "none" -> null;
                        // rl-leases: the same, the run script adding rl.options.leases=on.
                        case "rl", "rl-leases" -> rl;
                        case "redis" -> redis;
                        // SCG's RequestRateLimiter filter with a limiter that allows everything at
                        // once: what the filter itself costs, whichever limiter it asks.
                        case "allow" -> new AllowAll(java.util.Map.of());
                        // The same with two fixed fields shaped like rl's: what the fields cost.
                        case "allow-fields" -> new AllowAll(java.util.Map.of(
                                "RateLimit-Policy", "\"bench\";q=" + limit + ";w=" + Math.max(1, windowMs / 1000),
                                "RateLimit", "\"bench\";r=" + (limit - 1) + ";t=1"));
                        default -> throw new IllegalArgumentException("bench.mode is " + mode + "; use none, allow, allow-fields, rl, rl-leases or redis");
                    };
                    if (limiter != null) {
                        var used = time ? new TimedLimiter<>(limiter) : limiter;
                        f.requestRateLimiter(c -> c.setRateLimiter(used).setKeyResolver(keys));
                    }
                    return f;
                }).uri(uri))
                .build();
    }

    /** A limiter timed from the filter's ask to its answer (with {@code bench.time=true}). */
    static final class TimedLimiter<C> implements org.springframework.cloud.gateway.filter.ratelimit.RateLimiter<C> {
        private final org.springframework.cloud.gateway.filter.ratelimit.RateLimiter<C> inner;

        TimedLimiter(org.springframework.cloud.gateway.filter.ratelimit.RateLimiter<C> inner) {
            this.inner = inner;
        }

        @Override
        public reactor.core.publisher.Mono<Response> isAllowed(String routeId, String id) {
            long t0 = System.nanoTime();
            return inner.isAllowed(routeId, id).doOnNext(r -> BenchStats.LIMITER_TIME.add(System.nanoTime() - t0));
        }

        @Override
        public java.util.Map<String, C> getConfig() {
            return inner.getConfig();
        }

        @Override
        public Class<C> getConfigClass() {
            return inner.getConfigClass();
        }

        @Override
        public C newConfig() {
            return inner.newConfig();
        }
    }

    /** Allows every request at once, with the given fields (none for {@code allow}). */
    static final class AllowAll implements org.springframework.cloud.gateway.filter.ratelimit.RateLimiter<Object> {
        private final reactor.core.publisher.Mono<Response> allowed;

        AllowAll(java.util.Map<String, String> fields) {
            allowed = reactor.core.publisher.Mono.just(new Response(true, fields));
        }

        @Override
        public reactor.core.publisher.Mono<Response> isAllowed(String routeId, String id) {
            return allowed;
        }

        @Override
        public java.util.Map<String, Object> getConfig() {
            return java.util.Map.of();
        }

        @Override
        public Class<Object> getConfigClass() {
            return Object.class;
        }

        @Override
        public Object newConfig() {
            return new Object();
        }
    }
}
