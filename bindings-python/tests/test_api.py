"""The API's shape: Decision, options, close and context managers, keys, both backends."""

from __future__ import annotations

import asyncio
import pickle

import pytest

import rl


def test_package_surface() -> None:
    for name in rl.__all__:
        assert hasattr(rl, name), name
    assert rl.Limiter.__module__ == "rl" and rl.Decision.__module__ == "rl"
    assert rl.MAX_WINDOW_MS == 30 * 24 * 3600 * 1000
    assert isinstance(rl.__version__, str)


def test_memory_backend_by_default() -> None:
    lim = rl.Limiter()
    assert lim.backend == "memory"
    d = [lim.acquire("k", 3, 60_000) for _ in range(4)]
    assert [x.allowed for x in d] == [True, True, True, False]
    assert d[2].remaining == 0 and d[2].used == 3 and d[2].mode == "memory"
    assert d[3].retry_after_ms > 0


def test_decision_attributes_and_repr(redis_url: str, key: str) -> None:
    lim = rl.Limiter(redis_url)
    d = lim.acquire(key, 5, 10_000, cost=2)
    assert (d.allowed, d.remaining, d.used, d.retry_after_ms, d.mode) == (True, 3, 2, 0, "normal")
    assert 0 < d.reset_after_ms <= 10_000
    assert d.now_ms > 1_600_000_000_000
    r = repr(d)
    assert r.startswith("Decision(allowed=True, remaining=3, used=2, retry_after_ms=0, ") and "mode='normal'" in r
    for t, attr in [(bool, "allowed"), (int, "remaining"), (int, "used"), (int, "retry_after_ms"), (int, "reset_after_ms"), (str, "mode"), (int, "now_ms")]:
        assert type(getattr(d, attr)) is t, attr


def test_decision_is_immutable_hashable_picklable() -> None:
    d = rl.Decision(True, 4, 1, 0, 1000, "normal", 123)
    with pytest.raises(AttributeError):
        d.allowed = False  # type: ignore[misc]
    assert d == rl.Decision(True, 4, 1, 0, 1000, "normal", 123) and d != rl.Decision(False, 4, 1, 0, 1000, "normal", 123)
    assert len({d, rl.Decision(True, 4, 1, 0, 1000, "normal", 123)}) == 1
    assert pickle.loads(pickle.dumps(d)) == d
    assert rl.Decision.__match_args__[:3] == ("allowed", "remaining", "used")


def test_peek_and_reset(redis_url: str, key: str) -> None:
    lim = rl.Limiter(redis_url)
    assert lim.peek(key, 2, 10_000).used == 0
    lim.acquire(key, 2, 10_000)
    lim.acquire(key, 2, 10_000)
    p = lim.peek(key, 2, 10_000)
    assert not p.allowed and p.used == 2 and p.retry_after_ms > 0
    assert lim.peek(key, 2, 10_000).used == 2, "peek takes nothing"
    assert lim.reset(key) is None
    assert lim.acquire(key, 2, 10_000).used == 1


def test_str_and_bytes_keys_are_the_same_key(redis_url: str, key: str) -> None:
    lim = rl.Limiter(redis_url)
    lim.acquire(key, 10, 10_000)
    assert lim.acquire(key.encode(), 10, 10_000).used == 2
    assert lim.redis_key(key) == b"rl:{" + key.encode() + b"}"
    # Non-UTF-8 bytes are fine as keys; braces are escaped into the hash tag.
    assert lim.acquire(b"\xff\x00{x}", 1, 10_000).allowed
    assert lim.redis_key("a{b}") == b"rl:{a%7Bb%7D}"


def test_key_prefix_option(redis_url: str, redis_port: int, key: str) -> None:
    from conftest import resp

    lim = rl.Limiter(redis_url, key_prefix="app1:")
    lim.acquire(key, 10, 10_000)
    assert resp(redis_port, "EXISTS", b"app1:{" + key.encode() + b"}") == 1


