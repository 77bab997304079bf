"""rl vs `limits` (MovingWindowRateLimiter on redis-py + hiredis): decisions/s and latency, the way
a Python service would call them, side by side in one run against one private Redis.

Scenarios (sync API, threads; every call counts as a decision, allowed or not; latency is per call,
measured around the call in the caller):
  1t-1key    1 thread,   one key, limit 5000 per 1000 ms
  16t-1key   16 threads, one key, limit 5000 per 1000 ms
  1t-100k    1 thread,   each call on a random key out of 100,000, limit 100 per 1000 ms
  16t-100k   16 threads, the same
  async      (only with --scenarios ...,async) 64 asyncio tasks on one key
On one key rl runs twice: with its defaults (the denial cache answers repeated denials locally)
and with denial_cache=false (every decision a script call, like `limits`).

Pinning: "pinned" holds this client to CPU 0 and Redis to CPU 1 (taskset), "unpinned" lets both
use every CPU. With --pinning both (the default) each pinning runs in its own child process (so
every thread, rl's runtime included, inherits the affinity) and the tables are printed together.
Also reported: Redis bytes per idle key (MEMORY USAGE, and used_memory growth per key) after one
decision on each of 2,000 fresh keys, for both libraries.

    python bench.py --url redis://127.0.0.1:6379/ [--duration 5] [--pinning both|pinned|unpinned]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Awaitable, Callable, Dict, List, Optional

ONE_KEY = (5000, 1000)
MANY_KEYS = (100, 1000)
N_KEYS = 100_000
# Every rl decision here should be a Redis decision, like limits': on a busy machine round trips
# pass rl's default degrade_rtt_ms (5 ms) and rl would decide locally (its fallback), which measures
# something else. The "rl local" column shows any decision taken locally anyway.
RL_OPTIONS = {"degrade_rtt_ms": 1000}
SCENARIOS = ["1t-1key", "16t-1key", "1t-100k", "16t-100k"]


def pct(sorted_ns: List[int], p: float) -> float:
    if not sorted_ns:
        return float("nan")
    i = min(len(sorted_ns) - 1, int(round(p / 100.0 * (len(sorted_ns) - 1))))
    return sorted_ns[i] / 1e6


_REDIS_URL = ""


def redis_conn() -> Any:
    import redis as redis_py

    return redis_py.Redis.from_url(_REDIS_URL)


def redis_cpu_s() -> float:
    """Redis's own CPU time so far (user + sys), to report its cost per decision."""
    info = redis_conn().info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def summarize(name: str, scenario: str, lat: List[int], allowed: int, elapsed: float, redis_cpu: float, client_cpu: float) -> Dict[str, Any]:
    lat.sort()
    return {
        "library": name,
        "scenario": scenario,
        "decisions": len(lat),
        "per_s": len(lat) / elapsed,
        "allowed_per_s": allowed / elapsed,
        "p50_ms": pct(lat, 50),
        "p99_ms": pct(lat, 99),
        "p999_ms": pct(lat, 99.9),
        "client_cpu_us": client_cpu * 1e6 / max(1, len(lat)),
        "redis_cpu_us": redis_cpu * 1e6 / max(1, len(lat)),
    }


def run_threads(name: str, scenario: str, call: Callable[[], bool], threads: int, duration: float, warmup: float) -> Dict[str, Any]:
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
    return summarize(name, scenario, [x for l in lats for x in l], sum(allowed), duration, cpu1 - cpu0, own1 - own0)


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
        return summarize(name, f"async C={tasks}", lat, allowed[0], duration, cpu, own)

    return asyncio.run(main())


def keys_call(keys: List[str], decide: Callable[[str], bool]) -> Callable[[], bool]:
    choice = random.choice
    return lambda: decide(choice(keys))


def bench_rl(url: str, scenarios: List[str], args: argparse.Namespace) -> List[Dict[str, Any]]:
    import rl

    out = []
    keys = [f"u{i}" for i in range(N_KEYS)]
    for denial_cache in (True, False):
        name = "rl" if denial_cache else "rl (denial_cache=false)"
        lim = rl.Limiter(url, denial_cache=denial_cache, **RL_OPTIONS)
        for sc in scenarios:
            threads = int(sc.split("t-")[0]) if "t-" in sc else 0
            if sc.endswith("1key"):
                key = f"bench:rl:{sc}:{denial_cache}"
                lim.reset(key)
                limit, window = ONE_KEY
                r = run_threads(name, sc, lambda: lim.acquire(key, limit, window).allowed, threads, args.duration, args.warmup)
            elif sc.endswith("100k") and denial_cache:
                limit, window = MANY_KEYS
                prefix = f"bench:rl:{sc}:"
                ks = [prefix + k for k in keys]
                r = run_threads(name, sc, keys_call(ks, lambda k: lim.acquire(k, limit, window).allowed), threads, args.duration, args.warmup)
            elif sc == "async" and denial_cache:
                akey = "bench:rl:async"
                lim.reset(akey)

                async def call(l: Any) -> bool:
                    return (await l.acquire(akey, *ONE_KEY)).allowed

                async def aclose(l: Any) -> None:
                    await l.aclose()

                r = run_tasks(name, lambda: rl.AsyncLimiter(url, **RL_OPTIONS), call, args.tasks, args.duration, args.warmup, aclose)
            else:
                continue
            st = lim.stats()
            r["stats"] = {"local": st.decisions_local, "denials_cached": st.denials_cached, "lease": st.decisions_lease,
                          "to_local": st.transitions_to_local, "reason": st.state_reason, "redis_errors": st.redis_errors}
            out.append(r)
        lim.close()
    return out


