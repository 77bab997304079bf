package dev.rl.bench;

import dev.rl.Decision;
import dev.rl.NativeLoader;
import dev.rl.RateLimiter;
import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import org.redisson.Redisson;
import org.redisson.api.RRateLimiter;
import org.redisson.api.RScript;
import org.redisson.api.RateType;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

/**
 * One key, limit 5000 per 1000 ms, one local Redis, 32 threads in a closed loop (each calls again
 * as soon as it has its answer), three contenders in the same run, one after the other:
 *
 * <ol>
 *   <li>{@code native}: dev.rl.RateLimiter.acquire (JNI, the rl core's multiplexed connection);</li>
 *   <li>{@code evalsha}: the design's gateway path: Redisson RScript.evalSha of
 *       lua/sliding_window.lua with the design's 2 keys and 6 arguments, reply parsed;</li>
 *   <li>{@code rratelimiter}: Redisson's own RRateLimiter (RateType.OVERALL, 5000 per 1 s),
 *       tryAcquire().</li>
 * </ol>
 *
 * For each: decisions/s, admitted/s, latency percentiles of one call, and the most permits
 * admitted in any 1 s span, measured two ways: on the limiter's own record of admission times
 * (native: each Decision's Redis nowMs; evalsha: the window's buckets, read every 100 ms, which
 * hold the Redis ms of every admission; RRateLimiter: its permits ZSET, read every 200 ms, whose
 * scores are the client times it stamped), and on the client clock at the moment each admitted
 * reply arrived (the same yardstick for all three). Plus Redis's own cost per decision, from INFO.
 *
 * <pre>
 * java dev.rl.bench.Bench [--url redis://127.0.0.1:6379/] [--threads 32] [--seconds 10]
 *     [--warmup 3] [--limit 5000] [--window 1000] [--script lua/sliding_window.lua]
 *     [--only native,evalsha,rratelimiter] [--rounds 1]
 * </pre>
 */
public final class Bench {
    private Bench() {}

    // ---- options -----------------------------------------------------------------------------

    static String url = System.getenv().getOrDefault("RL_TEST_REDIS_URL", "redis://127.0.0.1:6379/");
    static int threads = 32;
    static int seconds = 10;
    static int warmup = 3;
    static long limit = 5000;
    static long window = 1000;
    static int rounds = 1;
    static String script = "lua/sliding_window.lua";
    static List<String> only = List.of("native", "evalsha", "rratelimiter");

    public static void main(String[] args) throws Exception {
        for (int i = 0; i < args.length; i++) {
            String v = i + 1 < args.length ? args[i + 1] : null;
            switch (args[i]) {
                case "--url" -> url = v;
                case "--threads" -> threads = Integer.parseInt(v);
                case "--seconds" -> seconds = Integer.parseInt(v);
                case "--warmup" -> warmup = Integer.parseInt(v);
                case "--limit" -> limit = Long.parseLong(v);
                case "--window" -> window = Long.parseLong(v);
                case "--rounds" -> rounds = Integer.parseInt(v);
                case "--script" -> script = v;
                case "--only" -> only = List.of(v.split(","));
                default -> throw new IllegalArgumentException("unknown option " + args[i]);
            }
            i++;
        }
        URI u = URI.create(url);
        System.out.printf(Locale.ROOT, "rl Java benchmark: one key, limit %d / %d ms, %d threads, %d s measured after %d s warm-up, "
                + "redis %s (%s), native library %s%n", limit, window, threads, seconds, warmup, url,
                info(u.getPort(), "server").get("redis_version"), NativeLoader.source());
        System.out.println("load average before: " + loadavg());

        String lua = Files.exists(Path.of(script)) ? Files.readString(Path.of(script)) : RateLimiter.scriptSource();
        if (!lua.equals(RateLimiter.scriptSource())) {
            System.out.println("WARNING: " + script + " differs from the script compiled into librl_java");
        }
        Config config = new Config();
        config.useSingleServer().setAddress("redis://" + u.getHost() + ":" + u.getPort())
                .setConnectionMinimumIdleSize(threads).setConnectionPoolSize(Math.max(64, threads));
        RedissonClient redisson = Redisson.create(config);
        List<Result> results = new ArrayList<>();
        try (RateLimiter limiter = RateLimiter.open(url)) {
            for (int round = 1; round <= rounds; round++) {
                for (String name : only) {
                    Contender c = switch (name) {
                        case "native" -> nativeContender(limiter);
                        case "evalsha" -> evalshaContender(redisson, lua);
                        case "rratelimiter" -> rrateLimiterContender(redisson);
                        default -> throw new IllegalArgumentException("unknown contender " + name);
                    };
                    Result r = run(c, u.getPort());
                    results.add(r);
                    System.out.println("  " + r.line());
                }
            }
        } finally {
            redisson.shutdown();
        }
        System.out.println("load average after: " + loadavg());
        System.out.println();
        System.out.println(Result.HEADER);
        for (Result r : results) {
            System.out.println(r.line());
        }
        Result n = best(results, "native");
        Result e = best(results, "evalsha");
        if (n != null && e != null) {
            System.out.printf(Locale.ROOT, "%nnative vs design EVALSHA: %.2fx the decisions/s (target >= 2x), P99 %.3f vs %.3f ms = %.2f of it (target <= 0.5)%n",
                    n.rate() / e.rate(), n.pct(0.99), e.pct(0.99), n.pct(0.99) / e.pct(0.99));
        }
        Result rr = best(results, "rratelimiter");
        if (rr != null) {
            System.out.printf(Locale.ROOT, "RRateLimiter: most admitted in any %d ms span = %d by its own stamps, %d by reply time (limit %d): %s%n",
                    window, rr.maxOwn, rr.maxReply, limit, rr.maxOwn <= limit && rr.maxReply <= limit ? "within the limit" : "OVER the limit");
        }
    }

