package dev.rl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/**
 * Java-only argument contracts that no row of tests/conformance/invalid.json can express (the
 * table itself runs in {@link ConformanceTest}): a null URL, null setter arguments, Durations no
 * long holds in milliseconds, and every option at a valid non-default value.
 */
class ArgumentsTest {

    private static void rejects(String expectedFragment, Executable call) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, call);
        assertTrue(e.getMessage().contains(expectedFragment),
                "message \"" + e.getMessage() + "\" should contain \"" + expectedFragment + "\"");
    }

    @Test
    void nullsThatOnlyJavaCanPass() {
        rejects("`url`: must not be null", () -> RateLimiter.builder(null));
        try (RateLimiter l = RateLimiter.open("memory://")) {
            rejects("`key`: must not be null", () -> l.redisKey((String) null));
        }
        assertThrows(NullPointerException.class, () -> RateLimiter.builder("memory://").keyPrefix(null));
        assertThrows(NullPointerException.class, () -> RateLimiter.builder("memory://").retryDelay(null));
        assertThrows(NullPointerException.class, () -> RateLimiter.builder("memory://").degradeRtt(null));
    }

    @Test
    void durationsBeyondALongOfMillisecondsNameTheOption() {
        rejects("`requestTimeoutMs`", () -> RateLimiter.builder("memory://").requestTimeout(Duration.ofSeconds(Long.MAX_VALUE)).build());
        rejects("`retryDelayMs`", () -> RateLimiter.builder("memory://").retryDelay(Duration.ofSeconds(Long.MAX_VALUE)).build());
        // Below a millisecond is 0 ms: out of range, not rounded up.
        rejects("`recoverAfterMs`: is 0 ms", () -> RateLimiter.builder("memory://").recoverAfter(Duration.ofNanos(999_999)).build());
    }

    @Test
    void everyOptionAtAValidNonDefaultValue() {
        // A request timeout under the retry delay means no retry, not an error.
        RateLimiter.builder("memory://").requestTimeout(Duration.ofMillis(20)).build().close();
        try (RateLimiter l = RateLimiter.builder(TestSupport.redisUrl())
                .requestTimeout(Duration.ofMillis(20))
                .retryDelay(Duration.ZERO)
                .localFallback(false)
                .degradeRtt(Duration.ofMillis(50))
                .degradeAfter(Duration.ofMillis(200))
                .recoverRtt(Duration.ofMillis(10))
                .recoverAfter(Duration.ofSeconds(1))
                .instances(3)
                .localMaxKeys(100)
                .build()) {
            assertEquals("redis", l.backend());
        }
    }

    @Test
    void optionsFromConfigTextTakeAnySpellingAndNameABadValue() {
        // The three spellings a config file may use, each read by the option's kind.
        try (RateLimiter l = RateLimiter.builder("memory://")
                .option("key-prefix", "gw:")
                .option("lease_ms", "2s")
                .option("localMaxKeys", "100")
                .build()) {
            assertEquals("gw:{k}", l.redisKey("k"));
        }
        rejects("`localFallback`", () -> RateLimiter.builder("memory://").option("local-fallback", "yes").build());
        // Parsed as 1 ms, then refused by the range check (5..=60000 ms), naming the option.
        rejects("`leaseMs`", () -> RateLimiter.builder("memory://").option("lease-ms", "1ms").build());
        rejects("\"lease-time\" is not an option", () -> RateLimiter.builder("memory://").option("lease-time", "1s").build());
        assertThrows(NullPointerException.class, () -> RateLimiter.builder("memory://").option("lease-ms", null));
    }
}
