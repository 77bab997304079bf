package dev.rl.gateway;

import io.netty.util.internal.ThreadExecutorMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Executor;
import reactor.core.publisher.Mono;

/**
 * Continues after a decision on the Netty event loop that asked for it. rl completes an async
 * call's future on its runtime thread, and SCG's filter chain goes on in whatever thread completes
 * the decision: left there, the rest of the request (the proxied call, the response) runs on rl's
 * runtime, between other decisions' Redis I/O, and Reactor Netty, which keeps a request's
 * connections on the event loop it runs on ({@code colocate}), hands each step back to a loop.
 * Back on the caller's loop, the request stays where Netty put it (measured with JFR in
 * bindings-java/bench/http: gateway frames such as {@code PooledConnectionProvider.acquire} ran
 * on {@code rl-runtime} before). {@link ThreadExecutorMap} is how Netty itself finds the loop of
 * the running thread. A decision already made (memory backend) and a caller that is not on an
 * event loop continue in place.
 */
final class EventLoopCompletion {
    private EventLoopCompletion() {}

    static <T> Mono<T> onCallersLoop(CompletableFuture<T> future) {
        Executor loop = future.isDone() ? null : ThreadExecutorMap.currentExecutor();
        if (loop == null) {
            return Mono.fromFuture(future);
        }
        return Mono.fromFuture(future.whenCompleteAsync((value, error) -> {}, loop));
    }
}
