"""Exactness under concurrency: callers offer 3x the limit on ONE key for 3 windows; the number
admitted in any window (by the decisions' own `now_ms`, which is Redis time) is exactly the
limit, never one more. The limiters run without the local fallback (``STRICT``): these check
Redis's own decisions, which a busy test machine must not send to the fallback (tested on its own
in test_fallback.py)."""

from __future__ import annotations

import asyncio
import bisect
import threading
import time
from typing import List, Tuple

import rl

LIMIT = 200
WINDOW_MS = 400
WINDOWS = 3
STRICT = {"local_fallback": False}


def max_in_any_window(admitted: List[Tuple[int, int]], window_ms: int) -> int:
    """The largest sum of costs in any span (t - window, t] over the admitted (now_ms, cost)."""
    admitted.sort()
    times = [t for t, _ in admitted]
    prefix = [0]
    for _, c in admitted:
        prefix.append(prefix[-1] + c)
    best = 0
    for t in set(times):
        lo = bisect.bisect_right(times, t - window_ms)
        hi = bisect.bisect_right(times, t)
        best = max(best, prefix[hi] - prefix[lo])
    return best


def offered_schedule(callers: int) -> Tuple[int, float]:
    """Per caller: how many requests and the pause between them, so that all callers together
    offer 3x the limit per window for WINDOWS windows."""
    per_caller = -(-3 * LIMIT * WINDOWS // callers)
    interval = WINDOW_MS * WINDOWS / 1000 / per_caller
    return per_caller, interval


def check(admitted: List[Tuple[int, int]], offered: int) -> None:
    assert offered >= 3 * LIMIT * WINDOWS
    assert max_in_any_window(admitted, WINDOW_MS) == LIMIT, (
        f"admitted {len(admitted)} of {offered}; max in a window {max_in_any_window(admitted, WINDOW_MS)}"
    )
    # Not one more, and not starved either: the first window is filled.
    span = max(t for t, _ in admitted) - min(t for t, _ in admitted)
    assert span >= WINDOW_MS, "the run must cover more than one window"


def join_all(threads: List[threading.Thread], timeout_s: float) -> None:
    """Joins every thread within `timeout_s` in all; one still running is a hung call, a failure."""
    deadline = time.monotonic() + timeout_s
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    hung = [t.name for t in threads if t.is_alive()]
    assert not hung, f"threads still running after {timeout_s} s: {hung}"


def test_16_threads_one_key(redis_url: str, key: str) -> None:
    lim = rl.Limiter(redis_url, **STRICT)
    n, interval = offered_schedule(16)
    admitted: List[Tuple[int, int]] = []
    lock = threading.Lock()
    go = threading.Barrier(16)
    failures: List[BaseException] = []

    def worker() -> None:
        mine = []
        try:
            go.wait()
            start = time.monotonic()
            for i in range(n):
                d = lim.acquire(key, LIMIT, WINDOW_MS)
                if d.allowed:
                    mine.append((d.now_ms, 1))
                delay = start + (i + 1) * interval - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
        except BaseException as e:  # surfaced below
            failures.append(e)
        with lock:
            admitted.extend(mine)

    ts = [threading.Thread(target=worker) for _ in range(16)]
    for t in ts:
        t.start()
    join_all(ts, 60)
    assert not failures, failures
    check(admitted, 16 * n)


def test_64_asyncio_tasks_one_key(redis_url: str, key: str) -> None:
    n, interval = offered_schedule(64)

    async def main() -> List[Tuple[int, int]]:
        lim = rl.AsyncLimiter(redis_url, **STRICT)
        admitted: List[Tuple[int, int]] = []
        start = time.monotonic()

        async def task() -> None:
            for i in range(n):
                d = await lim.acquire(key, LIMIT, WINDOW_MS)
                if d.allowed:
                    admitted.append((d.now_ms, 1))
                delay = start + (i + 1) * interval - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)

        await asyncio.gather(*(task() for _ in range(64)))
        return admitted

    check(asyncio.run(main()), 64 * n)


def test_mixed_costs_from_threads_and_tasks_at_once(redis_url: str, key: str) -> None:
    """Sync and async callers sharing one key, costs 1..3: the sum admitted per window is still
    bounded by the limit (it may fall short of it by less than the largest cost)."""
    admitted: List[Tuple[int, int]] = []
    lock = threading.Lock()
    deadline = time.monotonic() + WINDOW_MS * WINDOWS / 1000
    failures: List[BaseException] = []

    def worker(seed: int) -> None:
        try:
            lim = rl.Limiter(redis_url, **STRICT)
            i = seed
            while time.monotonic() < deadline:
                cost = 1 + i % 3
                i += 1
                d = lim.acquire(key, LIMIT, WINDOW_MS, cost)
                if d.allowed:
                    with lock:
                        admitted.append((d.now_ms, cost))
        except BaseException as e:  # surfaced below: a thread's exception does not fail a test
            with lock:
                failures.append(e)

    async def tasks() -> None:
        lim = rl.AsyncLimiter(redis_url, **STRICT)

        async def one(seed: int) -> None:
            i = seed
            while time.monotonic() < deadline:
                cost = 1 + i % 3
                i += 1
                d = await lim.acquire(key, LIMIT, WINDOW_MS, cost)
                if d.allowed:
                    admitted.append((d.now_ms, cost))

        await asyncio.gather(*(one(s) for s in range(16)))

    ts = [threading.Thread(target=worker, args=(s,)) for s in range(4)]
    for t in ts:
        t.start()
    asyncio.run(tasks())
    join_all(ts, 30)
    assert not failures, failures
    worst = max_in_any_window(admitted, WINDOW_MS)
    assert LIMIT - 2 <= worst <= LIMIT, worst
