package dev.rl.bench.servlet;

import dev.rl.RateLimiter;
import dev.rl.bench.BenchStats;
import dev.rl.servlet.RateLimitFilter;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.Filter;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.EnumSet;
import java.util.HashMap;
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
 * the filter's and the request's P50/P99/P99.9 in µs ({@link BenchStats}, shared with the
 * gateway bench), then forgets them. Arguments are {@code --name=value}.
 */
public final class BenchServlet {
    private BenchServlet() {}

    /** The request attribute holding when the timing filter saw the request (ns). */
    static final String T0 = "bench.t0";

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
                    BenchStats.REQUEST_TIME.add(System.nanoTime() - t0);
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
                // From just before rl's filter to here: what the filter adds before the app runs.
                if (r.getAttribute(T0) instanceof Long t0) {
                    BenchStats.LIMITER_TIME.add(System.nanoTime() - t0);
                }
                BenchStats.served(now);
                res.setContentType("text/plain");
                res.getWriter().write("ok");
            }
        }), "/bench/*");
        ctx.addServlet(new ServletHolder(new HttpServlet() {
            @Override
            protected void doGet(HttpServletRequest r, HttpServletResponse res) throws IOException {
                res.setContentType("text/plain");
                res.getWriter().write(BenchStats.report(Long.parseLong(r.getParameter("window")), limiter));
            }
        }), "/__stats");
        server.setHandler(ctx);
        server.start();
        server.join();
    }
}
