package dev.rl;

import static org.junit.jupiter.api.Assertions.fail;

import org.junit.jupiter.api.Assumptions;

import java.io.IOException;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.UUID;
import java.util.stream.Stream;

/** Where the test Redis is, and the measurements the tests share. */
final class TestSupport {
    private TestSupport() {}

    /**
     * The redis-server that {@code rl-harness run} started for this suite. Without one, a test
     * that needs Redis is skipped (so a plain {@code mvn package} still builds and runs the rest),
     * unless {@code -Drl.test.requireRedis=true} (test.sh sets it): then it fails.
     */
    static String redisUrl() {
        return requiredEnv("RL_TEST_REDIS_URL");
    }

    /** An environment variable that rl-harness sets, under the same rule as {@link #redisUrl()}. */
    static String requiredEnv(String name) {
        String v = System.getenv(name);
        if (v == null || v.isEmpty()) {
            String why = name + " is not set: run the suite with `bash bindings-java/test.sh` "
                    + "(it starts a real redis-server through tests/harness)";
            if (Boolean.getBoolean("rl.test.requireRedis")) {
                fail(why);
            }
            Assumptions.abort(why);
        }
        return v;
    }

    /**
     * A builder on the suite's Redis for tests that check Redis decides ({@code mode "normal"},
     * exactness): slow round trips never send it local (degrade only above 60 s, the longest
     * allowed), because on a busy 2-core machine they may exceed the 5 ms default. Connection
     * failures still would (the fallback is on); {@link FallbackTest} covers the fallback.
     */
    static RateLimiter.Builder redis() {
        return RateLimiter.builder(redisUrl()).degradeRtt(java.time.Duration.ofSeconds(60));
    }

    /** A loopback port nothing listens on (bound, read, closed), so a connection there is refused. */
    static int freePort() {
        try (java.net.ServerSocket s = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    static int redisPort() {
        return URI.create(redisUrl()).getPort();
    }

    static String key(String what) {
        return "java-test:" + what + ":" + UUID.randomUUID();
    }

    /**
     * The most permits admitted inside any span {@code (t - windowMs, t]}, given each admission's
     * {@code {timeMs, count}}: the same rule as rl_core::audit::max_in_any_window.
     */
    static long maxInAnyWindow(List<long[]> admitted, long windowMs) {
        List<long[]> v = new ArrayList<>(admitted);
        v.sort(Comparator.comparingLong(a -> a[0]));
        long best = 0;
        long sum = 0;
        int lo = 0;
        for (int hi = 0; hi < v.size(); hi++) {
            sum += v.get(hi)[1];
            while (v.get(lo)[0] + windowMs <= v.get(hi)[0]) {
                sum -= v.get(lo)[1];
                lo++;
            }
            best = Math.max(best, sum);
        }
        return best;
    }

    /** Running totals are kept modulo 2^52 (lua/sliding_window.lua). */
    private static final long MOD = 1L << 52;

    /**
     * The buckets {@code ms -> permits} stored in a window's LIST (the whole {@code LRANGE 0 -1},
     * items as ISO-8859-1 strings of their bytes), read as lua/sliding_window.lua documents its
     * layout: item 0 is the header, packed big-endian doubles {@code (cum, open ms, base, oldest
     * ms, deadline, longest, lease horizon)}; items 1..n are the closed buckets {@code (ms, cum through this
     * bucket)}, oldest first. A bucket's permits are its running total minus the previous one
     * (the first's minus {@code base}); the open bucket's are {@code cum} minus the last closed one.
     */
    static Map<Long, Long> windowBuckets(List<?> items) {
        long[] head = header(items);
        Map<Long, Long> buckets = new TreeMap<>();
        long previous = head[2];
        for (int i = 1; i < items.size(); i++) {
            long[] f = fields((String) items.get(i));
            if (f.length != 2) {
                throw new IllegalStateException("unexpected item " + i + " in a window: " + items.get(i));
            }
            buckets.merge(f[0], Math.floorMod(f[1] - previous, MOD), Long::sum);
            previous = f[1];
        }
        long open = Math.floorMod(head[0] - previous, MOD);
        if (open > 0) {
            buckets.merge(head[1], open, Long::sum);
        }
        return buckets;
    }

    /** The permits the stored buckets hold, from the header's running totals ({@code cum - base}). */
    static long windowSum(List<?> items) {
        long[] head = header(items);
        return Math.floorMod(head[0] - head[2], MOD);
    }

    /**
     * The header's seven numbers: 56 bytes, or 72 where a lone call's retry record (its 16-byte
     * call id, lua/sliding_window.lua's Retries) follows them.
     */
    private static long[] header(List<?> items) {
        long[] head = fields((String) items.get(0));
        if (head.length != 7 && head.length != 9) {
            throw new IllegalStateException("a window header that is neither 56 nor 72 bytes: " + items.get(0));
        }
        return java.util.Arrays.copyOf(head, 7);
    }

    /** One stored item's numbers, text or packed. */
    static long[] fields(String item) {
        if (item.matches("[0-9]+(:[0-9]+)*")) {
            String[] p = item.split(":");
            long[] f = new long[p.length];
            for (int i = 0; i < p.length; i++) {
                f[i] = Long.parseLong(p[i]);
            }
            return f;
        }
        byte[] b = item.getBytes(StandardCharsets.ISO_8859_1);
        if (b.length % 8 != 0) {
            throw new IllegalStateException("a window item that is neither text nor packed doubles: " + item);
        }
        ByteBuffer buf = ByteBuffer.wrap(b); // big-endian, as struct.pack('>d')
        long[] f = new long[b.length / 8];
        for (int i = 0; i < f.length; i++) {
            f[i] = (long) buf.getDouble();
        }
        return f;
    }

    /** This process's resident set, in KiB (Linux). */
    static long rssKb() {
        try (Stream<String> lines = Files.lines(Path.of("/proc/self/status"))) {
            return lines.filter(l -> l.startsWith("VmRSS:"))
                    .mapToLong(l -> Long.parseLong(l.replaceAll("[^0-9]", "")))
                    .findFirst()
                    .orElseThrow();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Open file descriptors of this process (Linux). */
    static long openFds() {
        try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
            return fds.count();
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Sleeps until {@code System.nanoTime()} reaches {@code deadlineNanos}. */
    static void sleepUntil(long deadlineNanos) {
        long left;
        while ((left = deadlineNanos - System.nanoTime()) > 0) {
            try {
                Thread.sleep(left / 1_000_000, (int) (left % 1_000_000));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }
}
