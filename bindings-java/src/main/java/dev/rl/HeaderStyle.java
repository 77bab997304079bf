package dev.rl;

/** Which rate-limit response fields {@link RateLimitHeaders#render} writes (the core's styles). */
public enum HeaderStyle {
    /** {@code RateLimit-Policy} and {@code RateLimit} (draft-ietf-httpapi-ratelimit-headers). */
    IETF("ietf"),
    /** {@code X-RateLimit-Limit}, {@code -Remaining}, {@code -Reset} for the policy closest to denying. */
    LEGACY("legacy"),
    /** Both sets. */
    BOTH("both"),
    /** No rate-limit fields (a denial still gets {@code Retry-After}). */
    NONE("none");

    private final String wireName;

    HeaderStyle(String wireName) {
        this.wireName = wireName;
    }

    /** The core's name of this style. */
    String wireName() {
        return wireName;
    }
}
