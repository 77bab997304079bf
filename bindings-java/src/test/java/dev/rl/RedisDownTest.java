package dev.rl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * Redis hung (SIGSTOP) or gone (killed), with the local fallback off: every call fails with
 * BackendUnavailableException within the configured request timeout, sync and async; when Redis is
 * back (thawed, or restarted on the same port) the same limiter works again by itself. Uses its own
 * redis-server from {@code rl-harness start}, so the shared one is never disturbed. (With the
 * fallback on, the default, the same outages are decided locally: {@link FallbackTest}.)
 */
class RedisDownTest {
    static final long TIMEOUT_MS = 300;
    /** Scheduling slack on a busy 2-core machine; a call that waited on Redis would take far longer. */
    static final long SLACK_MS = 400;

    @Test
    void unavailableWithinTheTimeoutThenRecovers() throws Exception {
        Server server = Server.start();
        Process restarted = null;
        try (RateLimiter l = RateLimiter.builder(server.url)
                .localFallback(false)
                .requestTimeout(Duration.ofMillis(TIMEOUT_MS))
                .connectTimeout(Duration.ofMillis(200))
                .build()) {
            String key = TestSupport.key("down");
            assertTrue(l.acquire(key, 100, 60_000).allowed());

            // 1. Hung: the process is there, the socket accepts, nothing answers.
            run("kill", "-STOP", Long.toString(server.pid));
            try {
                expectUnavailable(l, key, "hung");
            } finally {
                run("kill", "-CONT", Long.toString(server.pid));
            }
            Decision back = recovered(l, key);
            assertTrue(back.allowed());

            // 2. Gone: connection refused.
            run(server.harness, "stop", "--pid", Long.toString(server.pid));
            expectUnavailable(l, key, "stopped");

            // 3. Back on the same port (a fresh, empty server).
            restarted = new ProcessBuilder(redisServer(), "--bind", "127.0.0.1", "--port", Integer.toString(server.port),
                    "--save", "", "--appendonly", "no", "--dir", server.dir.toString())
                    .redirectErrorStream(true)
                    .redirectOutput(server.dir.resolve("restarted.log").toFile())
                    .start();
            server.pid = restarted.pid();
            Decision again = recovered(l, key);
            assertTrue(again.allowed());
            assertEquals(1, again.used(), "the restarted server is empty");
        } finally {
            server.stop();
            if (restarted != null) {
                restarted.waitFor(10, TimeUnit.SECONDS);
            }
        }
    }

    private static void expectUnavailable(RateLimiter l, String key, String what) throws Exception {
        for (int i = 0; i < 3; i++) {
            long t0 = System.nanoTime();
            BackendUnavailableException e = assertThrows(BackendUnavailableException.class, () -> l.acquire(key, 100, 60_000));
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            assertEquals(RateLimitException.Code.BACKEND_UNAVAILABLE, e.code());
            assertEquals("backend_unavailable", e.code().id());
            System.out.printf("RedisDownTest(%s): sync call failed after %d ms: %s%n", what, ms, e.getMessage());
            assertTrue(ms <= TIMEOUT_MS + SLACK_MS, what + ": failed after " + ms + " ms, timeout is " + TIMEOUT_MS);

            long t1 = System.nanoTime();
            ExecutionException ee = assertThrows(ExecutionException.class,
                    () -> l.acquireAsync(key, 100, 60_000).get(5, TimeUnit.SECONDS));
            long ams = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t1);
            assertInstanceOf(BackendUnavailableException.class, ee.getCause());
            assertTrue(ams <= TIMEOUT_MS + SLACK_MS, what + ": async failed after " + ams + " ms");
        }
        assertThrows(BackendUnavailableException.class, l::ping);
    }

    /** The first successful acquire after Redis is back; fails the test if none within 5 s. */
    private static Decision recovered(RateLimiter l, String key) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        RateLimitException last = null;
        while (System.nanoTime() < deadline) {
            try {
                return l.acquire(key, 100, 60_000);
            } catch (RateLimitException e) {
                last = e;
                Thread.sleep(50);
            }
        }
        throw new AssertionError("no recovery within 5 s", last);
    }

    private static String redisServer() {
        String s = System.getenv("RL_REDIS_SERVER");
        return s != null && !s.isEmpty() ? s : "redis-server";
    }

    static String run(String... cmd) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(30, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new IOException(String.join(" ", cmd) + " failed: " + out);
        }
        return out;
    }

    /** A redis-server of our own, from {@code rl-harness start --json}. */
    static final class Server {
        final String harness;
        final String url;
        final int port;
        final Path dir;
        long pid;

        private Server(String harness, String url, int port, long pid, Path dir) {
            this.harness = harness;
            this.url = url;
            this.port = port;
            this.pid = pid;
            this.dir = dir;
        }

        static Server start() throws IOException, InterruptedException {
            String harness = TestSupport.requiredEnv("RL_HARNESS");
            String json = run(harness, "start", "--json").trim();
            return new Server(harness, field(json, "url"), Integer.parseInt(field(json, "port")),
                    Long.parseLong(field(json, "pid")), Path.of(field(json, "dir")));
        }

        /** Stops whichever server runs now (by pid) and removes the directory. */
        void stop() throws IOException, InterruptedException {
            List<String> cmd = new ArrayList<>(List.of(harness, "stop", "--pid", Long.toString(pid)));
            if (Files.exists(dir)) {
                cmd.add("--dir");
                cmd.add(dir.toString());
            }
            run(cmd.toArray(new String[0]));
        }

        private static String field(String json, String name) {
            Matcher m = Pattern.compile("\"" + name + "\":\"?([^\",}]*)").matcher(json);
            if (!m.find()) {
                throw new IllegalStateException("no " + name + " in " + json);
            }
            return m.group(1);
        }
    }
}
