package dev.rl.servlet;

import jakarta.servlet.http.HttpServletRequest;
import java.security.Principal;
import java.util.function.Function;

/**
 * Key functions for {@link RateLimitFilter}: who a request counts against. Each key is prefixed by
 * what it is ({@code ip:}, {@code user:}, {@code route:}) so that kinds never share a window.
 */
public final class Keys {
    private Keys() {}

    /**
     * The client's address as the connection shows it ({@code getRemoteAddr()}). Forwarding
     * headers are ignored: any client can send them.
     */
    public static Function<HttpServletRequest, String> clientIp() {
        return r -> "ip:" + r.getRemoteAddr();
    }

    /**
     * The client's address behind one trusted proxy that appends to {@code header} (such as
     * {@code X-Forwarded-For}): the header's last entry, the one that proxy wrote (earlier entries
     * came from the client and may be forged). Without the header, the connection's address. Use
     * it only when every request reaches the application through such a proxy.
     */
    public static Function<HttpServletRequest, String> clientIp(String trustedProxyHeader) {
        if (trustedProxyHeader == null || trustedProxyHeader.isBlank()) {
            return clientIp();
        }
        return r -> {
            String v = r.getHeader(trustedProxyHeader);
            if (v != null) {
                int comma = v.lastIndexOf(',');
                String last = (comma < 0 ? v : v.substring(comma + 1)).trim();
                if (!last.isEmpty()) {
                    return "ip:" + last;
                }
            }
            return "ip:" + r.getRemoteAddr();
        };
    }

    /** The authenticated user ({@code getUserPrincipal()}), else {@code fallback}'s key. */
    public static Function<HttpServletRequest, String> user(Function<HttpServletRequest, String> fallback) {
        return r -> {
            Principal p = r.getUserPrincipal();
            return p != null ? "user:" + p.getName() : fallback.apply(r);
        };
    }

    /** {@code base}'s key within the request's path: separate windows per route. */
    public static Function<HttpServletRequest, String> perRoute(Function<HttpServletRequest, String> base) {
        return r -> "route:" + r.getRequestURI() + "|" + base.apply(r);
    }
}