def test_options_are_validated_by_type_and_by_the_core() -> None:
    with pytest.raises(rl.InvalidArgument, match="url"):
        rl.Limiter("http://example")
    with pytest.raises(rl.InvalidArgumentType, match="url"):
        rl.Limiter(6379)  # type: ignore[arg-type]
    with pytest.raises(rl.InvalidArgument, match="key_prefix"):
        rl.Limiter(key_prefix="a{b}")
    with pytest.raises(rl.InvalidArgumentType, match="key_prefix"):
        rl.Limiter(key_prefix=b"rl:")  # type: ignore[arg-type]
    with pytest.raises(rl.InvalidArgument, match="request_timeout"):
        rl.Limiter(request_timeout_ms=0)
    with pytest.raises(rl.InvalidArgument, match="connect_timeout"):
        rl.Limiter(connect_timeout_ms=3_600_000)
    with pytest.raises(rl.InvalidArgumentType, match="request_timeout_ms"):
        rl.Limiter(request_timeout_ms=0.5)  # type: ignore[arg-type]
    with pytest.raises(rl.InvalidArgument, match="max_clock_skew_ms"):
        rl.AsyncLimiter(max_clock_skew_ms=-1)
    with pytest.raises(TypeError):
        rl.Limiter("redis://127.0.0.1:1/", 500)  # type: ignore[misc]  # options are keyword-only
    lim = rl.Limiter("redis://u:secret@127.0.0.1:1/")
    assert "secret" not in repr(lim) and "***" in repr(lim)


def test_close_then_calls_raise_and_close_twice_is_fine(redis_url: str, key: str) -> None:
    lim = rl.Limiter(redis_url)
    lim.acquire(key, 10, 1000)
    assert not lim.closed
    lim.close()
    lim.close()
    assert lim.closed and "closed" in repr(lim)
    for call in (lambda: lim.acquire(key, 10, 1000), lambda: lim.peek(key, 10, 1000), lambda: lim.reset(key), lim.ping):
        with pytest.raises(rl.LimiterClosed):
            call()
    assert issubclass(rl.LimiterClosed, RuntimeError) and issubclass(rl.LimiterClosed, rl.RateLimitError)
    with pytest.raises(rl.LimiterClosed):
        with lim:
            pass


def test_context_managers(redis_url: str, key: str) -> None:
    with rl.Limiter(redis_url) as lim:
        assert lim.acquire(key, 10, 1000).allowed
    assert lim.closed

    async def main() -> rl.AsyncLimiter:
        async with rl.AsyncLimiter(redis_url) as alim:
            assert (await alim.acquire(key, 10, 1000)).used == 2
        assert alim.closed
        with pytest.raises(rl.LimiterClosed):
            await alim.acquire(key, 10, 1000)
        with pytest.raises(rl.LimiterClosed):
            async with alim:
                pass
        await alim.aclose()
        return alim

    asyncio.run(main())


def test_async_api(redis_url: str, key: str) -> None:
    async def main() -> None:
        lim = rl.AsyncLimiter(redis_url)
        assert lim.backend == "redis"
        await lim.ping()
        d = await lim.acquire(key, 3, 10_000, cost=3)
        assert d.allowed and d.remaining == 0 and d.mode == "normal"
        assert not (await lim.acquire(key, 3, 10_000)).allowed
        assert (await lim.peek(key, 3, 10_000)).used == 3
        await lim.reset(key)
        assert (await lim.peek(key, 3, 10_000)).used == 0
        # Works with create_task / gather / wait_for like any coroutine.
        t = asyncio.create_task(lim.acquire(key, 3, 10_000))
        got = await asyncio.gather(t, lim.acquire(key, 3, 10_000), asyncio.wait_for(lim.acquire(key, 3, 10_000), 5))
        assert sorted(x.used for x in got) == [1, 2, 3]
        assert lim.redis_key(key) == b"rl:{" + key.encode() + b"}"
        assert "AsyncLimiter" in repr(lim)
        lim.close()

    asyncio.run(main())


def test_async_memory_backend() -> None:
    async def main() -> None:
        lim = rl.AsyncLimiter()
        assert lim.backend == "memory"
        res = await asyncio.gather(*(lim.acquire("k", 10, 60_000) for _ in range(15)))
        assert sum(d.allowed for d in res) == 10
        await lim.reset("k")
        assert (await lim.peek("k", 10, 60_000)).used == 0
        with pytest.raises(rl.InvalidArgument):
            await lim.acquire("k", 10, 60_000, cost=11)

    asyncio.run(main())


