package dev.rl;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * Opening and closing 10,000 limiters (each making a Redis connection and a call) leaks nothing:
 * resident memory, file descriptors and Redis's client count stay flat. The JVM runs with a
 * fixed, pre-touched heap (see the pom), so RSS growth here is native memory, metaspace or code.
 */
class LeakTest {

    @Test
    void openClose10000LimitersKeepsRssFlat() throws Exception {
        String url = TestSupport.redisUrl();
        try (TestRedis redis = TestRedis.connect()) {
            long clientsBefore = Long.parseLong(redis.info("clients").get("connected_clients"));
            String key = TestSupport.key("leak");
            // Warm up: JIT, the runtime, metaspace, allocator arenas.
            cycle(url, key, 1000);
            long rss0 = settledRss();
            long fds0 = TestSupport.openFds();
            cycle(url, key, 9000);
            long rss1 = settledRss();
            long fds1 = TestSupport.openFds();
            long clientsAfter = waitForClients(redis, clientsBefore);
            String report = String.format("RSS %d KiB -> %d KiB (+%d KiB) over 9000 open/acquire/close; fds %d -> %d; "
                    + "redis clients %d -> %d", rss0, rss1, rss1 - rss0, fds0, fds1, clientsBefore, clientsAfter);
            System.out.println("LeakTest: " + report);
            // A leaked limiter with its connection costs tens of KiB: 9000 of them would be hundreds of MiB.
            assertTrue(rss1 - rss0 < 16 * 1024, report);
            assertTrue(fds1 - fds0 <= 4, report);
            assertTrue(clientsAfter <= clientsBefore, report);
        }
    }

    private static void cycle(String url, String key, int n) {
        for (int i = 0; i < n; i++) {
            try (RateLimiter l = RateLimiter.open(url)) {
                l.acquire(key, 1_000_000, 60_000);
            }
            if (i % 2 == 0) {
                // and the memory backend, and a limiter closed without any call
                RateLimiter.open("memory://").close();
                try (RateLimiter m = RateLimiter.open("memory://")) {
                    m.acquire(key, 5, 1000);
                }
            }
        }
    }

    private static long settledRss() throws InterruptedException {
        System.gc();
        Thread.sleep(200);
        return TestSupport.rssKb();
    }

    private static long waitForClients(TestRedis redis, long target) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
        long n;
        do {
            n = Long.parseLong(redis.info("clients").get("connected_clients"));
            if (n <= target) {
                return n;
            }
            Thread.sleep(50);
        } while (System.nanoTime() < deadline);
        return n;
    }
}
