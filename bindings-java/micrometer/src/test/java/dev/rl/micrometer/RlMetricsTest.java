package dev.rl.micrometer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.rl.Decision;
import dev.rl.RateLimiter;
import dev.rl.Stats;
import io.micrometer.core.instrument.FunctionCounter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.lang.reflect.RecordComponent;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.UUID;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/** RlMetrics on a real limiter and the Redis rl-harness started: meters equal the decisions. */
class RlMetricsTest {

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

    /** Every call goes to Redis, which stays "normal" however slow this machine is. */
    static RateLimiter.Builder redis() {
        return RateLimiter.builder(redisUrl()).degradeRtt(Duration.ofSeconds(60));
    }

    static String key() {
        return "java-micrometer-test:" + UUID.randomUUID();
    }

    /** The value the table gives a sample, computed here from the Stats record. */
    static double expected(MetricsTable.Sample s, Stats st) throws Exception {
        if (s.mode() != null) {
            return s.mode().equals(st.mode()) ? 1 : 0;
        }
        for (RecordComponent c : Stats.class.getRecordComponents()) {
            if (c.getName().equals(s.field())) {
                return ((Number) c.getAccessor().invoke(st)).doubleValue() * s.scale();
            }
        }
        throw new AssertionError("no Stats field " + s.field());
    }

    static double value(Meter m) {
        if (m instanceof FunctionCounter c) {
            return c.count();
        }
        return ((Gauge) m).value();
    }

    @Test
    void simpleRegistryMetersEqualTheDecisionsMadeAndStats() throws Exception {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        try (RateLimiter limiter = redis().denialCache(false).build()) {
            new RlMetrics(limiter).bindTo(registry);
            String key = key();
            int denied = 0;
            for (int i = 0; i < 7; i++) {
                Decision d = limiter.acquire(key, 4, 60_000);
                denied += d.allowed() ? 0 : 1;
            }
            assertEquals(3, denied);

            assertEquals(7, registry.get("rl.decisions").tag("mode", "normal").functionCounter().count());
            assertEquals(3, registry.get("rl.denials").tag("mode", "normal").functionCounter().count());
            assertEquals(0, registry.get("rl.denials").tag("mode", "local").functionCounter().count());
            assertEquals(1, registry.get("rl.mode").tag("mode", "normal").gauge().value());
            assertEquals(0, registry.get("rl.mode").tag("mode", "local").gauge().value());
            assertTrue(registry.get("rl.redis.rtt.seconds").tag("quantile", "1").gauge().value() > 0);

            // Every family of the table, every sample, with its kind and the value stats() gives
            // (the state's age only grows between two snapshots).
            Stats before = limiter.stats();
            Map<String, Double> seen = new HashMap<>();
            for (MetricsTable.Family f : MetricsTable.FAMILIES) {
                boolean counter = f.kind().equals("counter");
                String name = RlMetrics.micrometerName(f.name(), counter);
                assertEquals(f.samples().size(), registry.find(name).meters().size(), name);
                for (MetricsTable.Sample s : f.samples()) {
                    Meter m = f.label() == null
                            ? registry.get(name).meter()
                            : registry.get(name).tag(f.label(), s.labelValue()).meter();
                    assertEquals(counter, m instanceof FunctionCounter, name);
                    assertEquals(f.help(), m.getId().getDescription(), name);
                    seen.put(name + "/" + s.labelValue(), value(m));
                }
            }
            Stats after = limiter.stats();
            for (MetricsTable.Family f : MetricsTable.FAMILIES) {
                String name = RlMetrics.micrometerName(f.name(), f.kind().equals("counter"));
                for (MetricsTable.Sample s : f.samples()) {
                    double v = seen.get(name + "/" + s.labelValue());
                    if (name.equals("rl.state.seconds")) {
                        continue; // below
                    }
                    if (name.equals("rl.instances") && before.instances() != after.instances()) {
                        // The fleet's size is learned by heartbeat, in the background: it may
                        // change between the two snapshots; the meter shows one of them.
                        assertTrue(v == before.instances() || v == after.instances(), name + " " + v);
                        continue;
                    }
                    assertEquals(expected(s, before), v, 1e-12, name + " " + s.labelValue());
                }
            }
            double age = seen.get("rl.state.seconds/null");
            // Bounds scaled as the meter scales (by the table's factor): x * 0.001 and x / 1e3 differ
            // in the last bit for some x, which failed this whenever both snapshots had the same age.
            double scale = MetricsTable.FAMILIES.stream().filter(f -> f.name().equals("rl_state_seconds"))
                    .findFirst().orElseThrow().samples().get(0).scale();
            assertTrue(before.stateMs() * scale <= age && age <= after.stateMs() * scale, "age " + age);
            assertEquals(MetricsTable.FAMILIES.stream().mapToInt(f -> f.samples().size()).sum(), registry.getMeters().size());
        }
    }

