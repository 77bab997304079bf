package dev.rl;

import java.lang.ref.Cleaner;
import java.util.List;

/**
 * A middleware's policies and header style, checked by the core once, for
 * {@link RateLimiter#acquirePolicies}: then a request is one native call that decides and renders
 * its response, instead of {@code acquireAll} and {@link RateLimitHeaders#render} (two calls, the
 * second converting the policies and the decision again). Python's {@code rl.prepare_policies}
 * and Node's {@code preparePolicies}. Immutable and thread-safe; its native part is freed when it
 * is no longer reachable.
 */
public final class PreparedPolicies {
    private static final Cleaner CLEANER = Cleaner.create();

    private final List<Policy> policies;
    private final HeaderStyle style;
    /** The native policies; read only while this object is reachable (see {@link RateLimiter}). */
    final long handle;
    /** How many policies; a request's answer has this many decisions. */
    final int size;
    /**
     * Bytes a request's answer text usually fits in (the fields; a denial's body may not, and
     * then native code makes a bigger array).
     */
    final int textCapacity;

    private PreparedPolicies(List<Policy> policies, HeaderStyle style, long handle) {
        this.policies = policies;
        this.style = style;
        this.handle = handle;
        this.size = policies.size();
        this.textCapacity = 128 + 96 * size;
    }

    /**
     * {@code policies} (at least one, distinct names) with the fields of {@code style}. Bad input
     * throws {@link IllegalArgumentException} naming {@code policies} or {@code style}.
     */
    public static PreparedPolicies of(List<Policy> policies, HeaderStyle style) {
        RateLimitHeaders.PolicyArrays a = RateLimitHeaders.PolicyArrays.of(policies);
        long handle = Native.preparePolicies(a.names(), a.limits(), a.windows(), style == null ? null : style.wireName());
        PreparedPolicies prepared = new PreparedPolicies(List.copyOf(policies), style, handle);
        CLEANER.register(prepared, () -> Native.freePolicies(handle));
        return prepared;
    }

    /** {@link #of(List, HeaderStyle)} for a policy string ({@link Policy#parseAll}). */
    public static PreparedPolicies of(String policies, HeaderStyle style) {
        return of(Policy.parseAll(policies), style);
    }

    /** The policies, in order: rule i of a call is policy i on the call's key. */
    public List<Policy> policies() {
        return policies;
    }

    /** The fields the responses carry. */
    public HeaderStyle style() {
        return style;
    }

    @Override
    public String toString() {
        return "PreparedPolicies" + policies + " " + style;
    }
}
