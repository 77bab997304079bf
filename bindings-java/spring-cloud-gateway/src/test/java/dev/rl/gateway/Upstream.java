package dev.rl.gateway;

import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/** The gateway's upstream: the JDK's HTTP server on a free loopback port, recording what it served. */
final class Upstream implements AutoCloseable {
    final HttpServer server;
    final ExecutorService pool = Executors.newFixedThreadPool(8);
    /** Per served request: its path and the time it arrived (ms). */
    final ConcurrentLinkedQueue<Served> served = new ConcurrentLinkedQueue<>();

    record Served(String path, long atMs) {}

    Upstream() throws IOException {
        server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 256);
        server.createContext("/", exchange -> {
            served.add(new Served(exchange.getRequestURI().getPath(), System.currentTimeMillis()));
            byte[] body = "upstream ok".getBytes(StandardCharsets.UTF_8);
            exchange.sendResponseHeaders(200, body.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(body);
            }
        });
        server.setExecutor(pool);
        server.start();
    }

    int port() {
        return server.getAddress().getPort();
    }

    long count(String prefix) {
        return served.stream().filter(s -> s.path().startsWith(prefix)).count();
    }

    @Override
    public void close() {
        server.stop(0);
        pool.shutdownNow();
    }
}
