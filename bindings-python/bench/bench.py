"""rl vs `limits` (MovingWindowRateLimiter on redis-py + hiredis): decisions/s and latency on one
hot key, the way a Python service would call them.

Protocol: one key, limit 5000 per 1000 ms, DURATION seconds per run (default 10) after a 1 s
warm-up, against one local Redis; 16 threads (sync APIs) and 64 asyncio tasks on one event loop
(async APIs). Every call counts as a decision, allowed or not. Latency is per call, measured
around the call in the caller.

    python bench.py --url redis://127.0.0.1:6379/ [--duration 10] [--threads 16] [--tasks 64]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import threading
import time
from typing import Any, Awaitable, Callable, Dict, List, Optional

LIMIT, WINDOW_MS = 5000, 1000


def pct(sorted_ns: List[int], p: float) -> float:
    if not sorted_ns:
        return float("nan")
    i = min(len(sorted_ns) - 1, int(round(p / 100.0 * (len(sorted_ns) - 1))))
    return sorted_ns[i] / 1e6


_REDIS_URL = ""


def redis_cpu_s() -> float:
    """Redis's own CPU time so far (user + sys), to report its cost per decision."""
    import redis as redis_py

    info = redis_py.Redis.from_url(_REDIS_URL).info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def summarize(name: str, mode: str, lat: List[int], allowed: int, elapsed: float, redis_cpu: float = float("nan"), client_cpu: float = float("nan")) -> Dict[str, Any]:
    lat.sort()
    return {
        "redis_cpu_us": redis_cpu * 1e6 / max(1, len(lat)),
        "client_cpu_us": client_cpu * 1e6 / max(1, len(lat)),
        "library": name,
        "mode": mode,
        "decisions": len(lat),
        "per_s": len(lat) / elapsed,
        "allowed_per_s": allowed / elapsed,
        "p50_ms": pct(lat, 50),
        "p99_ms": pct(lat, 99),
        "p999_ms": pct(lat, 99.9),
    }


def run_threads(name: str, call: Callable[[], bool], threads: int, duration: float, warmup: float) -> Dict[str, Any]:
    lats: List[List[int]] = [[] for _ in range(threads)]
    allowed = [0] * threads
    start_barrier = threading.Barrier(threads + 1)
    bounds: Dict[str, float] = {}

    def worker(i: int) -> None:
        lat, ok = lats[i], 0
        pc = time.perf_counter_ns
        start_barrier.wait()
        t_measure, t_end = bounds["measure"], bounds["end"]
        while True:
            t0 = pc()
            if t0 >= t_end:
                break
            a = call()
            t1 = pc()
            if t0 >= t_measure:
                lat.append(t1 - t0)
                ok += a
        allowed[i] = ok

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    now = time.perf_counter_ns()
    bounds["measure"] = now + int(warmup * 1e9)
    bounds["end"] = bounds["measure"] + int(duration * 1e9)
    start_barrier.wait()
    time.sleep(max(0.0, (bounds["measure"] - time.perf_counter_ns()) / 1e9))
    cpu0, own0 = redis_cpu_s(), time.process_time()
    time.sleep(max(0.0, (bounds["end"] - time.perf_counter_ns()) / 1e9))
    cpu1, own1 = redis_cpu_s(), time.process_time()
    for t in ts:
        t.join()
    return summarize(name, f"{threads} threads", [x for l in lats for x in l], sum(allowed), duration, cpu1 - cpu0, own1 - own0)


def run_tasks(name: str, make: Callable[[], Any], call: Callable[[Any], Awaitable[bool]], tasks: int, duration: float, warmup: float, close: Optional[Callable[[Any], Awaitable[None]]] = None) -> Dict[str, Any]:
    async def main() -> Dict[str, Any]:
        lim = make()
        lat: List[int] = []
        allowed = [0]
        pc = time.perf_counter_ns
        t_measure = pc() + int(warmup * 1e9)
        t_end = t_measure + int(duration * 1e9)

        async def worker() -> None:
            ok = 0
            while True:
                t0 = pc()
                if t0 >= t_end:
                    break
                a = await call(lim)
                t1 = pc()
                if t0 >= t_measure:
                    lat.append(t1 - t0)
                    ok += a
            allowed[0] += ok

        async def sample() -> Any:
            await asyncio.sleep(max(0.0, (t_measure - pc()) / 1e9))
            c0, own0 = await asyncio.to_thread(redis_cpu_s), time.process_time()
            await asyncio.sleep(max(0.0, (t_end - pc()) / 1e9))
            return await asyncio.to_thread(redis_cpu_s) - c0, time.process_time() - own0

        (cpu, own), *_ = await asyncio.gather(sample(), *(worker() for _ in range(tasks)))
        if close is not None:
            await close(lim)
        return summarize(name, f"asyncio C={tasks}", lat, allowed[0], duration, cpu, own)

    return asyncio.run(main())


