"""The keyword options come from the core's option table: every name in ``rl.OPTIONS`` is a
keyword of both classes and a key of ``rl.LimiterOptions``; ``client_clock`` (new to Python)
works; ``backend`` reads ``"closed"`` after ``close()``, as in the Node binding."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

import rl


def test_options_tuple_is_the_typed_dict() -> None:
    assert list(rl.OPTIONS) == list(rl.LimiterOptions.__annotations__)
    assert "client_clock" in rl.OPTIONS and len(set(rl.OPTIONS)) == len(rl.OPTIONS)


@pytest.mark.parametrize("cls", [rl.Limiter, rl.AsyncLimiter], ids=["sync", "async"])
def test_every_option_is_a_keyword_and_none_is_its_default(cls: Any) -> None:
    for name in rl.OPTIONS:
        cls(**{name: None}).close()
    cls(**{name: None for name in rl.OPTIONS}).close()


def test_modes_are_the_cores() -> None:
    assert rl.MODES == ("normal", "memory", "local", "lease")
    assert rl.Limiter().acquire("k", 1, 1000).mode in rl.MODES


def test_client_clock_decides_on_this_hosts_clock(redis_url: str, key: str) -> None:
    lim = rl.Limiter(redis_url, client_clock=True, max_clock_skew_ms=5_000)
    before = int(time.time() * 1000)
    d = lim.acquire(key, 2, 10_000)
    after = int(time.time() * 1000)
    assert d.allowed and d.mode == "normal" and before <= d.now_ms <= after, (before, d, after)
    assert lim.acquire(key, 2, 10_000).used == 2
    assert not lim.acquire(key, 2, 10_000).allowed
    lim.close()

    async def main() -> rl.Decision:
        async with rl.AsyncLimiter(redis_url, client_clock=True) as alim:
            return await alim.peek(key, 2, 10_000)

    assert asyncio.run(main()).used == 2


def test_backend_after_close_reads_closed(redis_url: str) -> None:
    for lim in (rl.Limiter(), rl.Limiter(redis_url), rl.AsyncLimiter(), rl.AsyncLimiter(redis_url)):
        assert lim.backend in ("memory", "redis")
        lim.close()
        assert lim.backend == "closed"


def test_unknown_option_is_the_cores_error() -> None:
    with pytest.raises(rl.InvalidArgument) as info:
        rl.Limiter(retry_delay=5)  # type: ignore[call-arg]
    assert type(info.value) is rl.InvalidArgument and info.value.argument == "options"
    assert '"retry_delay" is not an option' in str(info.value) and "retry_delay_ms" in str(info.value)
