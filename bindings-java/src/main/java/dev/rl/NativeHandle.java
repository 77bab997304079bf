package dev.rl;

import java.util.concurrent.atomic.AtomicLong;

/**
 * Owns one native limiter and makes its lifetime safe under concurrency: calls {@link #enter()}
 * before using the handle and {@link #exit()} after; {@link #close()} stops new calls at once, and
 * the native memory is freed exactly once, by whichever of {@code close()} or the last in-flight
 * call's {@code exit()} comes last. So a close racing with calls can neither free twice nor free
 * memory a call is still using, and {@code close()} never blocks.
 *
 * <p>State, one atomic word: bit 0 = closed, the rest = calls in flight times 2; {@code FREED}
 * once the native side is gone.
 */
final class NativeHandle implements Runnable {
    private static final long CLOSED = 1;
    private static final long FREED = -1;

    private final long handle;
    private final AtomicLong state = new AtomicLong();

    NativeHandle(long handle) {
        this.handle = handle;
    }

    /** The native handle, counted as in flight; throws if closed. Pair with {@link #exit()}. */
    long enter() {
        for (;;) {
            long s = state.get();
            if ((s & CLOSED) != 0) {
                throw new IllegalStateException("the RateLimiter is closed");
            }
            if (state.compareAndSet(s, s + 2)) {
                return handle;
            }
        }
    }

    void exit() {
        if (state.addAndGet(-2) == CLOSED) {
            free();
        }
    }

    boolean isClosed() {
        return (state.get() & CLOSED) != 0;
    }

    /** Idempotent; frees now if nothing is in flight, else when the last call leaves. */
    void close() {
        for (;;) {
            long s = state.get();
            if ((s & CLOSED) != 0) {
                return;
            }
            if (state.compareAndSet(s, s | CLOSED)) {
                break;
            }
        }
        if (state.get() == CLOSED) {
            free();
        }
    }

    private void free() {
        if (state.compareAndSet(CLOSED, FREED)) {
            Native.close(handle);
        }
    }

    /** The {@link java.lang.ref.Cleaner} action for a limiter dropped without {@code close()}. */
    @Override
    public void run() {
        close();
    }
}