def bench_limits(url: str, scenarios: List[str], args: argparse.Namespace) -> List[Dict[str, Any]]:
    from limits import RateLimitItemPerSecond
    from limits.aio.strategies import MovingWindowRateLimiter as AsyncMovingWindow
    from limits.storage import storage_from_string
    from limits.strategies import MovingWindowRateLimiter

    out = []
    storage = storage_from_string(url)
    lim = MovingWindowRateLimiter(storage)
    one = RateLimitItemPerSecond(ONE_KEY[0], ONE_KEY[1] // 1000)
    many = RateLimitItemPerSecond(MANY_KEYS[0], MANY_KEYS[1] // 1000)
    keys = [f"u{i}" for i in range(N_KEYS)]
    for sc in scenarios:
        threads = int(sc.split("t-")[0]) if "t-" in sc else 0
        if sc.endswith("1key"):
            key = f"bench:limits:{sc}"
            lim.clear(one, key)
            out.append(run_threads("limits", sc, lambda: lim.hit(one, key), threads, args.duration, args.warmup))
        elif sc.endswith("100k"):
            ks = [f"bench:limits:{sc}:{k}" for k in keys]
            out.append(run_threads("limits", sc, keys_call(ks, lambda k: lim.hit(many, k)), threads, args.duration, args.warmup))
        elif sc == "async":

            def make() -> Any:
                # redis.asyncio (with hiredis), as in the sync runs; limits' own default would be coredis.
                return AsyncMovingWindow(storage_from_string("async+" + url, implementation="redispy"))

            async def call(l: Any) -> bool:
                return bool(await l.hit(one, "bench:limits:async"))

            out.append(run_tasks("limits", make, call, args.tasks, args.duration, args.warmup))
    return out


IDLE_RULE = (100, 60_000)


def mean_present(sizes: List[Optional[int]]) -> float:
    got = [s for s in sizes if s is not None]
    if len(got) != len(sizes):
        raise RuntimeError(f"{len(sizes) - len(got)} of {len(sizes)} keys are gone before they were measured")
    return sum(got) / len(got)


def idle_key_bytes(url: str, n: int = 2000) -> Dict[str, Dict[str, float]]:
    """One decision on each of `n` fresh keys, then Redis's size of such a key: MEMORY USAGE (mean
    over the keys) and used_memory growth per key (which includes the keyspace's own entry and the
    expiry). The rule is 100 per 60 s rather than per 1 s so that no key expires before it is
    measured; the size of a key holding one decision does not depend on the window's length."""
    import rl
    from limits import RateLimitItemPerSecond
    from limits.storage import storage_from_string
    from limits.strategies import MovingWindowRateLimiter

    r = redis_conn()
    out: Dict[str, Dict[str, float]] = {}
    tag = f"{os.getpid()}{random.randrange(10**6)}"

    lim = rl.Limiter(url)
    lim.ping()
    limit, window = IDLE_RULE
    before = int(r.info("memory")["used_memory"])
    ks = [f"idle:rl:{tag}:{i}" for i in range(n)]
    for k in ks:
        lim.acquire(k, limit, window)
    grown = int(r.info("memory")["used_memory"]) - before
    usage = [r.memory_usage(lim.redis_key(k), samples=0) for k in ks]
    out["rl"] = {"memory_usage": mean_present(usage), "used_memory_growth": grown / n}
    lim.close()

    ml = MovingWindowRateLimiter(storage_from_string(url))
    item = RateLimitItemPerSecond(limit, window // 1000)
    before = int(r.info("memory")["used_memory"])
    ks = [f"idle:limits:{tag}:{i}" for i in range(n)]
    for k in ks:
        ml.hit(item, k)
    grown = int(r.info("memory")["used_memory"]) - before
    usage = [r.memory_usage(f"LIMITS:{item.key_for(k)}", samples=0) for k in ks]
    out["limits"] = {"memory_usage": mean_present(usage), "used_memory_growth": grown / n}
    return out


def versions() -> Dict[str, str]:
    from importlib.metadata import version

    v = {"python": sys.version.split()[0]}
    for dist in ("rl-limiter", "limits", "redis", "hiredis"):
        try:
            v[dist] = version(dist)
        except Exception:
            v[dist] = "-"
    return v


def pin_redis(cpus: str) -> None:
    pid = int(redis_conn().info("server")["process_id"])
    subprocess.run(["taskset", "-a", "-p", "-c", cpus, str(pid)], check=True, stdout=subprocess.DEVNULL)


def one_pinning(args: argparse.Namespace) -> Dict[str, Any]:
    """This process runs every scenario for both libraries under one pinning."""
    ncpu = os.cpu_count() or 1
    if args.pinning == "pinned":
        os.sched_setaffinity(0, {0})
        pin_redis("1" if ncpu > 1 else "0")
    else:
        os.sched_setaffinity(0, set(range(ncpu)))
        pin_redis(f"0-{ncpu - 1}")
    scenarios = args.scenarios.split(",")
    results: List[Dict[str, Any]] = []
    for sc in scenarios:
        # Side by side: each scenario runs for both libraries before the next one starts.
        if args.only in (None, "limits"):
            results += bench_limits(args.url, [sc], args)
        if args.only in (None, "rl"):
            results += bench_rl(args.url, [sc], args)
    for r in results:
        r["pinning"] = args.pinning
    idle = idle_key_bytes(args.url) if args.only is None else {}
    return {"results": results, "idle_key_bytes": idle, "loadavg": os.getloadavg()}


def print_tables(results: List[Dict[str, Any]], idle: Dict[str, Any]) -> None:
    print("\n| pinning | scenario | library | decisions/s | allowed/s | P50 ms | P99 ms | P99.9 ms | client CPU µs/dec | Redis CPU µs/dec | rl local / cached denials |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        st = r.get("stats")
        extra = f"{st['local']} / {st['denials_cached']}" if st else ""
        if st and st["to_local"]:
            extra += f" (went local {st['to_local']}x: {st['reason']}; {st['redis_errors']} Redis errors)"
        print(
            f"| {r['pinning']} | {r['scenario']} | {r['library']} | {r['per_s']:,.0f} | {r['allowed_per_s']:,.0f} | {r['p50_ms']:.3f} | {r['p99_ms']:.3f}"
            f" | {r['p999_ms']:.3f} | {r['client_cpu_us']:.1f} | {r['redis_cpu_us']:.1f} | {extra} |"
        )
    by = {(r["pinning"], r["scenario"], r["library"]): r for r in results}
    print("\n| pinning | scenario | rl variant | rl/limits decisions/s | rl P99 / limits P99 |")
    print("|---|---|---|---:|---:|")
    for (pinning, sc, lib), r in by.items():
        peer = by.get((pinning, sc, "limits"))
        if lib == "limits" or peer is None:
            continue
        print(f"| {pinning} | {sc} | {lib} | {r['per_s'] / peer['per_s']:.2f}x | {r['p99_ms'] / peer['p99_ms']:.2f} |")
    for pinning, sizes in idle.items():
        if sizes:
            print(f"\n# Redis bytes per idle key ({pinning} run): " + ", ".join(
                f"{lib}: MEMORY USAGE {s['memory_usage']:.0f}, used_memory growth {s['used_memory_growth']:.0f}" for lib, s in sizes.items()))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default=os.environ.get("RL_TEST_REDIS_URL", "redis://127.0.0.1:6379/"))
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--tasks", type=int, default=64)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated: " + ", ".join(SCENARIOS + ["async"]))
    ap.add_argument("--pinning", choices=["both", "pinned", "unpinned"], default="both")
    ap.add_argument("--only", choices=["rl", "limits"], default=None)
    ap.add_argument("--json", help="also write the results to this file")
    args = ap.parse_args()
    global _REDIS_URL
    _REDIS_URL = args.url

    if args.pinning != "both" and args.json and os.environ.get("RL_BENCH_CHILD"):
        with open(args.json, "w") as f:
            json.dump(one_pinning(args), f)
        return 0

    import redis as redis_py

    hiredis_on = getattr(redis_py.utils, "HIREDIS_AVAILABLE", False)
    print(f"# {versions()} hiredis parser active: {hiredis_on}; {os.cpu_count()} CPUs; load average {os.getloadavg()}", flush=True)
    print(f"# one key: limit {ONE_KEY[0]}/{ONE_KEY[1]} ms; many keys: random of {N_KEYS:,}, limit {MANY_KEYS[0]}/{MANY_KEYS[1]} ms; "
          f"{args.duration:g} s per run (+{args.warmup:g} s warm-up); {args.url}", flush=True)
    results: List[Dict[str, Any]] = []
    idle: Dict[str, Any] = {}
    for pinning in (["pinned", "unpinned"] if args.pinning == "both" else [args.pinning]):
        with tempfile.NamedTemporaryFile(suffix=".json") as tmp:
            argv = [sys.executable, __file__, "--url", args.url, "--duration", str(args.duration), "--warmup", str(args.warmup),
                    "--tasks", str(args.tasks), "--scenarios", args.scenarios, "--pinning", pinning, "--json", tmp.name]
            if args.only:
                argv += ["--only", args.only]
            print(f"# running {pinning} ...", flush=True)
            subprocess.run(argv, check=True, env={**os.environ, "RL_BENCH_CHILD": "1"})
            with open(tmp.name) as f:
                got = json.load(f)
        results += got["results"]
        idle[pinning] = got["idle_key_bytes"]
        print(f"# {pinning} done; load average {got['loadavg']}", flush=True)
    print_tables(results, idle)
    print(f"\n# load average after: {os.getloadavg()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"versions": versions(), "results": results, "idle_key_bytes": idle}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
