package dev.rl.gateway;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import io.netty.channel.DefaultEventLoop;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import reactor.core.publisher.Mono;

/** Where the gateway's chain continues after a decision (see {@link EventLoopCompletion}). */
class EventLoopCompletionTest {

    @Test
    void aDecisionCompletedOnAnotherThreadContinuesOnTheCallersEventLoop() throws Exception {
        DefaultEventLoop loop = new DefaultEventLoop();
        try {
            Thread loopThread = loop.submit(Thread::currentThread).get(5, TimeUnit.SECONDS);
            CompletableFuture<String> decision = new CompletableFuture<>();
            Mono<String> m = loop.submit(() -> EventLoopCompletion.onCallersLoop(decision)).get(5, TimeUnit.SECONDS);
            AtomicReference<Thread> continuedOn = new AtomicReference<>();
            CompletableFuture<String> out = m.doOnNext(v -> continuedOn.set(Thread.currentThread())).toFuture();
            Thread completer = new Thread(() -> decision.complete("d"), "not-the-loop");
            completer.start();
            completer.join();
            assertEquals("d", out.get(5, TimeUnit.SECONDS));
            assertSame(loopThread, continuedOn.get());
        } finally {
            loop.shutdownGracefully(0, 1, TimeUnit.SECONDS).await(5, TimeUnit.SECONDS);
        }
    }

    @Test
    void aDecisionAlreadyMadeContinuesInPlace() throws Exception {
        DefaultEventLoop loop = new DefaultEventLoop();
        try {
            Thread loopThread = loop.submit(Thread::currentThread).get(5, TimeUnit.SECONDS);
            Thread here = loop.submit(() -> {
                AtomicReference<Thread> t = new AtomicReference<>();
                EventLoopCompletion.onCallersLoop(CompletableFuture.completedFuture("d"))
                        .doOnNext(v -> t.set(Thread.currentThread())).subscribe();
                return t.get();
            }).get(5, TimeUnit.SECONDS);
            assertSame(loopThread, here);
        } finally {
            loop.shutdownGracefully(0, 1, TimeUnit.SECONDS).await(5, TimeUnit.SECONDS);
        }
    }

    @Test
    void aCallerOffAnyEventLoopContinuesOnTheCompletingThread() throws Exception {
        CompletableFuture<String> decision = new CompletableFuture<>();
        AtomicReference<Thread> continuedOn = new AtomicReference<>();
        CompletableFuture<String> out = EventLoopCompletion.onCallersLoop(decision)
                .doOnNext(v -> continuedOn.set(Thread.currentThread())).toFuture();
        Thread completer = new Thread(() -> decision.complete("d"), "completer");
        completer.start();
        completer.join();
        assertEquals("d", out.get(5, TimeUnit.SECONDS));
        assertSame(completer, continuedOn.get());
    }
}
