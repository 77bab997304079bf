package dev.rl.gateway;

import java.nio.charset.StandardCharsets;
import org.springframework.cloud.gateway.filter.GatewayFilterChain;
import org.springframework.cloud.gateway.filter.GlobalFilter;
import org.springframework.core.Ordered;
import org.springframework.http.HttpStatus;
import org.springframework.http.server.reactive.ServerHttpResponseDecorator;
import org.springframework.web.server.ServerWebExchange;
import reactor.core.publisher.Mono;
import reactor.util.context.Context;

/**
 * Gives rl's 429s the core's {@code application/problem+json} body. SCG's RequestRateLimiter
 * filter answers a denial with an empty body and its RateLimiter never sees the exchange, so this
 * filter hands {@link RlRateLimiter} a slot through the Reactor context; a denial fills it, and the
 * response's completion writes it. Responses rl did not deny pass untouched.
 */
public class RlProblemBodyFilter implements GlobalFilter, Ordered {

    /** The problem body of this exchange's denial, if rl denied it. */
    static final class Slot {
        volatile String body;
        volatile String contentType;
    }

    @Override
    public Mono<Void> filter(ServerWebExchange exchange, GatewayFilterChain chain) {
        Slot slot = new Slot();
        ServerHttpResponseDecorator response = new ServerHttpResponseDecorator(exchange.getResponse()) {
            @Override
            public Mono<Void> setComplete() {
                String body = slot.body;
                if (body == null || !HttpStatus.TOO_MANY_REQUESTS.equals(getStatusCode())) {
                    return super.setComplete();
                }
                byte[] bytes = body.getBytes(StandardCharsets.UTF_8);
                getHeaders().set("Content-Type", slot.contentType);
                getHeaders().setContentLength(bytes.length);
                return writeWith(Mono.just(bufferFactory().wrap(bytes)));
            }
        };
        return chain.filter(exchange.mutate().response(response).build())
                .contextWrite(Context.of(Slot.class, slot));
    }

    @Override
    public int getOrder() {
        return Ordered.HIGHEST_PRECEDENCE;
    }
}