def bench_rl(url: str, args: argparse.Namespace) -> List[Dict[str, Any]]:
    import rl

    out = []
    lim = rl.Limiter(url)
    key = "bench:rl:threads"
    lim.reset(key)
    out.append(run_threads("rl", lambda: lim.acquire(key, LIMIT, WINDOW_MS).allowed, args.threads, args.duration, args.warmup))
    lim.close()

    akey = "bench:rl:async"
    rl.Limiter(url).reset(akey)

    async def call(l: Any) -> bool:
        return (await l.acquire(akey, LIMIT, WINDOW_MS)).allowed

    async def close(l: Any) -> None:
        await l.aclose()

    out.append(run_tasks("rl", lambda: rl.AsyncLimiter(url), call, args.tasks, args.duration, args.warmup, close))
    return out


def bench_limits(url: str, args: argparse.Namespace) -> List[Dict[str, Any]]:
    from limits import RateLimitItemPerSecond
    from limits.aio.strategies import MovingWindowRateLimiter as AsyncMovingWindow
    from limits.storage import storage_from_string
    from limits.strategies import MovingWindowRateLimiter

    item = RateLimitItemPerSecond(LIMIT, WINDOW_MS // 1000)
    out = []
    storage = storage_from_string(url)
    lim = MovingWindowRateLimiter(storage)
    storage.reset()
    out.append(run_threads("limits", lambda: lim.hit(item, "bench:limits:threads"), args.threads, args.duration, args.warmup))

    def make() -> Any:
        # redis.asyncio (with hiredis), as in the sync run; limits' own default would be coredis.
        return AsyncMovingWindow(storage_from_string("async+" + url, implementation="redispy"))

    async def call(l: Any) -> bool:
        return bool(await l.hit(item, "bench:limits:async"))

    out.append(run_tasks("limits", make, call, args.tasks, args.duration, args.warmup))
    return out


def versions() -> Dict[str, str]:
    from importlib.metadata import version

    v = {"python": sys.version.split()[0]}
    for dist in ("rl-python", "limits", "redis", "hiredis"):
        try:
            v[dist] = version(dist)
        except Exception:
            v[dist] = "-"
    return v


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default=os.environ.get("RL_TEST_REDIS_URL", "redis://127.0.0.1:6379/"))
    ap.add_argument("--duration", type=float, default=10.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--tasks", type=int, default=64)
    ap.add_argument("--only", choices=["rl", "limits"], default=None)
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    global _REDIS_URL
    _REDIS_URL = args.url

    import redis as redis_py

    hiredis_on = getattr(redis_py.utils, "HIREDIS_AVAILABLE", False)
    print(f"# {versions()} hiredis parser active: {hiredis_on}; load average {os.getloadavg()}", flush=True)
    print(f"# one key, limit {LIMIT}/{WINDOW_MS} ms, {args.duration:g} s per run (+{args.warmup:g} s warm-up), {args.url}", flush=True)
    results: List[Dict[str, Any]] = []
    if args.only in (None, "limits"):
        results += bench_limits(args.url, args)
    if args.only in (None, "rl"):
        results += bench_rl(args.url, args)

    print("\n| library | load | decisions/s | allowed/s | P50 ms | P99 ms | P99.9 ms | client CPU µs/decision | Redis CPU µs/decision |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r['library']} | {r['mode']} | {r['per_s']:,.0f} | {r['allowed_per_s']:,.0f} | {r['p50_ms']:.3f} | {r['p99_ms']:.3f}"
            f" | {r['p999_ms']:.3f} | {r['client_cpu_us']:.1f} | {r['redis_cpu_us']:.1f} |"
        )
    by = {(r["library"], r["mode"]): r for r in results}
    ratios = []
    for mode in sorted({r["mode"] for r in results}):
        a, b = by.get(("rl", mode)), by.get(("limits", mode))
        if a and b:
            ratios.append((mode, a["per_s"] / b["per_s"], a["p99_ms"] / b["p99_ms"]))
    if ratios:
        print("\n| load | rl/limits decisions/s | rl P99 / limits P99 |")
        print("|---|---:|---:|")
        for mode, thr, p99 in ratios:
            print(f"| {mode} | {thr:.2f}x | {p99:.2f} |")
    print(f"\n# load average after: {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"versions": versions(), "results": results}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
