package dev.rl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** acquireAll, policy strings and the core's response fields, as the binding exposes them. */
class CompositeTest {

    @ParameterizedTest
    @ValueSource(strings = {"redis", "memory"})
    void acquireAllIsAllOrNothingAndReportsEveryRule(String backend) throws Exception {
        try (RateLimiter limiter = BasicTest.open(backend)) {
            String ip = TestSupport.key("ip");
            String user = TestSupport.key("user");
            List<Rule> rules = List.of(new Rule(ip, 3, 10_000, 1), new Rule(user, 2, 10_000, 1));
            CompositeDecision first = limiter.acquireAll(rules, "g1");
            assertTrue(first.allowed());
            assertEquals(0, first.retryAfterMs());
            assertEquals(backend.equals("redis") ? "normal" : "memory", first.mode());
            assertEquals(2, first.decisions().size());
            assertEquals(2, first.decisions().get(0).remaining());
            assertEquals(1, first.decisions().get(1).remaining());
            assertTrue(limiter.acquireAllAsync(rules, "g1").get(5, TimeUnit.SECONDS).allowed());
            CompositeDecision denied = limiter.acquireAll(rules, "g1");
            assertFalse(denied.allowed());
            assertTrue(denied.retryAfterMs() > 0 && denied.retryAfterMs() <= 10_000, denied.toString());
            assertTrue(denied.decisions().get(0).allowed(), "the ip rule alone would admit");
            assertFalse(denied.decisions().get(1).allowed());
            // Nothing was taken from the ip rule by the denied call: one more fits there.
            assertTrue(limiter.acquireAll(List.of(new Rule(ip, 3, 10_000, 1)), "g1").allowed());
            assertFalse(limiter.acquireAll(List.of(new Rule(ip, 3, 10_000, 1)), "g1").allowed());
        }
    }

    /** Whether one more permit fits {@code key}'s window in {@code group} (limit 1), taking it if so. */
    private static boolean fits(RateLimiter limiter, String key, String group) {
        return limiter.acquireAll(List.of(new Rule(key, 1, 60_000, 1)), group).allowed();
    }

