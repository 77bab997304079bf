package dev.rl.bench.http;

import com.sun.net.httpserver.HttpServer;
import dev.rl.gateway.RlKeyResolver;
import dev.rl.gateway.RlRateLimiter;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
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
 * and the most it served in any window, then forgets it.
 */
@SpringBootApplication
public class BenchGateway {
    public static void main(String[] args) {
        SpringApplication.run(BenchGateway.class, args);
    }

    /**
     * With {@code bench.time=true}: how long the limiter took per request (from the filter asking
     * to the answer), and the gateway per request (from the first filter to the response, the
     * upstream included); {@code /__stats} reports their P50/P99/P99.9 in µs, then forgets them.
     */
    static final Timings LIMITER_TIME = new Timings();
    static final Timings GATEWAY_TIME = new Timings();

    /** Durations in ns, kept to be sorted when reported. */
    static final class Timings {
        private long[] ns = new long[1 << 16];
        private int n;

        synchronized void add(long d) {
            if (n == ns.length) {
                ns = java.util.Arrays.copyOf(ns, n * 2);
            }
            ns[n++] = d;
        }

        synchronized String drain(String name) {
            if (n == 0) {
                return "";
            }
            long[] s = java.util.Arrays.copyOf(ns, n);
            n = 0;
            java.util.Arrays.sort(s);
            return " " + name + "_n=" + s.length + " " + name + "_p50_us=" + s[(int) (s.length * 0.50)] / 1000 + " " + name
                    + "_p99_us=" + s[(int) (s.length * 0.99)] / 1000 + " " + name + "_p999_us=" + s[(int) (s.length * 0.999)] / 1000;
        }
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
                return chain.filter(exchange).doFinally(s -> GATEWAY_TIME.add(System.nanoTime() - t0));
            }

            @Override
            public int getOrder() {
                return org.springframework.core.Ordered.HIGHEST_PRECEDENCE;
            }
        }
        return new Timed();
    }

    /** Arrival times (ms) of the requests the upstream served. */
    static final List<Long> SERVED = new ArrayList<>();

    @Bean(destroyMethod = "")
    HttpServer upstream(dev.rl.RateLimiter limiter) throws IOException {
        HttpServer s = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 1024);
        s.createContext("/bench", ex -> {
            long now = System.currentTimeMillis();
            synchronized (SERVED) {
                SERVED.add(now);
            }
            reply(ex, "ok");
        });
        s.createContext("/__stats", ex -> {
            long window = Long.parseLong(ex.getRequestURI().getQuery().replace("window=", ""));
            List<Long> t;
            synchronized (SERVED) {
                t = new ArrayList<>(SERVED);
                SERVED.clear();
            }
            t.sort(null);
            int most = 0;
            for (int a = 0, b = 0; b < t.size(); b++) {
                while (t.get(b) - t.get(a) >= window) {
                    a++;
                }
                most = Math.max(most, b - a + 1);
            }
            // How rl decided so far (a decision not from a lease made a Redis round trip).
            dev.rl.Stats st = limiter.stats();
            reply(ex, "served=" + t.size() + " most_in_window=" + most + " rl_normal=" + st.decisionsNormal()
                    + " rl_lease=" + st.decisionsLease() + " leases_taken=" + st.leasesTaken() + " lease_refunds="
                    + st.leaseRefunds() + LIMITER_TIME.drain("limiter") + GATEWAY_TIME.drain("gateway") + "\n");
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
                        case "allow" -> new AllowAll();
                        default -> throw new IllegalArgumentException("bench.mode is " + mode + "; use none, allow, rl, rl-leases or redis");
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
            return inner.isAllowed(routeId, id).doOnNext(r -> LIMITER_TIME.add(System.nanoTime() - t0));
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

    /** Allows every request at once, no headers. */
    static final class AllowAll implements org.springframework.cloud.gateway.filter.ratelimit.RateLimiter<Object> {
        private static final reactor.core.publisher.Mono<Response> ALLOWED =
                reactor.core.publisher.Mono.just(new Response(true, java.util.Map.of()));

        @Override
        public reactor.core.publisher.Mono<Response> isAllowed(String routeId, String id) {
            return ALLOWED;
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
