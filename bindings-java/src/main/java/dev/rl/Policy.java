package dev.rl;

import java.util.ArrayList;
import java.util.List;

/**
 * One named limit, as written in a policy string ({@code "burst: 100/s; 5000 per hour"}): what
 * the {@code RateLimit-Policy} / {@code RateLimit} headers and the problem body call it. Parsed
 * and checked by the core, so every language reads a policy string the same way.
 *
 * @param name     the policy's name (its canonical text, e.g. {@code 100/1s}, when unnamed)
 * @param limit    permits allowed in any window span
 * @param windowMs the window, in milliseconds
 */
public record Policy(String name, long limit, long windowMs) {

    /**
     * Every policy of {@code text}, in order: {@code [name ":"] count ("/" | "per") [n] unit},
     * separated by {@code ;}, {@code ,} or {@code |}. Throws {@link IllegalArgumentException}
     * naming {@code policy} and the bad text.
     */
    public static List<Policy> parseAll(String text) {
        Object[] parts = Native.parsePolicies(text);
        String[] names = (String[]) parts[0];
        long[] limits = (long[]) parts[1];
        long[] windows = (long[]) parts[2];
        List<Policy> out = new ArrayList<>(names.length);
        for (int i = 0; i < names.length; i++) {
            out.add(new Policy(names[i], limits[i], windows[i]));
        }
        return List.copyOf(out);
    }

    /** A policy from its parts, checked by the core; a null {@code name} gives the canonical text. */
    public static Policy of(String name, long limit, long windowMs) {
        return new Policy(Native.policyName(name, limit, windowMs), limit, windowMs);
    }

    /** The rule this policy sets on {@code key}, asking {@code cost}. */
    public Rule on(String key, long cost) {
        return new Rule(key, limit, windowMs, cost);
    }
}