    static Result best(List<Result> results, String name) {
        return results.stream().filter(r -> r.name.equals(name)).max((a, b) -> Double.compare(a.rate(), b.rate())).orElse(null);
    }

    // ---- contenders --------------------------------------------------------------------------

    /** One call; returns the admission time on the limiter's own clock, -1 if denied. */
    interface Call {
        long call() throws Exception;
    }

    record Contender(String name, String description, Call call, Sampler sampler) {}

    /** Reads the limiter's stored record of admissions: ms -> permits, merged by max per item. */
    interface Sampler {
        void sample(Resp redis, Map<String, long[]> seen);
    }

    static Contender nativeContender(RateLimiter limiter) {
        String key = "bench:native:" + UUID.randomUUID();
        return new Contender("native", "dev.rl.RateLimiter.acquire (JNI)", () -> {
            Decision d = limiter.acquire(key, limit, window);
            return d.allowed() ? d.nowMs() : -1;
        }, null);
    }

    static Contender evalshaContender(RedissonClient redisson, String lua) {
        String apiKey = "bench:evalsha:" + UUID.randomUUID();
        RScript rs = redisson.getScript(StringCodec.INSTANCE);
        String sha = rs.scriptLoad(lua);
        List<Object> keys = List.of("rl:{" + apiKey + "}", "rl:cfg:{" + apiKey + "}");
        String w = Long.toString(window);
        String max = Long.toString(limit);
        String listKey = "rl:{" + apiKey + "}";
        return new Contender("evalsha", "Redisson evalSha of sliding_window.lua (the design's path)", () -> {
            List<Object> r = rs.evalSha(RScript.Mode.READ_WRITE, sha, RScript.ReturnType.MULTI, keys,
                    Long.toString(System.currentTimeMillis()), w, max, "0", "0", "gw-bench");
            // {allowed, remaining, current, mode}: three integers and a string.
            return ((Number) r.get(0)).longValue() == 1 ? 0 : -1;
        }, (redis, seen) -> windowBuckets((List<?>) redis.call("LRANGE", listKey, "0", "-1"), seen));
    }

