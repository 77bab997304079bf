"""A panic inside the native module never hangs or escapes as a bare BaseException: sync calls
raise ``rl.NativePanicError`` (an ``rl.RateLimitError``), asyncio calls end with it instead of
staying pending, and the limiter keeps working. The panics come from the test-panic hook
(core/src/unwind.rs), compiled in only by test.sh's ``--features test-panic``."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Optional

import pytest

import rl

CALLER = "rl-test-panic:caller"  # panics on the calling thread, in the native method
FUTURE = "rl-test-panic:future"  # panics inside the call's future, on rl's runtime
TIMEOUT_S = 10.0  # a call left pending fails the test here instead of hanging it


def raised(call: Callable[[], Any]) -> BaseException:
    try:
        call()
    except BaseException as e:  # noqa: B036 - the point is to see what escapes, BaseException included
        return e
    pytest.fail("no panic: is the wheel built with --features test-panic (bindings-python/test.sh)?")


async def araised(call: Callable[[], Awaitable[Any]]) -> BaseException:
    try:
        await asyncio.wait_for(call(), TIMEOUT_S)
    except asyncio.TimeoutError:
        pytest.fail(f"the call was still pending after {TIMEOUT_S} s (a panic left its future unresolved)")
    except BaseException as e:  # noqa: B036
        return e
    pytest.fail("no panic: is the wheel built with --features test-panic (bindings-python/test.sh)?")


def assert_panic_error(e: Optional[BaseException]) -> None:
    assert type(e).__name__ == "NativePanicError" and isinstance(e, rl.RateLimitError), repr(e)
    assert isinstance(e, rl.NativePanicError)
    assert str(e).startswith("panic in the rl native library") and "test-panic hook" in str(e), str(e)


def test_sync_constructor_panic_raises() -> None:
    assert_panic_error(raised(lambda: rl.Limiter(key_prefix=CALLER)))
    assert rl.Limiter().acquire("k", 1, 1000).allowed


@pytest.mark.parametrize("backend", ["memory", "redis"])
def test_sync_call_panic_raises_and_the_limiter_keeps_working(backend: str, redis_url: str, key: str) -> None:
    lim = rl.Limiter(None if backend == "memory" else redis_url)
    assert_panic_error(raised(lambda: lim.acquire(CALLER, 5, 60_000)))
    assert_panic_error(raised(lambda: lim.peek(CALLER, 5, 60_000)))
    assert_panic_error(raised(lambda: lim.reset(CALLER)))
    assert lim.acquire(key, 5, 60_000).allowed


@pytest.mark.parametrize("marker", [CALLER, FUTURE])
def test_async_panic_raises_instead_of_hanging(marker: str, redis_url: str, key: str) -> None:
    async def main() -> None:
        lim = rl.AsyncLimiter(redis_url)
        assert_panic_error(await araised(lambda: lim.acquire(marker, 5, 60_000)))
        assert_panic_error(await araised(lambda: lim.peek(marker, 5, 60_000)))
        assert_panic_error(await araised(lambda: lim.reset(marker)))
        d = await asyncio.wait_for(lim.acquire(key, 5, 60_000), TIMEOUT_S)
        assert d.allowed and d.mode == "normal"

    asyncio.run(main())


def test_async_memory_panic_raises() -> None:
    async def main() -> None:
        lim = rl.AsyncLimiter()
        assert_panic_error(await araised(lambda: lim.acquire(CALLER, 5, 60_000)))
        assert (await lim.acquire("k", 5, 60_000)).allowed

    asyncio.run(main())