def test_one_async_limiter_on_several_loops_and_threads(redis_url: str, key: str) -> None:
    import threading

    lim = rl.AsyncLimiter(redis_url)

    async def take(n: int) -> int:
        return sum([(await lim.acquire(key, 1000, 60_000)).allowed for _ in range(n)])

    assert asyncio.run(take(5)) == 5
    assert asyncio.run(take(5)) == 5  # a new loop: a new bridge
    results: list[int] = []
    ts = [threading.Thread(target=lambda: results.append(asyncio.run(take(20)))) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert results == [20] * 4
    assert rl.Limiter(redis_url).peek(key, 1000, 60_000).used == 90


def test_async_call_outside_a_loop_is_a_clear_error(redis_url: str) -> None:
    lim = rl.AsyncLimiter(redis_url)
    coro = lim.acquire("k", 1, 1000)
    with pytest.raises(RuntimeError):
        coro.send(None)
    coro.close()


def test_cancelled_await_does_not_break_the_limiter(redis_url: str, key: str) -> None:
    async def main() -> None:
        lim = rl.AsyncLimiter(redis_url)
        tasks = [asyncio.create_task(lim.acquire(key, 1000, 60_000)) for _ in range(50)]
        await asyncio.sleep(0)
        for t in tasks[::2]:
            t.cancel()
        done = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(x, (rl.Decision, asyncio.CancelledError)) for x in done)
        assert (await lim.acquire(key, 1000, 60_000)).allowed

    asyncio.run(main())


def test_sync_limiter_is_thread_safe_and_releases_the_gil(server: object) -> None:
    """While one thread waits on a frozen Redis, other Python threads keep running."""
    import threading
    import time

    srv = server  # conftest.Server
    lim = rl.Limiter(srv.url, request_timeout_ms=1000, local_fallback=False)  # type: ignore[attr-defined]
    lim.ping()
    srv.freeze()  # type: ignore[attr-defined]
    try:
        errors: list[BaseException] = []
        t = threading.Thread(target=lambda: errors.append(pytest.raises(rl.BackendUnavailable, lim.acquire, "gil", 1, 1000).value))
        t.start()
        counted, start = 0, time.monotonic()
        while time.monotonic() - start < 0.5:
            counted += 1
        t.join(5)
    finally:
        srv.thaw()  # type: ignore[attr-defined]
    assert errors and isinstance(errors[0], rl.BackendUnavailable)
    assert counted > 100_000, "the main thread was starved: the GIL was held while waiting"


def test_closed_loops_with_calls_in_flight_are_released(server: object) -> None:
    """asyncio.run() that ends with calls still waiting on Redis (frozen here) must not keep its
    loop, bridge and pipe forever."""
    import gc
    import os
    import weakref

    srv = server
    lim = rl.AsyncLimiter(srv.url, request_timeout_ms=200)  # type: ignore[attr-defined]
    loops: list[weakref.ReferenceType[asyncio.AbstractEventLoop]] = []

    async def leave_calls_behind() -> None:
        loops.append(weakref.ref(asyncio.get_running_loop()))
        for _ in range(5):
            asyncio.ensure_future(lim.acquire("left", 10, 1000))
        await asyncio.sleep(0.01)  # submitted, not answered

    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    asyncio.run(lim.ping())
    srv.freeze()  # type: ignore[attr-defined]
    try:
        before = fds()
        for _ in range(20):
            asyncio.run(leave_calls_behind())
        asyncio.run(asyncio.sleep(0.3))  # the calls time out meanwhile; this run sweeps
    finally:
        srv.thaw()  # type: ignore[attr-defined]
    asyncio.run(lim.ping())
    gc.collect()
    alive = sum(r() is not None for r in loops)
    assert alive <= 1, f"{alive} closed loops still alive"
    assert fds() - before < 10, f"fds grew from {before} to {fds()}"