    /**
     * The permits of each millisecond a window key holds (lua/sliding_window.lua, "Storage"): a
     * header {cum, open ms, base, ...} then closed buckets {ms, cum through it}, oldest first, where
     * cum counts permits since the key was made (mod 2^52). A closed bucket holds its cum less the
     * one before it (base before the first); the open bucket, at open ms, holds cum less the last.
     */
    static void windowBuckets(List<?> items, Map<String, long[]> seen) {
        if (items.isEmpty()) {
            return;
        }
        long[] head = fields((String) items.get(0));
        if (head.length < 3) {
            return; // not a header this reader knows
        }
        long before = head[2];
        for (int i = 1; i < items.size(); i++) {
            long[] b = fields((String) items.get(i));
            if (b.length != 2) {
                return;
            }
            merge(seen, Long.toString(b[0]), b[0], Math.floorMod(b[1] - before, 1L << 52));
            before = b[1];
        }
        merge(seen, Long.toString(head[1]), head[1], Math.floorMod(head[0] - before, 1L << 52));
    }

    static Contender rrateLimiterContender(RedissonClient redisson) {
        String name = "bench:rrl:" + UUID.randomUUID();
        RRateLimiter rl = redisson.getRateLimiter(name);
        rl.trySetRate(RateType.OVERALL, limit, Duration.ofMillis(window));
        String permits = "{" + name + "}:permits";
        return new Contender("rratelimiter", "Redisson RRateLimiter.tryAcquire (OVERALL)", () -> rl.tryAcquire() ? 0 : -1,
                (redis, seen) -> {
                    List<?> items = (List<?>) redis.call("ZRANGE", permits, "0", "-1", "WITHSCORES");
                    for (int i = 0; i + 1 < items.size(); i += 2) {
                        // Each member is one acquisition (random bytes + permits): count it once.
                        merge(seen, (String) items.get(i), Long.parseLong((String) items.get(i + 1)), 1);
                    }
                });
    }

    /** One stored window item's numbers: decimal text joined by ':' or big-endian packed doubles. */
    static long[] fields(String item) {
        if (item.matches("[0-9]+(:[0-9]+)*")) {
            return Arrays.stream(item.split(":")).mapToLong(Long::parseLong).toArray();
        }
        java.nio.ByteBuffer buf = java.nio.ByteBuffer.wrap(item.getBytes(StandardCharsets.ISO_8859_1));
        long[] f = new long[buf.remaining() / 8];
        for (int i = 0; i < f.length; i++) {
            f[i] = (long) buf.getDouble();
        }
        return f;
    }

    static void merge(Map<String, long[]> seen, String id, long ms, long count) {
        seen.merge(id, new long[] {ms, count}, (a, b) -> a[1] >= b[1] ? a : b);
    }

    // ---- the run -------------------------------------------------------------------------------

    static Result run(Contender c, int port) throws Exception {
        AtomicBoolean measuring = new AtomicBoolean(false);
        AtomicBoolean stop = new AtomicBoolean(false);
        Recorder[] recorders = new Recorder[threads];
        CountDownLatch started = new CountDownLatch(threads);
        List<Thread> ts = new ArrayList<>();
        Throwable[] failure = new Throwable[1];
        for (int t = 0; t < threads; t++) {
            Recorder rec = recorders[t] = new Recorder();
            Thread th = new Thread(() -> {
                started.countDown();
                try {
                    while (!stop.get()) {
                        long t0 = System.nanoTime();
                        long at = c.call.call();
                        long t1 = System.nanoTime();
                        if (measuring.get()) {
                            rec.record(t1 - t0, at, at >= 0 ? System.currentTimeMillis() : -1);
                        }
                    }
                } catch (Throwable e) {
                    synchronized (failure) {
                        failure[0] = e;
                    }
                    stop.set(true);
                }
            }, c.name + "-" + t);
            ts.add(th);
            th.start();
        }
        started.await();
        Map<String, long[]> seen = new ConcurrentHashMap<>();
        try (Resp redis = new Resp(port)) {
            Thread.sleep(warmup * 1000L);
            Map<String, String> before = redis.info("all");
            measuring.set(true);
            long t0 = System.nanoTime();
            long end = t0 + seconds * 1_000_000_000L;
            long every = c.name.equals("rratelimiter") ? 200 : 100;
            while (System.nanoTime() < end && !stop.get()) {
                if (c.sampler != null) {
                    c.sampler.sample(redis, seen);
                }
                Thread.sleep(Math.min(every, Math.max(1, (end - System.nanoTime()) / 1_000_000)));
            }
            measuring.set(false);
            double elapsed = (System.nanoTime() - t0) / 1e9;
            Map<String, String> after = redis.info("all");
            if (c.sampler != null) {
                c.sampler.sample(redis, seen);
            }
            stop.set(true);
            for (Thread th : ts) {
                th.join();
            }
            if (failure[0] != null) {
                throw new IllegalStateException(c.name + " failed", failure[0]);
            }
            return Result.of(c, recorders, elapsed, seen, before, after);
        }
    }

