package dev.rl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Random arguments across the FFI (JUnit, repeated random calls from a seed printed on failure):
 * keys of any text, bytes or size, limits, windows and costs at and past every edge, option values,
 * rule lists and policy text. Every call returns a well-formed decision or throws
 * {@link IllegalArgumentException} naming an argument ({@code invalid argument `x`}): never a
 * crash, never a {@link NativePanicException}, never another exception. Decisions go to a real
 * redis-server. {@code -Drl.fuzz.runs=N} sets the calls per test (default 300);
 * {@code -Drl.fuzz.seed=S} replays a run.
 */
class FuzzArgsTest {

    private static final int RUNS = Integer.getInteger("rl.fuzz.runs", 300);
    private static final long SEED = Long.getLong("rl.fuzz.seed", System.nanoTime());
    private static final long[] EDGES = {0, 1, 2, 1_000_000_000_000_000L, 1_000_000_000_000_001L, 2_592_000_000L,
        2_592_000_001L, 1L << 53, (1L << 53) + 1, Long.MAX_VALUE, Long.MIN_VALUE, -1, Integer.MAX_VALUE,
        Integer.MIN_VALUE, 60_000, 60_001, 64, 65};
    private static final String[] PIECES = {"1", "100", "0", "99999999999999999999", "/", " per ", "PER", "s", "ms",
        "hour", "month", "year", ";", ",", "|", ":", "name", "\"", "\\", " ", "\u20ac", "a\u20ac", "\uD83D\uDE00",
        "5 a\u20ac/s", "\uD800", "{", "}"};

    private static RateLimiter limiter;
    private static int ok;
    private static int refused;

    @BeforeEach
    void resetOutcomes() {
        ok = 0;
        refused = 0;
    }

    /** Both outcomes occurred: a property that never admits (or never refuses) tests little. */
    @AfterEach
    void bothOutcomes() {
        assertTrue(ok > 0 && refused > 0, "ok " + ok + ", refused " + refused + " (seed " + SEED + ")");
    }

    @BeforeAll
    static void open() {
        limiter = TestSupport.redis().localFallback(false).build();
    }

    @AfterAll
    static void close() {
        limiter.close();
    }

    /** The call's result, or null if it threw an IllegalArgumentException naming an argument. */
    private static <T> T typed(Random r, String what, Supplier<T> call) {
        try {
            T t = call.get();
            ok++;
            return t;
        } catch (IllegalArgumentException e) {
            refused++;
            String m = e.getMessage();
            assertTrue(m != null && m.contains("`"), what + ": no argument named in " + m + " (seed " + SEED + ")");
            return null;
        } catch (Throwable t) {
            throw new AssertionError(what + ": not a typed error (seed " + SEED + ")", t);
        }
    }

    private static long number(Random r) {
        switch (r.nextInt(4)) {
            case 0:
                return 1 + r.nextInt(100);
            case 1:
                return EDGES[r.nextInt(EDGES.length)];
            case 2:
                return r.nextLong();
            default:
                return r.nextInt(3) - 1;
        }
    }

    private static String text(Random r, int max) {
        switch (r.nextInt(6)) {
            case 0:
                return "";
            case 1:
                return "x".repeat(65_536 + r.nextInt(2));
            case 2: {
                StringBuilder b = new StringBuilder();
                int n = r.nextInt(max + 1);
                for (int i = 0; i < n; i++) {
                    b.append((char) r.nextInt(0x10000)); // lone surrogates included
                }
                return b.toString();
            }
            case 3: {
                StringBuilder b = new StringBuilder();
                int n = r.nextInt(8);
                for (int i = 0; i < n; i++) {
                    b.append(PIECES[r.nextInt(PIECES.length)]);
                }
                return b.toString();
            }
            default: {
                byte[] a = new byte[r.nextInt(max + 1)];
                r.nextBytes(a);
                return new String(a, StandardCharsets.ISO_8859_1);
            }
        }
    }

    private static byte[] bytes(Random r) {
        int n = r.nextInt(10) == 0 ? 65_536 + r.nextInt(2) : r.nextInt(30);
        byte[] a = new byte[n];
        r.nextBytes(a);
        return a;
    }

    private static void wellFormed(Decision d) {
        assertNotNull(d);
        assertTrue(d.remaining() >= 0 && d.used() >= 0 && d.retryAfterMs() >= 0 && d.resetAfterMs() >= 0, d.toString());
        assertTrue(d.nowMs() > 0 && d.mode() != null, d.toString());
    }

