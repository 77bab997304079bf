"""Leases through the binding: decisions in mode "lease" with the lease stats, and close() (sync,
asyncio aclose() and `async with`) returning unused leases at once, long before they would age
out (lease_ms + window)."""

from __future__ import annotations

import asyncio

import rl

LIMIT, WINDOW, LEASE_MS = 100, 60_000, 10_000


def test_lease_mode_and_lease_stats(redis_url: str, key: str) -> None:
    with rl.Limiter(redis_url, leases="on", lease_ms=LEASE_MS) as a:
        modes = [a.acquire(key, LIMIT, WINDOW).mode for _ in range(5)]
        assert modes.count("lease") >= 4, modes
        s = a.stats()
        assert s.decisions_lease >= 4 and s.leases_taken == 1, s
        assert s.leased_permits >= 5 and s.lease_refunds == 0, s


def _taken_by_another(redis_url: str, key: str) -> int:
    """How many single permits a plain limiter can take now."""
    with rl.Limiter(redis_url) as b:
        got = 0
        while b.acquire(key, LIMIT, WINDOW).allowed:
            got += 1
        return got


def test_close_returns_unused_leases(redis_url: str, key: str) -> None:
    a = rl.Limiter(redis_url, leases="on", lease_ms=LEASE_MS)
    for _ in range(3):
        assert a.acquire(key, LIMIT, WINDOW).mode in ("lease", "normal")
    leased = a.stats().leased_permits
    assert leased > 3
    with rl.Limiter(redis_url) as b:
        assert b.peek(key, LIMIT, WINDOW).used == leased
    a.close()
    # The lease would count for lease_ms + window (70 s); close gave back all but the 3 used.
    assert _taken_by_another(redis_url, key) == LIMIT - 3


def test_async_aclose_and_async_with_return_unused_leases(redis_url: str, key: str) -> None:
    async def main() -> None:
        a = rl.AsyncLimiter(redis_url, leases="on", lease_ms=LEASE_MS)
        for _ in range(3):
            assert (await a.acquire(key + ":a", LIMIT, WINDOW)).allowed
        assert a.stats().leased_permits > 3
        await a.aclose()
        assert a.closed
        await a.aclose()  # twice is fine
        async with rl.AsyncLimiter(redis_url, leases="on", lease_ms=LEASE_MS) as c:
            d = [await c.acquire(key + ":b", LIMIT, WINDOW) for _ in range(2)]
            assert d[1].mode == "lease", d
        assert c.closed

    asyncio.run(main())
    assert _taken_by_another(redis_url, key + ":a") == LIMIT - 3
    assert _taken_by_another(redis_url, key + ":b") == LIMIT - 2