    /** One thread's measurements (no sharing on the hot path). */
    static final class Recorder {
        long[] lat = new long[1 << 16];
        int n;
        long[] own = new long[1 << 12];
        long[] reply = new long[1 << 12];
        int admitted;

        void record(long nanos, long ownMs, long replyMs) {
            if (n == lat.length) {
                lat = Arrays.copyOf(lat, n * 2);
            }
            lat[n++] = nanos;
            if (ownMs >= 0) {
                if (admitted == own.length) {
                    own = Arrays.copyOf(own, admitted * 2);
                    reply = Arrays.copyOf(reply, admitted * 2);
                }
                own[admitted] = ownMs;
                reply[admitted++] = replyMs;
            }
        }
    }

    record Result(String name, String description, long calls, long admitted, double seconds, long[] sortedNanos,
            long maxOwn, long maxReply, double redisCmdsPerCall, double redisCpuUsPerCall, double scriptUs) {
        static final String HEADER = String.format(Locale.ROOT, "%-13s %12s %11s %8s %8s %9s %12s %13s %9s %11s %10s",
                "contender", "decisions/s", "admitted/s", "p50 ms", "p99 ms", "p99.9 ms", "max/1s own", "max/1s reply",
                "cmds/dec", "cpu us/dec", "script us");

        static Result of(Contender c, Recorder[] recs, double elapsed, Map<String, long[]> seen,
                Map<String, String> before, Map<String, String> after) {
            int calls = 0;
            int admitted = 0;
            for (Recorder r : recs) {
                calls += r.n;
                admitted += r.admitted;
            }
            long[] lat = new long[calls];
            List<long[]> own = new ArrayList<>();
            List<long[]> reply = new ArrayList<>();
            int k = 0;
            for (Recorder r : recs) {
                System.arraycopy(r.lat, 0, lat, k, r.n);
                k += r.n;
                for (int i = 0; i < r.admitted; i++) {
                    if (c.name.equals("native")) {
                        own.add(new long[] {r.own[i], 1});
                    }
                    reply.add(new long[] {r.reply[i], 1});
                }
            }
            Arrays.sort(lat);
            if (!c.name.equals("native")) {
                // The stored record also holds the last second of the warm-up: real admissions too.
                for (long[] v : seen.values()) {
                    own.add(v);
                }
            }
            long cmds = num(after, "total_commands_processed") - num(before, "total_commands_processed");
            double cpu = dbl(after, "used_cpu_user") + dbl(after, "used_cpu_sys") - dbl(before, "used_cpu_user") - dbl(before, "used_cpu_sys");
            // Time Redis spent inside the scripts (INFO commandstats: EVALSHA and EVAL), per script call.
            double[] s0 = scriptStats(before);
            double[] s1 = scriptStats(after);
            double scriptUs = s1[0] > s0[0] ? (s1[1] - s0[1]) / (s1[0] - s0[0]) : Double.NaN;
            return new Result(c.name, c.description, calls, admitted, elapsed, lat, maxInAnyWindow(own, window),
                    maxInAnyWindow(reply, window), (double) cmds / calls, cpu * 1e6 / calls, scriptUs);
        }

        double rate() {
            return calls / seconds;
        }

        double pct(double p) {
            if (sortedNanos.length == 0) {
                return Double.NaN;
            }
            int i = (int) Math.min(sortedNanos.length - 1, Math.ceil(p * sortedNanos.length) - 1);
            return sortedNanos[Math.max(0, i)] / 1e6;
        }

        String line() {
            return String.format(Locale.ROOT, "%-13s %12.0f %11.0f %8.3f %8.3f %9.3f %12d %13d %9.2f %11.1f %10.1f", name, rate(),
                    admitted / seconds, pct(0.50), pct(0.99), pct(0.999), maxOwn, maxReply, redisCmdsPerCall, redisCpuUsPerCall,
                    scriptUs);
        }
    }