    @Test
    void prometheusScrapeHasTheTableNamesAndOneSeriesPerLimiterTag() {
        PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);
        try (RateLimiter api = redis().build(); RateLimiter login = RateLimiter.open("memory://")) {
            new RlMetrics(api, Tags.of("limiter", "api")).bindTo(registry);
            new RlMetrics(login, Tags.of("limiter", "login")).bindTo(registry);
            String key = key();
            for (int i = 0; i < 4; i++) {
                api.acquire(key, 2, 60_000);
            }
            for (int i = 0; i < 5; i++) {
                login.acquire(key, 1, 60_000);
            }
            String text = registry.scrape();
            Map<String, Double> series = new HashMap<>();
            Matcher m = Pattern.compile("(?m)^(rl_[a-z_]+)(\\{[^}]*\\})? (\\S+)$").matcher(text);
            while (m.find()) {
                series.put(m.group(1) + (m.group(2) == null ? "" : m.group(2)), Double.parseDouble(m.group(3)));
            }
            // The Prometheus names are the table's own, _total and _seconds included.
            for (MetricsTable.Family f : MetricsTable.FAMILIES) {
                assertTrue(text.contains("# TYPE " + f.name() + " " + f.kind()), f.name() + "\n" + text);
            }
            assertEquals(3.0, series.get("rl_decisions_total{limiter=\"api\",mode=\"normal\"}"), text);
            assertEquals(1.0, series.get("rl_denials_total{limiter=\"api\",mode=\"normal\"}"), text);
            // With the denial cache (the default), the 4th call's denial is replayed without Redis.
            assertEquals(1.0, series.get("rl_denials_cached_total{limiter=\"api\"}"), text);
            assertEquals(5.0, series.get("rl_decisions_total{limiter=\"login\",mode=\"memory\"}"), text);
            assertEquals(4.0, series.get("rl_denials_total{limiter=\"login\",mode=\"memory\"}"), text);
            assertEquals(1.0, series.get("rl_mode{limiter=\"login\",mode=\"memory\"}"), text);
            assertTrue(series.get("rl_redis_rtt_seconds{limiter=\"api\",quantile=\"1\"}") > 0, text);
            // Bounded: every series names one of the two limiters.
            assertFalse(series.isEmpty());
            for (String s : series.keySet()) {
                assertTrue(s.contains("limiter=\"api\"") || s.contains("limiter=\"login\""), s);
            }
        }
    }

    @Test
    void aClosedLimiterReadsNaN() {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        RateLimiter limiter = RateLimiter.open("memory://");
        new RlMetrics(limiter).bindTo(registry);
        limiter.acquire("k", 1, 1000);
        assertEquals(1, registry.get("rl.decisions").tag("mode", "memory").functionCounter().count());
        limiter.close();
        assertTrue(Double.isNaN(registry.get("rl.decisions").tag("mode", "memory").functionCounter().count()));
        assertTrue(Double.isNaN(registry.get("rl.mode").tag("mode", "memory").gauge().value()));
    }

    @Test
    void tagsMustNotShadowTheTableLabels() {
        try (RateLimiter limiter = RateLimiter.open("memory://")) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> new RlMetrics(limiter, Tags.of("mode", "x")));
            assertTrue(e.getMessage().contains("mode"), e.getMessage());
            assertThrows(NullPointerException.class, () -> new RlMetrics(null));
        }
    }

    @Test
    void namesDropTotalOnCountersAndUseDots() {
        assertEquals("rl.decisions", RlMetrics.micrometerName("rl_decisions_total", true));
        assertEquals("rl.redis.rtt.seconds", RlMetrics.micrometerName("rl_redis_rtt_seconds", false));
        assertEquals("rl.mode", RlMetrics.micrometerName("rl_mode", false));
    }
}
