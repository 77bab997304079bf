package dev.rl.servlet;

import dev.rl.CompositeDecision;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;

/**
 * Called for a denied request, after the rate-limit headers (with {@code Retry-After}) are set and
 * before the default 429 is written.
 */
@FunctionalInterface
public interface DeniedHandler {
    /**
     * Returns true if it wrote the response itself (the filter then writes nothing), false to let
     * the filter write its 429 with the core's problem body.
     */
    boolean denied(HttpServletRequest request, HttpServletResponse response, CompositeDecision decision)
            throws IOException;
}
