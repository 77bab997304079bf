package dev.rl.servlet;

import dev.rl.CompositeDecision;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.util.EnumSet;
import java.util.concurrent.ConcurrentLinkedQueue;
import org.eclipse.jetty.ee10.servlet.FilterHolder;
import org.eclipse.jetty.ee10.servlet.ServletContextHandler;
import org.eclipse.jetty.ee10.servlet.ServletHolder;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;

/**
 * Embedded Jetty on a free loopback port: the filter under test in front of a servlet that counts
 * what it served and records, per request, the decision time the filter handed it (the deciding
 * clock's, so windows are checked on the clock that decided them).
 */
final class JettyApp implements AutoCloseable {
    final Server server;
    final int port;
    final ConcurrentLinkedQueue<Long> served = new ConcurrentLinkedQueue<>();

    JettyApp(RateLimitFilter filter) throws Exception {
        server = new Server();
        ServerConnector connector = new ServerConnector(server);
        connector.setHost("127.0.0.1");
        connector.setPort(0);
        server.addConnector(connector);
        ServletContextHandler ctx = new ServletContextHandler();
        ctx.addFilter(new FilterHolder(filter), "/*", EnumSet.of(DispatcherType.REQUEST));
        ctx.addServlet(new ServletHolder(new HttpServlet() {
            @Override
            protected void doGet(HttpServletRequest req, HttpServletResponse res) throws IOException {
                CompositeDecision d = (CompositeDecision) req.getAttribute(RateLimitFilter.DECISION_ATTRIBUTE);
                served.add(d == null ? -1L : d.nowMs());
                res.setContentType("text/plain");
                res.getWriter().write("ok");
            }
        }), "/*");
        server.setHandler(ctx);
        server.start();
        port = connector.getLocalPort();
    }

    String url(String path) {
        return "http://127.0.0.1:" + port + path;
    }

    @Override
    public void close() throws Exception {
        server.stop();
    }
}
