package dev.rl.gateway;

import java.net.InetSocketAddress;
import org.springframework.cloud.gateway.filter.ratelimit.KeyResolver;
import org.springframework.web.server.ServerWebExchange;
import reactor.core.publisher.Mono;

/**
 * The client's address as the key ({@code ip:<address>}). With a trusted proxy header configured
 * ({@code rl.trusted-proxy-header}, e.g. {@code X-Forwarded-For}), its last entry (the one that
 * proxy appended; earlier ones came from the client and may be forged); otherwise the header is
 * ignored, as any client can send it.
 */
public class RlKeyResolver implements KeyResolver {
    private final String trustedProxyHeader;

    public RlKeyResolver(String trustedProxyHeader) {
        this.trustedProxyHeader = trustedProxyHeader == null || trustedProxyHeader.isBlank() ? null : trustedProxyHeader;
    }

    @Override
    public Mono<String> resolve(ServerWebExchange exchange) {
        if (trustedProxyHeader != null) {
            String v = exchange.getRequest().getHeaders().getFirst(trustedProxyHeader);
            if (v != null) {
                int comma = v.lastIndexOf(',');
                String last = (comma < 0 ? v : v.substring(comma + 1)).trim();
                if (!last.isEmpty()) {
                    return Mono.just("ip:" + last);
                }
            }
        }
        InetSocketAddress a = exchange.getRequest().getRemoteAddress();
        if (a == null) {
            return Mono.empty();
        }
        return Mono.just("ip:" + (a.getAddress() != null ? a.getAddress().getHostAddress() : a.getHostString()));
    }
}
