package dev.rl.bench.servlet;

import dev.rl.RateLimiter;
import dev.rl.servlet.RateLimitFilter;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.Filter;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.eclipse.jetty.ee10.servlet.FilterHolder;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

/**
 * The benchmark's Servlet app: embedded Jetty with a servlet on {@code /bench/*} that records when
 * it served each request, behind {@code --mode}: {@code none} (no filter) or {@code rl} (rl's
 * {@link RateLimitFilter}, {@code --limit} per {@code --window-ms}, on {@code --url}; the run
 * script's {@code rl-leases} and {@code rl-memory} are {@code rl} with {@code --leases=on} or
 * {@code --url=memory://}). {@code /__stats?window=MS} reports what was served, the most in any
 * window (by the servlet's arrival times), rl's decision counts and, with {@code --time=true},
 * the filter's and the request's P50/P99/P99.9 in µs, in the format of the gateway bench
 * ({@code BenchGateway}), then forgets them. Arguments are {@code --name=value}.
 */
public final class BenchServlet {
    private BenchServlet() {}

    /** Durations in ns, kept to be sorted when reported. */
    static final class Timings {
        private long[] ns = new long[1 << 16];
        private int n;

        synchronized void add(long d) {
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

    /** From just before rl's filter to the servlet: what the filter adds before the app runs. */
    static final Timings LIMITER_TIME = new Timings();
    /** The whole filter chain, servlet included. */
    static final Timings REQUEST_TIME = new Timings();
    static final String T0 = "bench.t0";
    /** Arrival times (ms) of the requests the servlet served. */
    static final List<Long> SERVED = new ArrayList<>();

    public static void main(String[] argv) throws Exception {
        Map<String, String> a = new HashMap<>();
        for (String s : argv) {
            int eq = s.indexOf('=');
            if (!s.startsWith("--") || eq < 0) {
                throw new IllegalArgumentException("argument " + s + ": use --name=value");
            }
            a.put(s.substring(2, eq), s.substring(eq + 1));
        }
        String mode = a.getOrDefault("mode", "none");
        boolean time = Boolean.parseBoolean(a.getOrDefault("time", "false"));
        RateLimiter limiter = switch (mode) {
            case "none" -> null;
            case "rl" -> RateLimiter.builder(a.get("url"))
                    .option("key_prefix", a.getOrDefault("prefix", "bench-servlet:"))
                    .option("leases", a.getOrDefault("leases", "off"))
                    .build();
            default -> throw new IllegalArgumentException("--mode is " + mode + "; use none or rl");
        };

        Server server = new Server();
        ServerConnector connector = new ServerConnector(server);
        connector.setHost("127.0.0.1");
        connector.setPort(Integer.parseInt(a.get("port")));
        server.addConnector(connector);
        ServletContextHandler ctx = new ServletContextHandler();
        EnumSet<DispatcherType> req = EnumSet.of(DispatcherType.REQUEST);
        if (time) {
            Filter timed = (request, response, chain) -> {
                long t0 = System.nanoTime();
                request.setAttribute(T0, t0);
                try {
                    chain.doFilter(request, response);
                } finally {
                    REQUEST_TIME.add(System.nanoTime() - t0);
                }
            };
            ctx.addFilter(new FilterHolder(timed), "/bench/*", req);
        }
        if (limiter != null) {
            String policies = a.get("limit") + " per " + a.get("window-ms") + "ms";
            ctx.addFilter(new FilterHolder(RateLimitFilter.builder(limiter).policies(policies).build()), "/bench/*", req);
        }
        ctx.addServlet(new ServletHolder(new HttpServlet() {
            @Override
            protected void doGet(HttpServletRequest r, HttpServletResponse res) throws IOException {
                long now = System.currentTimeMillis();
                if (r.getAttribute(T0) instanceof Long t0) {
                    LIMITER_TIME.add(System.nanoTime() - t0);
                }
                synchronized (SERVED) {
                    SERVED.add(now);
                }
                res.setContentType("text/plain");
                res.getWriter().write("ok");
            }
        }), "/bench/*");
        ctx.addServlet(new ServletHolder(new HttpServlet() {
            @Override
            protected void doGet(HttpServletRequest r, HttpServletResponse res) throws IOException {
                long window = Long.parseLong(r.getParameter("window"));
                List<Long> t;
                synchronized (SERVED) {
                    t = new ArrayList<>(SERVED);
                    SERVED.clear();
                }
                t.sort(null);
                int most = 0;
                for (int i = 0, j = 0; j < t.size(); j++) {
                    while (t.get(j) - t.get(i) >= window) {
                        i++;
                    }
                    most = Math.max(most, j - i + 1);
                }
                String rl = " rl_normal=0 rl_lease=0 leases_taken=0 lease_refunds=0";
                if (limiter != null) {
                    dev.rl.Stats st = limiter.stats();
                    rl = " rl_normal=" + st.decisionsNormal() + " rl_lease=" + st.decisionsLease() + " leases_taken="
                            + st.leasesTaken() + " lease_refunds=" + st.leaseRefunds();
                }
                res.setContentType("text/plain");
                res.getWriter().write("served=" + t.size() + " most_in_window=" + most + rl
                        + LIMITER_TIME.drain("limiter") + REQUEST_TIME.drain("gateway") + "\n");
            }
        }), "/__stats");
        server.setHandler(ctx);
        server.start();
        server.join();
    }
}
