package dev.rl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.function.Executable;

/**
 * Bad inputs, from the shared table tests/conformance/invalid.json (format in its README): every
 * row Java can express throws {@link IllegalArgumentException} at the call (async variants too)
 * naming the argument in camelCase, through every entry point of its call, and sends nothing to
 * Redis. Options go through the builder's typed setters, found by the option's camelCase name.
 */
class ConformanceTest {

    /** Every tag of the table: null if Java expresses it, else why not. An unknown tag fails. */
    private static final Map<String, String> NEEDS = new LinkedHashMap<>();

    static {
        NEEDS.put("dynamic_types", "statically typed: a value of another type does not compile");
        NEEDS.put("compound_values", "statically typed: a list or map does not compile");
        NEEDS.put("null_key", null);
        NEEDS.put("distinct_float", "statically typed: a double for a long does not compile");
        NEEDS.put("float_numbers", "statically typed: a double for a long does not compile");
        NEEDS.put("negative", null);
        NEEDS.put("beyond_i64", "a long holds no integer beyond 64 signed bits");
        NEEDS.put("beyond_u64", "a long holds no integer beyond 64 signed bits");
        NEEDS.put("inexact_double", null);
        NEEDS.put("unknown_option", "options are typed builder setters: an unknown name does not compile");
        NEEDS.put("byte_strings", "Java strings are Unicode");
        NEEDS.put("lone_surrogate", "String.getBytes(UTF_8) replaces a lone surrogate with '?' before rl sees it");
        NEEDS.put("zero_option", null);
    }

    private static final List<String> FIELDS =
            List.of("id", "call", "args", "error", "argument", "needs", "shows", "message_lacks");

    @SuppressWarnings("unchecked")
    private static Map<String, Object> table() throws IOException {
        Path p = Path.of(System.getProperty("user.dir")).resolve("../tests/conformance/invalid.json");
        return (Map<String, Object>) MiniJson.parse(Files.readString(p, StandardCharsets.UTF_8));
    }

    /** retry_delay_ms -> retryDelayMs (rl_core::options::camel_case). */
    static String camel(String name) {
        StringBuilder b = new StringBuilder();
        boolean up = false;
        for (char c : name.toCharArray()) {
            if (c == '_') {
                up = true;
            } else {
                b.append(up ? Character.toUpperCase(c) : c);
                up = false;
            }
        }
        return b.toString();
    }

    /** A table value as the Java value it stands for: null, Long, Boolean, String or byte[]. */
    @SuppressWarnings("unchecked")
    private static Object value(Object v) {
        if (v instanceof BigInteger) return ((BigInteger) v).longValueExact();
        if (v == null || v instanceof String || v instanceof Boolean) return v;
        if (!(v instanceof Map)) throw new IllegalStateException("no Java value for " + v);
        Map<String, Object> m = (Map<String, Object>) v;
        if (m.size() != 1) throw new IllegalStateException("a tagged value has one key: " + m);
        Map.Entry<String, Object> e = m.entrySet().iterator().next();
        switch (e.getKey()) {
            case "int":
                return new BigInteger((String) e.getValue()).longValueExact();
            case "bytes_hex": {
                String h = (String) e.getValue();
                byte[] b = new byte[h.length() / 2];
                for (int i = 0; i < b.length; i++) b[i] = (byte) Integer.parseInt(h.substring(2 * i, 2 * i + 2), 16);
                return b;
            }
            case "repeat": {
                List<Object> a = (List<Object>) e.getValue();
                Object part = value(a.get(0));
                int n = ((BigInteger) a.get(1)).intValueExact();
                if (part instanceof String) return ((String) part).repeat(n);
                byte[] one = (byte[]) part;
                byte[] out = new byte[one.length * n];
                for (int i = 0; i < n; i++) System.arraycopy(one, 0, out, i * one.length, one.length);
                return out;
            }
            default:
                throw new IllegalStateException("unknown or inexpressible value tag " + e.getKey());
        }
    }

    @SuppressWarnings("unchecked")
    private static String skipReason(Map<String, Object> row) {
        for (String k : row.keySet()) assertTrue(FIELDS.contains(k), row.get("id") + ": unknown field " + k);
        assertTrue(List.of("open", "acquire", "peek", "reset", "parse_policies", "acquire_all").contains(row.get("call")), "call " + row.get("call"));
        assertTrue(List.of("invalid_argument", "invalid_type").contains(row.get("error")), "error " + row.get("error"));
        for (Object tag : (List<Object>) row.getOrDefault("needs", List.of())) {
            assertTrue(NEEDS.containsKey(tag), row.get("id") + ": unknown need " + tag);
            if (NEEDS.get(tag) != null) return tag + ": " + NEEDS.get(tag);
        }
        return null;
    }