    @ParameterizedTest
    @ValueSource(strings = {"redis", "memory"})
    void resetInGroupClearsTheKeyInThatGroupOnly(String backend) throws Exception {
        try (RateLimiter limiter = BasicTest.open(backend)) {
            String key = TestSupport.key("reset-group");
            for (String g : List.of("g1", "g2", "g3")) {
                assertTrue(fits(limiter, key, g));
                assertFalse(fits(limiter, key, g));
            }
            assertTrue(limiter.acquire(key, 1, 60_000).allowed(), "the ungrouped window admits");
            limiter.resetInGroup(key, "g1");
            assertTrue(fits(limiter, key, "g1"), "the group's window was cleared");
            assertFalse(fits(limiter, key, "g2"), "another group's window is untouched");
            assertEquals(1, limiter.peek(key, 1, 60_000).used(), "the ungrouped window is untouched");
            limiter.resetInGroupAsync(key, "g2").get(5, TimeUnit.SECONDS);
            assertTrue(fits(limiter, key, "g2"), "cleared by the async twin");
            assertFalse(fits(limiter, key, "g3"));
            limiter.resetInGroup(key, null); // no group: reset
            assertEquals(0, limiter.peek(key, 1, 60_000).used());
            assertFalse(fits(limiter, key, "g1"));
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> limiter.resetInGroup(key, ""));
            assertTrue(e.getMessage().startsWith("invalid argument `group`") && e.getMessage().contains("1 to 1024"), e.getMessage());
            e = assertThrows(IllegalArgumentException.class, () -> limiter.resetInGroupAsync("", "g1"));
            assertTrue(e.getMessage().startsWith("invalid argument `key`"), e.getMessage());
            assertThrows(IllegalArgumentException.class, () -> limiter.resetInGroup(null, "g1"));
        }
    }

    @Test
    void policyStringsParseInTheCoreAndNameTheBadText() {
        List<Policy> ps = Policy.parseAll("burst: 10/s; 100 per minute");
        assertEquals(List.of(new Policy("burst", 10, 1000), new Policy("100/1m", 100, 60_000)), ps);
        assertEquals("5/250ms", Policy.of(null, 5, 250).name());
        IllegalArgumentException bad = assertThrows(IllegalArgumentException.class, () -> Policy.parseAll("10/fortnight"));
        assertTrue(bad.getMessage().contains("`policy`") && bad.getMessage().contains("fortnight"), bad.getMessage());
        assertThrows(IllegalArgumentException.class, () -> Policy.parseAll(null));
    }

    @Test
    void badRulesThrowNamingTheValueAndTheRule() {
        try (RateLimiter limiter = RateLimiter.open("memory://")) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> limiter.acquireAll(List.of(new Rule("a", 1, 1000, 1), new Rule("b", -1, 1000, 1)), null));
            assertTrue(e.getMessage().contains("`limit`") && e.getMessage().contains("rule 1"), e.getMessage());
            e = assertThrows(IllegalArgumentException.class,
                    () -> limiter.acquireAllAsync(List.of(new Rule(null, 1, 1000, 1)), null));
            assertTrue(e.getMessage().contains("`key`") && e.getMessage().contains("rule 0"), e.getMessage());
            e = assertThrows(IllegalArgumentException.class, () -> limiter.acquireAll(List.of(), null));
            assertTrue(e.getMessage().contains("`rules`"), e.getMessage());
            List<Rule> many = new ArrayList<>();
            for (int i = 0; i < 17; i++) {
                many.add(new Rule("k" + i, 1, 1000, 1));
            }
            e = assertThrows(IllegalArgumentException.class, () -> limiter.acquireAll(many, "g"));
            assertTrue(e.getMessage().contains("`rules`") && e.getMessage().contains("16"), e.getMessage());
        }
    }

    @Test
    void headersAndProblemBodyAreTheCores() {
        try (RateLimiter limiter = RateLimiter.open("memory://")) {
            List<Policy> ps = Policy.parseAll("burst: 2/s; daily: 100/d");
            String key = TestSupport.key("hdr");
            List<Rule> rules = List.of(ps.get(0).on(key, 1), ps.get(1).on(key, 1));
            CompositeDecision ok = limiter.acquireAll(rules, null);
            List<Map.Entry<String, String>> h = RateLimitHeaders.render(ps, ok, HeaderStyle.IETF);
            assertEquals(List.of(Map.entry("RateLimit-Policy", "\"burst\";q=2;w=1, \"daily\";q=100;w=86400"),
                    Map.entry("RateLimit", "\"burst\";r=1;t=1, \"daily\";r=99;t=86400")), h);
            limiter.acquireAll(rules, null);
            CompositeDecision no = limiter.acquireAll(rules, null);
            assertFalse(no.allowed());
            List<Map.Entry<String, String>> both = RateLimitHeaders.render(ps, no, HeaderStyle.BOTH);
            assertEquals("Retry-After", both.get(both.size() - 1).getKey());
            assertEquals("1", both.get(both.size() - 1).getValue());
            assertTrue(both.contains(Map.entry("X-RateLimit-Limit", "2")), both.toString());
            assertEquals(List.of(Map.entry("Retry-After", "1")), RateLimitHeaders.render(ps, no, HeaderStyle.NONE));
            String body = RateLimitHeaders.problemBody(ps, no);
            assertTrue(body.contains("\"violated-policies\":[\"burst\"]") && body.contains("\"status\":429"), body);
            assertEquals("application/problem+json", RateLimitHeaders.PROBLEM_CONTENT_TYPE);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> RateLimitHeaders.render(ps.subList(0, 1), ok, HeaderStyle.IETF));
            assertTrue(e.getMessage().contains("`policies`"), e.getMessage());
            e = assertThrows(IllegalArgumentException.class, () -> RateLimitHeaders.render(ps, ok, null));
            assertTrue(e.getMessage().contains("`style`"), e.getMessage());
            Decision d0 = ok.decisions().get(0);
            CompositeDecision forged = new CompositeDecision(true, 0, ok.mode(), ok.nowMs(), List.of(
                    new Decision(true, -1, d0.used(), 0, d0.resetAfterMs(), d0.mode(), d0.nowMs()), ok.decisions().get(1)));
            e = assertThrows(IllegalArgumentException.class, () -> RateLimitHeaders.problemBody(ps, forged));
            assertTrue(e.getMessage().contains("`remaining`"), e.getMessage());
        }
    }
}