    @Test
    void acquirePeekAndResetWithRandomArguments() {
        Random r = new Random(SEED);
        for (int i = 0; i < RUNS; i++) {
            long limit = number(r), window = number(r), cost = number(r);
            if (r.nextBoolean()) {
                String key = r.nextInt(20) == 0 ? null : text(r, 30);
                String what = "acquire(" + key + ", " + limit + ", " + window + ", " + cost + ")";
                Decision d = typed(r, what, () -> limiter.acquire(key, limit, window, cost));
                if (d != null) {
                    wellFormed(d);
                }
                Decision p = typed(r, what, () -> limiter.peek(key, limit, window));
                if (p != null) {
                    wellFormed(p);
                }
                typed(r, what, () -> {
                    limiter.reset(key);
                    return null;
                });
            } else {
                byte[] key = bytes(r);
                String what = "acquire(" + key.length + " bytes, " + limit + ", " + window + ", " + cost + ")";
                Decision d = typed(r, what, () -> limiter.acquireAsync(key, limit, window, cost).join());
                if (d != null) {
                    wellFormed(d);
                }
                typed(r, what, () -> limiter.redisKey(key));
            }
        }
    }

    @Test
    void buildWithRandomOptionValues() {
        Random r = new Random(SEED + 1);
        for (int i = 0; i < RUNS; i++) {
            RateLimiter.Builder b = RateLimiter.builder("memory://");
            StringBuilder what = new StringBuilder("builder");
            int n = 1 + r.nextInt(4);
            for (int j = 0; j < n; j++) {
                long v = number(r);
                int which = r.nextInt(18);
                what.append(" #").append(which).append('=').append(v);
                switch (which) {
                    case 0 -> b.keyPrefix(text(r, 10));
                    case 1 -> b.connectTimeoutMs(v);
                    case 2 -> b.requestTimeoutMs(v);
                    case 3 -> b.clientClock(v % 2 == 0);
                    case 4 -> b.maxClockSkewMs(v);
                    case 5 -> b.retryDelayMs(v);
                    case 6 -> b.localFallback(v % 2 == 0);
                    case 7 -> b.degradeRttMs(v);
                    case 8 -> b.degradeAfterMs(v);
                    case 9 -> b.recoverRttMs(v);
                    case 10 -> b.recoverAfterMs(v);
                    case 11 -> b.instances(v);
                    case 12 -> b.localMaxKeys(v);
                    case 13 -> b.keyShards(v);
                    case 14 -> b.leases(r.nextBoolean() ? text(r, 6) : List.of("off", "on", "auto").get(r.nextInt(3)));
                    case 15 -> b.leaseMs(v);
                    case 16 -> b.leaseHotRate(v);
                    default -> b.denialCache(v % 2 == 0);
                }
            }
            RateLimiter l = typed(r, what.toString(), b::build);
            if (l != null) {
                wellFormed(l.acquire("k", 5, 1000));
                l.close();
            }
        }
    }

    @Test
    void acquireAllWithRandomRuleLists() {
        Random r = new Random(SEED + 2);
        for (int i = 0; i < RUNS; i++) {
            List<Rule> rules = new ArrayList<>();
            String group;
            // Every third list is in range by construction (1 to 4 rules, one cost, a group), so it
            // must be decided: random lists alone are almost all refused (empty, over 16 rules, a
            // value past an edge, two costs on one key, keys on two slots without a group), and a run
            // of 300 could then decide none.
            boolean inRange = i % 3 == 0;
            if (inRange) {
                int n = 1 + r.nextInt(4);
                for (int j = 0; j < n; j++) {
                    rules.add(new Rule(r.nextBoolean() ? "a" : "b", 1 + r.nextInt(100), 1 + r.nextInt(100_000), 1));
                }
                group = "g";
            } else {
                int n = r.nextInt(19);
                String[] keys = {"a", "b", text(r, 8)};
                for (int j = 0; j < n; j++) {
                    long limit = r.nextBoolean() ? 1 + r.nextInt(100) : number(r);
                    long window = r.nextBoolean() ? 1 + r.nextInt(100_000) : number(r);
                    rules.add(new Rule(keys[r.nextInt(keys.length)], limit, window, r.nextBoolean() ? 1 : number(r)));
                }
                int g = r.nextInt(3);
                group = g == 0 ? null : g == 1 ? "g" : text(r, 8);
            }
            String what = "acquireAll(" + rules + ", " + group + ")";
            CompositeDecision c = typed(r, what, () -> limiter.acquireAll(rules, group));
            if (inRange) {
                assertNotNull(c, what + " is in range but was refused (seed " + SEED + ")");
            }
            if (c != null) {
                assertEquals(rules.size(), c.decisions().size());
                c.decisions().forEach(FuzzArgsTest::wellFormed);
            }
        }
    }

    @Test
    void parseAllWithRandomPolicyText() {
        Random r = new Random(SEED + 3);
        for (int i = 0; i < RUNS * 3; i++) {
            String[] units = {"s", "ms", "2m", "hour", "x", ""};
            String t = r.nextInt(3) == 0
                    ? r.nextInt(2000) + (r.nextBoolean() ? "/" : " per ") + units[r.nextInt(units.length)]
                    : text(r, 30);
            List<Policy> ps = typed(r, "parseAll(" + t + ")", () -> Policy.parseAll(t));
            if (ps != null) {
                assertFalse(ps.isEmpty());
                for (Policy p : ps) {
                    assertTrue(p.limit() >= 1 && p.windowMs() >= 1 && p.name() != null, p.toString());
                }
            }
        }
        if (RUNS <= 0) {
            fail("no runs");
        }
    }
}
