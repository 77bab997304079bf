package dev.rl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Leases through the binding: decisions in mode "lease" with the lease stats, and close()
 * returning unused leases at once, long before they would age out (leaseMs + window).
 */
class LeaseTest {
    static final long LIMIT = 100;
    static final long WINDOW = 60_000;
    static final long LEASE_MS = 10_000;

    static RateLimiter leasing() {
        return TestSupport.redis().leases("on").leaseMs(LEASE_MS).build();
    }

    /** How many single permits a plain limiter can take now. */
    static long takenByAnother(String key) {
        try (RateLimiter b = TestSupport.redis().build()) {
            long got = 0;
            while (b.acquire(key, LIMIT, WINDOW).allowed()) {
                got++;
            }
            return got;
        }
    }

    @Test
    void decisionsFromALeaseHaveModeLeaseAndCountInTheLeaseStats() {
        try (RateLimiter a = leasing()) {
            String key = TestSupport.key("lease-mode");
            List<String> modes = new ArrayList<>();
            for (int i = 0; i < 5; i++) {
                modes.add(a.acquire(key, LIMIT, WINDOW).mode());
            }
            assertTrue(modes.stream().filter("lease"::equals).count() >= 4, modes.toString());
            Stats s = a.stats();
            assertTrue(s.decisionsLease() >= 4, s.toString());
            assertEquals(1, s.leasesTaken(), s.toString());
            assertTrue(s.leasedPermits() >= 5, s.toString());
            assertEquals(0, s.leaseRefunds(), s.toString());
        }
    }

    @Test
    void closeReturnsUnusedLeases() {
        String key = TestSupport.key("lease-close");
        RateLimiter a = leasing();
        for (int i = 0; i < 3; i++) {
            assertTrue(a.acquire(key, LIMIT, WINDOW).allowed());
        }
        long leased = a.stats().leasedPermits();
        assertTrue(leased > 3, "leased " + leased);
        try (RateLimiter b = TestSupport.redis().build()) {
            assertEquals(leased, b.peek(key, LIMIT, WINDOW).used());
        }
        a.close();
        a.close(); // idempotent
        // The lease would count for leaseMs + window (70 s); close gave back all but the 3 used.
        assertEquals(LIMIT - 3, takenByAnother(key));
    }
}
