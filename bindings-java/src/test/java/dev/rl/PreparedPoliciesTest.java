package dev.rl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** PreparedPolicies and acquirePolicies: one call that decides as acquireAll and renders as RateLimitHeaders. */
class PreparedPoliciesTest {

    @ParameterizedTest
    @ValueSource(strings = {"redis", "memory"})
    void aRequestIsDecidedAsAcquireAllAndRenderedAsRateLimitHeaders(String backend) throws Exception {
        try (RateLimiter limiter = BasicTest.open(backend)) {
            String key = TestSupport.key("prepared");
            List<Policy> ps = Policy.parseAll("burst: 2/10s; 3/m");
            PreparedPolicies p = PreparedPolicies.of(ps, HeaderStyle.BOTH);
            assertEquals(ps, p.policies());
            for (int i = 0; i < 4; i++) {
                PolicyResponse r = i % 2 == 0 ? limiter.acquirePolicies(p, key, 1, null)
                        : limiter.acquirePoliciesAsync(p, key, 1, null).get(5, TimeUnit.SECONDS);
                CompositeDecision d = r.decision();
                assertEquals(i < 2, d.allowed(), "call " + i + ": " + d);
                assertEquals(2, d.decisions().size());
                assertEquals(Math.min(i + 1, 2), d.decisions().get(0).used(), d.toString());
                assertEquals(RateLimitHeaders.render(ps, d, HeaderStyle.BOTH), r.headers());
                if (d.allowed()) {
                    assertNull(r.problemBody());
                } else {
                    assertTrue(d.retryAfterMs() > 0, d.toString());
                    assertEquals(RateLimitHeaders.problemBody(ps, d), r.problemBody());
                }
            }
            // The windows are acquireAll's with one rule per policy on the key; a group is another.
            CompositeDecision same = limiter.acquireAll(List.of(ps.get(0).on(key, 1), ps.get(1).on(key, 1)), null);
            assertFalse(same.allowed(), same.toString());
            assertEquals(2, same.decisions().get(1).used(), same.toString());
            assertTrue(limiter.acquirePolicies(p, key, 2, "g").decision().allowed());
            assertFalse(limiter.acquirePolicies(p, key, 1, "g").decision().allowed());
        }
    }

    /** An answer longer than the buffer the call passes (long names, both styles, a denial's body) arrives whole. */
    @ParameterizedTest
    @ValueSource(strings = {"redis", "memory"})
    void anAnswerLongerThanTheCallsBufferArrivesWhole(String backend) throws Exception {
        try (RateLimiter limiter = BasicTest.open(backend)) {
            String key = TestSupport.key("prepared-long");
            String name = "a-policy-with-a-name-long-enough-to-overflow-the-buffer";
            List<Policy> ps = Policy.parseAll(name + "-1: 1/10s; " + name + "-2: 5/m; " + name + "-3: 9/h");
            PreparedPolicies p = PreparedPolicies.of(ps, HeaderStyle.BOTH);
            for (int i = 0; i < 4; i++) {
                PolicyResponse r = i % 2 == 0 ? limiter.acquirePolicies(p, key, 1, null)
                        : limiter.acquirePoliciesAsync(p, key, 1, null).get(5, TimeUnit.SECONDS);
                CompositeDecision d = r.decision();
                assertEquals(i == 0, d.allowed(), "call " + i + ": " + d);
                assertEquals(3, d.decisions().size());
                assertEquals(RateLimitHeaders.render(ps, d, HeaderStyle.BOTH), r.headers());
                int text = 0;
                for (var h : r.headers()) {
                    text += h.getKey().length() + h.getValue().length() + 2;
                }
                if (!d.allowed()) {
                    assertEquals(RateLimitHeaders.problemBody(ps, d), r.problemBody());
                    text += r.problemBody().length();
                    assertTrue(text > p.textCapacity, "the answer (" + text + " bytes) overflows the call's buffer");
                }
            }
        }
    }

    @Test
    void aLeasedRequestIsAnsweredAtOnce() throws Exception {
        try (RateLimiter limiter = TestSupport.redis().leases("on").leaseMs(2_000).build()) {
            String key = TestSupport.key("prepared-lease");
            PreparedPolicies p = PreparedPolicies.of("100/m", HeaderStyle.IETF);
            PolicyResponse first = limiter.acquirePoliciesAsync(p, key, 1, null).get(5, TimeUnit.SECONDS);
            assertTrue(first.decision().allowed(), first.toString());
            int atOnce = 0;
            for (int i = 0; i < 10; i++) {
                CompletableFuture<PolicyResponse> f = limiter.acquirePoliciesAsync(p, key, 1, null);
                boolean done = f.isDone();
                PolicyResponse r = f.get(5, TimeUnit.SECONDS);
                assertEquals("lease", r.decision().mode(), r.toString());
                assertEquals(RateLimitHeaders.render(p.policies(), r.decision(), HeaderStyle.IETF), r.headers());
                atOnce += done ? 1 : 0;
            }
            assertEquals(10, atOnce, "a decision from the lease completes the future before the call returns");
        }
    }

    private static void refused(String name, Class<? extends RuntimeException> type, Executable call) {
        RuntimeException e = assertThrows(type, call);
        assertTrue(e.getMessage().startsWith("invalid argument `" + name + "`"), e.getMessage());
    }

    @Test
    void badInputIsRefusedNamingTheValue() {
        Class<IllegalArgumentException> iae = IllegalArgumentException.class;
        refused("policies", iae, () -> PreparedPolicies.of(List.of(), HeaderStyle.IETF));
        refused("policies", iae, () -> PreparedPolicies.of((List<Policy>) null, HeaderStyle.IETF));
        refused("policies", iae, () -> PreparedPolicies.of(List.of(Policy.of("a", 1, 1000), Policy.of("a", 2, 1000)),
                HeaderStyle.IETF));
        refused("style", iae, () -> PreparedPolicies.of("10/s", null));
        refused("policy", iae, () -> PreparedPolicies.of("ten per second", HeaderStyle.IETF));
        PreparedPolicies p = PreparedPolicies.of("10/s", HeaderStyle.IETF);
        try (RateLimiter limiter = BasicTest.open("memory")) {
            refused("policies", iae, () -> limiter.acquirePolicies(null, "k", 1, null));
            refused("key", iae, () -> limiter.acquirePolicies(p, null, 1, null));
            refused("key", iae, () -> limiter.acquirePoliciesAsync(p, "", 1, null));
            refused("cost", iae, () -> limiter.acquirePolicies(p, "k", -1, null));
            refused("cost", iae, () -> limiter.acquirePoliciesAsync(p, "k", -1, null));
            refused("group", iae, () -> limiter.acquirePolicies(p, "k", 1, ""));
            assertTrue(limiter.acquirePolicies(p, "k", 1, null).decision().allowed(), "nothing taken by the refused calls");
            assertEquals(9, limiter.peek("k", 10, 1000).remaining());
            limiter.close();
            assertThrows(IllegalStateException.class, () -> limiter.acquirePolicies(p, "k", 1, null));
            assertThrows(IllegalStateException.class, () -> limiter.acquirePoliciesAsync(p, "k", 1, null));
        }
    }
}
