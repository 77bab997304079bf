package dev.rl.servlet;

import dev.rl.testing.StructuredFields;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.rl.HeaderStyle;
import dev.rl.RateLimiter;
import jakarta.servlet.http.HttpServletRequest;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The filter in embedded Jetty, a real HTTP client and the Redis rl-harness started. */
class RateLimitFilterTest {
    static RateLimiter limiter;
    static final HttpClient HTTP = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(5)).build();

    static String redisUrl() {
        String v = System.getenv("RL_TEST_REDIS_URL");
        if (v == null || v.isEmpty()) {
            String why = "RL_TEST_REDIS_URL is not set: run `bash bindings-java/test.sh` (rl-harness starts redis)";
            if (Boolean.getBoolean("rl.test.requireRedis")) {
                fail(why);
            }
            Assumptions.abort(why);
        }
        return v;
    }

    @BeforeAll
    static void open() {
        // Every call goes to Redis, which stays "normal" however slow this machine is.
        limiter = RateLimiter.builder(redisUrl()).degradeRtt(Duration.ofSeconds(60)).build();
    }

    @AfterAll
    static void close() {
        if (limiter != null) {
            limiter.close();
        }
    }

    /** The default client-IP key inside a namespace of its own, so tests never share a window. */
    static Function<HttpServletRequest, String> fresh(Function<HttpServletRequest, String> key) {
        String ns = "java-servlet-test:" + UUID.randomUUID() + ":";
        return r -> ns + key.apply(r);
    }

    static HttpResponse<String> get(String url, String... headers) throws Exception {
        HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(url)).timeout(Duration.ofSeconds(10));
        for (int i = 0; i + 1 < headers.length; i += 2) {
            b.header(headers[i], headers[i + 1]);
        }
        return HTTP.send(b.build(), HttpResponse.BodyHandlers.ofString());
    }

    static String header(HttpResponse<?> r, String name) {
        return r.headers().firstValue(name).orElse(null);
    }

    @Test
    void allowedResponsesCarryIetfFieldsThatParseAsStructuredFieldLists() throws Exception {
        RateLimitFilter f = RateLimitFilter.builder(limiter).policies("burst: 3/s; hourly: 100/h")
                .key(fresh(Keys.clientIp())).build();
        try (JettyApp app = new JettyApp(f)) {
            HttpResponse<String> r = get(app.url("/a"));
            assertEquals(200, r.statusCode());
            assertEquals("ok", r.body());
            List<StructuredFields.Item> policy = StructuredFields.parseList(header(r, "RateLimit-Policy"));
            assertEquals(2, policy.size());
            assertEquals("burst", policy.get(0).value());
            assertEquals(3L, policy.get(0).params().get("q"));
            assertEquals(1L, policy.get(0).params().get("w"));
            assertEquals("hourly", policy.get(1).value());
            assertEquals(100L, policy.get(1).params().get("q"));
            assertEquals(3600L, policy.get(1).params().get("w"));
            List<StructuredFields.Item> state = StructuredFields.parseList(header(r, "RateLimit"));
            assertEquals("burst", state.get(0).value());
            assertEquals(2L, state.get(0).params().get("r"));
            assertEquals(1L, state.get(0).params().get("t"));
            assertEquals(99L, state.get(1).params().get("r"));
            assertNull(header(r, "Retry-After"), "an allowed response has no Retry-After");
            assertNull(header(r, "X-RateLimit-Limit"), "ietf style only by default");
            HttpResponse<String> second = get(app.url("/b"));
            assertEquals(1L, StructuredFields.parseList(header(second, "RateLimit")).get(0).params().get("r"));
            assertEquals(2, app.served.size());
        }
    }

    /**
     * Per-route policies: each route's list is decided and rendered under its own policies (the
     * filter prepares each distinct list once), and a route whose function builds a new list per
     * request still counts in one window; a modifiable list changed between requests is decided
     * by its new contents; a path with no policies is unlimited.
     */
    @Test
    void policiesForDecidesEachRouteUnderItsOwnPolicies() throws Exception {
        List<dev.rl.Policy> orders = dev.rl.Policy.parseAll("orders: 2/m");
        List<dev.rl.Policy> mutable = new java.util.ArrayList<>(dev.rl.Policy.parseAll("before: 5/m"));
        // A window per route (the path's first segment) and client.
        Function<HttpServletRequest, String> route = r -> r.getRequestURI().split("/")[1] + "|" + Keys.clientIp().apply(r);
        RateLimitFilter f = RateLimitFilter.builder(limiter).key(fresh(route)).policiesFor(r -> {
            String path = r.getRequestURI();
            if (path.startsWith("/orders")) {
                return orders;
            }
            if (path.startsWith("/search")) {
                return dev.rl.Policy.parseAll("search: 1/m"); // a new list every request
            }
            if (path.startsWith("/mutable")) {
                return mutable; // one modifiable list, changed between requests
            }
            return null;
        }).build();
        try (JettyApp app = new JettyApp(f)) {
            HttpResponse<String> o = get(app.url("/orders/1"));
            assertEquals(200, o.statusCode());
            assertEquals("orders", StructuredFields.parseList(header(o, "RateLimit")).get(0).value());
            assertEquals(1L, StructuredFields.parseList(header(o, "RateLimit")).get(0).params().get("r"));
            HttpResponse<String> s1 = get(app.url("/search?q=a"));
            assertEquals(200, s1.statusCode());
            assertEquals("search", StructuredFields.parseList(header(s1, "RateLimit-Policy")).get(0).value());
            HttpResponse<String> s2 = get(app.url("/search?q=b"));
            assertEquals(429, s2.statusCode(), "the search route's one permit is spent, whichever list object");
            assertTrue(s2.body().contains("\"violated-policies\":[\"search\"]"), s2.body());
            assertEquals(200, get(app.url("/orders/2")).statusCode(), "the orders route has its own limit");
            assertEquals(429, get(app.url("/orders/3")).statusCode());
            HttpResponse<String> free = get(app.url("/health"));
            assertEquals(200, free.statusCode());
            assertNull(header(free, "RateLimit"), "a path with no policies is not limited");
            assertEquals("before", StructuredFields.parseList(header(get(app.url("/mutable")), "RateLimit-Policy")).get(0).value());
            mutable.set(0, dev.rl.Policy.parseAll("after: 7/m").get(0));
            List<StructuredFields.Item> changed = StructuredFields.parseList(header(get(app.url("/mutable")), "RateLimit-Policy"));
            assertEquals("after", changed.get(0).value(), "a modifiable list is decided by what it holds now");
            assertEquals(7L, changed.get(0).params().get("q"));
            assertEquals(6, app.served.size());
        }
    }

    @Test
    void aDeniedRequestGets429RetryAfterAndTheCoresProblemBodyAndNeverReachesTheServlet() throws Exception {
        RateLimitFilter f = RateLimitFilter.builder(limiter).policies("burst: 2/m").key(fresh(Keys.clientIp())).build();
        try (JettyApp app = new JettyApp(f)) {
            assertEquals(200, get(app.url("/")).statusCode());
            assertEquals(200, get(app.url("/")).statusCode());
            HttpResponse<String> denied = get(app.url("/"));
            assertEquals(429, denied.statusCode());
            assertEquals(2, app.served.size(), "the servlet served only the admitted requests");
            long retry = Long.parseLong(header(denied, "Retry-After"));
            assertTrue(retry >= 1 && retry <= 60, "Retry-After " + retry);
            assertTrue(header(denied, "Content-Type").startsWith("application/problem+json"), header(denied, "Content-Type"));
            List<StructuredFields.Item> state = StructuredFields.parseList(header(denied, "RateLimit"));
            assertEquals(0L, state.get(0).params().get("r"));
            long t = (Long) state.get(0).params().get("t");
            assertTrue(t >= 1 && t <= retry, "t " + t + " is no later than Retry-After " + retry);
            StructuredFields.parseList(header(denied, "RateLimit-Policy"));
            String body = denied.body();
            assertTrue(body.contains("\"status\":429"), body);
            assertTrue(body.contains("\"violated-policies\":[\"burst\"]"), body);
            assertTrue(body.contains("quota-exceeded"), body);
        }
    }

    @Test
    void forwardedForIsIgnoredUnlessATrustedProxyHeaderIsConfigured() throws Exception {
        RateLimitFilter untrusting = RateLimitFilter.builder(limiter).policies("1/m").key(fresh(Keys.clientIp())).build();
        try (JettyApp app = new JettyApp(untrusting)) {
            assertEquals(200, get(app.url("/"), "X-Forwarded-For", "10.0.0.1").statusCode());
            assertEquals(429, get(app.url("/"), "X-Forwarded-For", "10.0.0.2").statusCode(),
                    "a forged X-Forwarded-For does not buy a fresh window");
        }
        RateLimitFilter trusting = RateLimitFilter.builder(limiter).policies("1/m")
                .key(fresh(Keys.clientIp("X-Forwarded-For"))).build();
        try (JettyApp app = new JettyApp(trusting)) {
            assertEquals(200, get(app.url("/"), "X-Forwarded-For", "203.0.113.9, 10.0.0.1").statusCode());
            assertEquals(200, get(app.url("/"), "X-Forwarded-For", "203.0.113.9, 10.0.0.2").statusCode(),
                    "the proxy's (last) entry is the client");
            assertEquals(429, get(app.url("/"), "X-Forwarded-For", "198.51.100.7, 10.0.0.1").statusCode(),
                    "earlier entries are the client's own and do not count");
            assertEquals(2, app.served.size());
        }
    }

    @Test
    void exemptRequestsPassUncountedAndCostCountsPermits() throws Exception {
        RateLimitFilter f = RateLimitFilter.builder(limiter).policies("4/m").key(fresh(Keys.clientIp()))
                .exempt(r -> r.getRequestURI().equals("/health"))
                .cost(r -> r.getRequestURI().startsWith("/heavy") ? 2 : 1).build();
        try (JettyApp app = new JettyApp(f)) {
            for (int i = 0; i < 5; i++) {
                HttpResponse<String> h = get(app.url("/health"));
                assertEquals(200, h.statusCode());
                assertNull(header(h, "RateLimit"), "exempt requests are not limited");
            }
            HttpResponse<String> heavy = get(app.url("/heavy"));
            assertEquals(200, heavy.statusCode());
            assertEquals(2L, StructuredFields.parseList(header(heavy, "RateLimit")).get(0).params().get("r"));
            assertEquals(200, get(app.url("/heavy")).statusCode());
            assertEquals(429, get(app.url("/light")).statusCode(), "4 permits taken by two requests of cost 2");
        }
    }

    @Test
    void theDeniedHookSeesTheDecisionAndMayReplaceTheResponse() throws Exception {
        AtomicInteger calls = new AtomicInteger();
        RateLimitFilter f = RateLimitFilter.builder(limiter).policies("1/m").key(fresh(Keys.clientIp()))
                .headerStyle(HeaderStyle.LEGACY)
                .onDenied((req, res, d) -> {
                    calls.incrementAndGet();
                    assertFalse(d.allowed());
                    res.setStatus(503);
                    res.getWriter().write("slow down, retry in " + d.retryAfterMs() + " ms");
                    return true;
                }).build();
        try (JettyApp app = new JettyApp(f)) {
            HttpResponse<String> ok = get(app.url("/"));
            assertEquals("1", header(ok, "X-RateLimit-Limit"));
            assertEquals("0", header(ok, "X-RateLimit-Remaining"));
            assertNull(header(ok, "RateLimit"), "legacy style only");
            HttpResponse<String> denied = get(app.url("/"));
            assertEquals(503, denied.statusCode());
            assertTrue(denied.body().startsWith("slow down"), denied.body());
            assertEquals(1, calls.get());
            assertTrue(Long.parseLong(header(denied, "Retry-After")) >= 1, "the hook's response keeps the fields");
        }
    }

    @Test
    void limiterErrorsFailOpenByDefaultAndFailClosedWhenConfigured() throws Exception {
        int dead;
        try (ServerSocket s = new ServerSocket(0)) {
            dead = s.getLocalPort();
        }
        try (RateLimiter down = RateLimiter.builder("redis://127.0.0.1:" + dead + "/").localFallback(false)
                .requestTimeout(Duration.ofMillis(300)).build()) {
            try (JettyApp app = new JettyApp(RateLimitFilter.builder(down).policies("1/m").build())) {
                HttpResponse<String> r = get(app.url("/"));
                assertEquals(200, r.statusCode(), "fail-open: the request passes");
                assertNull(header(r, "RateLimit"), "with no decision there are no fields");
            }
            try (JettyApp app = new JettyApp(RateLimitFilter.builder(down).policies("1/m").failOpen(false).build())) {
                assertEquals(503, get(app.url("/")).statusCode());
                assertEquals(0, app.served.size());
            }
        }
    }

    @Test
    void underConcurrentLoadTheServletServesAtMostTheLimitInAnyWindow() throws Exception {
        long limit = 20;
        long windowMs = 1000;
        RateLimitFilter f = RateLimitFilter.builder(limiter).policies(limit + "/s").key(fresh(Keys.clientIp())).build();
        try (JettyApp app = new JettyApp(f)) {
            ExecutorService pool = Executors.newFixedThreadPool(8);
            long end = System.nanoTime() + Duration.ofMillis(2500).toNanos();
            List<Future<int[]>> futures = new ArrayList<>();
            for (int t = 0; t < 8; t++) {
                futures.add(pool.submit(() -> {
                    int ok = 0;
                    int no = 0;
                    for (int n = 0; n < 2000 && System.nanoTime() < end; n++) {
                        int status = get(app.url("/load")).statusCode();
                        if (status == 200) {
                            ok++;
                        } else if (status == 429) {
                            no++;
                        } else {
                            throw new AssertionError("status " + status);
                        }
                    }
                    return new int[] {ok, no};
                }));
            }
            int ok = 0;
            int no = 0;
            for (Future<int[]> fu : futures) {
                int[] r = fu.get();
                ok += r[0];
                no += r[1];
            }
            pool.shutdown();
            assertTrue(no > 0, "the load was above the limit: " + ok + " admitted, " + no + " denied");
            assertEquals(ok, app.served.size(), "the servlet served exactly the admitted requests");
            List<Long> times = new ArrayList<>(app.served);
            times.sort(null);
            int most = 0;
            for (int a = 0, b = 0; b < times.size(); b++) {
                while (times.get(b) - times.get(a) >= windowMs) {
                    a++;
                }
                most = Math.max(most, b - a + 1);
            }
            assertTrue(most <= limit, "most served in any " + windowMs + " ms: " + most + " > " + limit);
            assertTrue(most >= limit / 2, "the load reached the limit: most " + most);
        }
    }
}