    private static void check(Map<String, Object> row, Executable call, String how) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, call, row.get("id") + " via " + how);
        String m = e.getMessage();
        String want = "invalid argument `" + camel((String) row.get("argument")) + "`";
        assertTrue(m.startsWith(want), how + ": \"" + m + "\" should start with " + want);
        if (row.containsKey("shows")) assertTrue(m.contains((String) row.get("shows")), how + ": " + m);
        if (row.containsKey("message_lacks")) assertFalse(m.contains((String) row.get("message_lacks")), how + ": " + m);
    }

    /** Sets option {@code name} through the builder's setter of that camelCase name (or its Duration form). */
    private static void set(RateLimiter.Builder b, String name, Object v) throws Throwable {
        String c = camel(name);
        try {
            for (Method m : RateLimiter.Builder.class.getMethods()) {
                if (m.getParameterCount() != 1) continue;
                Class<?> t = m.getParameterTypes()[0];
                if (m.getName().equals(c) && (t == long.class && v instanceof Long
                        || t == String.class && v instanceof String || t == boolean.class && v instanceof Boolean)) {
                    m.invoke(b, v);
                    return;
                }
                if (c.endsWith("Ms") && m.getName().equals(c.substring(0, c.length() - 2)) && t == Duration.class
                        && v instanceof Long) {
                    m.invoke(b, Duration.ofMillis((Long) v));
                    return;
                }
            }
        } catch (InvocationTargetException e) {
            throw e.getCause();
        }
        fail("the builder has no setter for option " + name + " (" + c + ") taking " + v);
    }

    @SuppressWarnings("unchecked")
    private static List<DynamicTest> rowTests(Map<String, Object> doc, Map<String, Object> row, RateLimiter[] limiters) {
        String id = (String) row.get("id");
        String call = (String) row.get("call");
        Map<String, Object> args = (Map<String, Object>) row.get("args");
        if (call.equals("open")) {
            return List.of(DynamicTest.dynamicTest(id, () -> {
                Object url = args.containsKey("url") ? value(args.get("url")) : "memory://";
                Map<String, Object> options = (Map<String, Object>) args.getOrDefault("options", Map.of());
                check(row, () -> {
                    RateLimiter.Builder b = RateLimiter.builder((String) url);
                    for (Map.Entry<String, Object> o : options.entrySet()) set(b, o.getKey(), value(o.getValue()));
                    b.build().close();
                }, "builder");
            }));
        }
        if (call.equals("parse_policies")) {
            return List.of(DynamicTest.dynamicTest(id, () ->
                    check(row, () -> Policy.parseAll((String) value(args.get("text"))), "Policy.parseAll")));
        }
        if (call.equals("acquire_all")) {
            return List.of(DynamicTest.dynamicTest(id, () -> compositeRow(doc, row, args, limiters)));
        }
        Map<String, Object> a = new LinkedHashMap<>(
                (Map<String, Object>) ((Map<String, Object>) ((Map<String, Object>) doc.get("calls")).get(call)).get("defaults"));
        a.putAll(args);
        return List.of(DynamicTest.dynamicTest(id, () -> {
            Object key = value(a.get("key"));
            List<Object> keys = new ArrayList<>();
            if (key == null) {
                keys.add((String) null);
                keys.add((byte[]) null);
            } else {
                keys.add(key);
            }
            long limit = a.containsKey("limit") ? (Long) value(a.get("limit")) : 0;
            long window = a.containsKey("window_ms") ? (Long) value(a.get("window_ms")) : 0;
            boolean hasCost = a.containsKey("cost");
            long cost = hasCost ? (Long) value(a.get("cost")) : 1;
            for (RateLimiter l : limiters) {
                for (int i = 0; i < keys.size(); i++) {
                    Object k = keys.get(i);
                    // A null key goes through both overloads: first as a String, then as a byte[].
                    boolean text = k == null ? i == 0 : k instanceof String;
                    String s = text ? (String) k : null;
                    byte[] bs = text ? null : (byte[]) k;
                    String on = l.backend() + (text ? ", String key" : ", byte[] key");
                    switch (call) {
                        case "acquire":
                            if (hasCost) {
                                check(row, () -> { if (text) l.acquire(s, limit, window, cost); else l.acquire(bs, limit, window, cost); }, "acquire " + on);
                                check(row, () -> { if (text) l.acquireAsync(s, limit, window, cost); else l.acquireAsync(bs, limit, window, cost); }, "acquireAsync " + on);
                            } else {
                                check(row, () -> { if (text) l.acquire(s, limit, window); else l.acquire(bs, limit, window); }, "acquire " + on);
                                check(row, () -> { if (text) l.acquireAsync(s, limit, window); else l.acquireAsync(bs, limit, window); }, "acquireAsync " + on);
                                if (text && limit == (int) limit) {
                                    check(row, () -> l.tryAcquire(s, window, (int) limit), "tryAcquire " + on);
                                    check(row, () -> l.tryAcquireAsync(s, window, (int) limit), "tryAcquireAsync " + on);
                                }
                            }
                            break;
                        case "peek":
                            check(row, () -> { if (text) l.peek(s, limit, window); else l.peek(bs, limit, window); }, "peek " + on);
                            check(row, () -> { if (text) l.peekAsync(s, limit, window); else l.peekAsync(bs, limit, window); }, "peekAsync " + on);
                            break;
                        case "reset":
                            check(row, () -> { if (text) l.reset(s); else l.reset(bs); }, "reset " + on);
                            check(row, () -> { if (text) l.resetAsync(s); else l.resetAsync(bs); }, "resetAsync " + on);
                            break;
                        default:
                            fail("unknown call " + call);
                    }
                }
            }
        }));
    }

    /**
     * An acquire_all row (README, "Composite rows") through acquireAll and acquireAllAsync: on every
     * limiter, or with the row's options on a limiter opened with them on Redis only.
     */
    @SuppressWarnings("unchecked")
    private static void compositeRow(Map<String, Object> doc, Map<String, Object> row, Map<String, Object> args,
            RateLimiter[] limiters) throws Throwable {
        Map<String, Object> defaults = (Map<String, Object>)
                ((Map<String, Object>) ((Map<String, Object>) doc.get("calls")).get("acquire")).get("defaults");
        List<Rule> rules = new ArrayList<>();
        for (Object o : (List<Object>) args.getOrDefault("rules", List.of(Map.of()))) {
            Map<String, Object> f = new LinkedHashMap<>(defaults);
            f.putAll((Map<String, Object>) o);
            for (String k : f.keySet()) assertTrue(List.of("key", "limit", "window_ms", "cost").contains(k), "rule field " + k);
            rules.add(new Rule((String) value(f.get("key")), (Long) value(f.get("limit")), (Long) value(f.get("window_ms")),
                    f.containsKey("cost") ? (Long) value(f.get("cost")) : 1));
        }
        String group = args.containsKey("group") ? (String) value(args.get("group")) : null;
        Map<String, Object> options = (Map<String, Object>) args.get("options");
        if (options != null) {
            RateLimiter.Builder b = RateLimiter.builder(TestSupport.redisUrl()).localFallback(false);
            for (Map.Entry<String, Object> o : options.entrySet()) set(b, o.getKey(), value(o.getValue()));
            limiters = new RateLimiter[] {b.build()};
        }
        try {
            for (RateLimiter l : limiters) {
                check(row, () -> l.acquireAll(rules, group), "acquireAll " + l.backend());
                check(row, () -> l.acquireAllAsync(rules, group), "acquireAllAsync " + l.backend());
            }
        } finally {
            if (options != null) limiters[0].close();
        }
    }

    /**
     * The keys on the server but the short-lived retry records of earlier tests' admissions
     * ({@code <window key>:r:<16-byte call id>}, README: Retry), which may expire meanwhile.
     */
    @SuppressWarnings("unchecked")
    private static Set<String> windowKeys(TestRedis redis) {
        Set<String> keys = new TreeSet<>();
        for (Object k : (List<Object>) redis.call("KEYS", "*")) {
            String key = (String) k;
            boolean record = key.length() > 20 && key.startsWith("}:r:", key.length() - 20);
            if (!record) {
                keys.add(key);
            }
        }
        return keys;
    }

    /** Every command a decision or a reset sends: FCALL (Functions), EVALSHA/EVAL, DEL. */
    private static long scriptCalls(TestRedis redis) {
        return redis.calls("fcall") + redis.calls("evalsha") + redis.calls("eval") + redis.calls("del");
    }

    @TestFactory
    @SuppressWarnings("unchecked")
    Stream<DynamicTest> theConformanceTable() throws IOException {
        Map<String, Object> doc = table();
        List<Map<String, Object>> rows = (List<Map<String, Object>>) doc.get("rows");
        RateLimiter memory = RateLimiter.open("memory://");
        // No fallback, so no heartbeat key appears in DBSIZE while the rows run (it did now and then).
        RateLimiter onRedis = RateLimiter.builder(TestSupport.redisUrl()).localFallback(false).build();
        TestRedis redis = TestRedis.connect();
        long before = scriptCalls(redis);
        Set<String> keysBefore = windowKeys(redis);
        List<DynamicTest> tests = new ArrayList<>();
        Map<String, Integer> skipped = new TreeMap<>();
        int asserted = 0;
        for (Map<String, Object> row : rows) {
            String why = skipReason(row);
            if (why != null) {
                skipped.merge(why, 1, Integer::sum);
                continue;
            }
            tests.addAll(rowTests(doc, row, new RateLimiter[] {memory, onRedis}));
            asserted++;
        }
        int skippedTotal = skipped.values().stream().mapToInt(Integer::intValue).sum();
        StringBuilder report = new StringBuilder("java: " + asserted + " rows asserted, " + skippedTotal + " skipped");
        skipped.forEach((why, n) -> report.append("\n  skipped ").append(n).append(" needing ").append(why));
        System.out.println(report);
        assertEquals(rows.size(), asserted + skippedTotal);
        assertTrue(asserted > 50, report.toString());
        tests.add(DynamicTest.dynamicTest("nothing reached Redis", () -> {
            try (redis; memory; onRedis) {
                long after = scriptCalls(redis);
                assertEquals(before, after, "a rejected call must send nothing to Redis");
                Set<String> written = windowKeys(redis);
                written.removeAll(keysBefore);
                assertEquals(Set.of(), written, "a rejected call must write nothing");
            }
        }));
        return tests.stream();
    }
}