    /** The most permits admitted in any span (t - windowMs, t], from {time, count} pairs. */
    static long maxInAnyWindow(List<long[]> admitted, long windowMs) {
        List<long[]> v = new ArrayList<>(admitted);
        v.sort((a, b) -> Long.compare(a[0], b[0]));
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

    /** {calls, usec} of EVALSHA + EVAL from an INFO all map. */
    static double[] scriptStats(Map<String, String> m) {
        double calls = 0;
        double usec = 0;
        for (String cmd : List.of("cmdstat_evalsha", "cmdstat_eval")) {
            String v = m.get(cmd);
            if (v == null) {
                continue;
            }
            for (String part : v.split(",")) {
                if (part.startsWith("calls=")) {
                    calls += Double.parseDouble(part.substring(6));
                } else if (part.startsWith("usec=")) {
                    usec += Double.parseDouble(part.substring(5));
                }
            }
        }
        return new double[] {calls, usec};
    }

    static long num(Map<String, String> m, String k) {
        return Long.parseLong(m.getOrDefault(k, "0"));
    }

    static double dbl(Map<String, String> m, String k) {
        return Double.parseDouble(m.getOrDefault(k, "0"));
    }

    static Map<String, String> info(int port, String section) throws IOException {
        try (Resp r = new Resp(port)) {
            return r.info(section);
        }
    }

    static String loadavg() {
        try {
            return Files.readString(Path.of("/proc/loadavg")).trim() + " (" + Runtime.getRuntime().availableProcessors() + " cores)";
        } catch (IOException e) {
            return "?";
        }
    }

    /** A minimal RESP client for INFO and for reading the limiters' records (bytes kept as Latin-1). */
    static final class Resp implements AutoCloseable {
        private final Socket socket;
        private final InputStream in;
        private final OutputStream out;

        Resp(int port) throws IOException {
            socket = new Socket();
            socket.connect(new InetSocketAddress("127.0.0.1", port), 2000);
            socket.setSoTimeout(10_000);
            in = new BufferedInputStream(socket.getInputStream(), 1 << 16);
            out = socket.getOutputStream();
        }

        Object call(String... args) {
            try {
                ByteArrayOutputStream b = new ByteArrayOutputStream();
                b.write(("*" + args.length + "\r\n").getBytes(StandardCharsets.ISO_8859_1));
                for (String a : args) {
                    byte[] bytes = a.getBytes(StandardCharsets.ISO_8859_1);
                    b.write(("$" + bytes.length + "\r\n").getBytes(StandardCharsets.ISO_8859_1));
                    b.write(bytes);
                    b.write("\r\n".getBytes(StandardCharsets.ISO_8859_1));
                }
                out.write(b.toByteArray());
                out.flush();
                return read();
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
        }

        Map<String, String> info(String section) {
            Map<String, String> m = new HashMap<>();
            for (String l : ((String) call("INFO", section)).split("\r\n")) {
                int c = l.indexOf(':');
                if (c > 0) {
                    m.put(l.substring(0, c), l.substring(c + 1));
                }
            }
            return m;
        }

        private Object read() throws IOException {
            int type = in.read();
            String line = line();
            switch (type) {
                case '+':
                    return line;
                case '-':
                    throw new IllegalStateException("redis: " + line);
                case ':':
                    return Long.parseLong(line);
                case '$': {
                    int n = Integer.parseInt(line);
                    if (n < 0) {
                        return null;
                    }
                    byte[] data = in.readNBytes(n + 2);
                    return new String(data, 0, n, StandardCharsets.ISO_8859_1);
                }
                case '*': {
                    int n = Integer.parseInt(line);
                    List<Object> items = new ArrayList<>(Math.max(n, 0));
                    for (int i = 0; i < n; i++) {
                        items.add(read());
                    }
                    return items;
                }
                default:
                    throw new IOException("bad RESP type " + type);
            }
        }

        private String line() throws IOException {
            StringBuilder s = new StringBuilder();
            for (int c = in.read(); c != '\r'; c = in.read()) {
                if (c < 0) {
                    throw new IOException("closed");
                }
                s.append((char) c);
            }
            in.read();
            return s.toString();
        }

        @Override
        public void close() throws IOException {
            socket.close();
        }
    }
}
