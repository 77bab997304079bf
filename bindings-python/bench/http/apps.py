"""The tiny apps the HTTP benchmark serves (bench.py): FastAPI under uvicorn and Flask under
gunicorn, each without a limiter, with rl's middleware, and with the ecosystem's peer (slowapi,
Flask-Limiter), all limited to BENCH_POLICY on one key against BENCH_REDIS. The handler appends
its wall-clock time (ms) to BENCH_SERVED for every request it serves."""

from __future__ import annotations

import os
import threading
import time

VARIANT = os.environ["BENCH_VARIANT"]
POLICY = os.environ.get("BENCH_POLICY", "100/second")
REDIS = os.environ["BENCH_REDIS"]
_fd = os.open(os.environ["BENCH_SERVED"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


TIME = os.environ.get("BENCH_TIME") == "1" and VARIANT.startswith("flask")
# With BENCH_TIME=1 (bench.py --time, Flask only): this thread's current request's limiter wall
# and CPU time (ns), set by Timed.
_times = threading.local()


def served(mode: str = "-") -> None:
    """Records one served request: its time, and for rl the mode that decided it."""
    if TIME:
        return  # the request's line is written by timed(), once its response is made
    os.write(_fd, b"%d %s\n" % (time.time_ns() // 1_000_000, mode.encode()))


class Timed:
    """With BENCH_TIME=1, stands in for the limiter the middleware calls and times its
    ``acquire_policies`` (wall time and the calling thread's CPU time)."""

    def __init__(self, inner: object) -> None:
        self.inner = inner

    def acquire_policies(self, *a: object) -> object:
        t0, c0 = time.perf_counter_ns(), time.thread_time_ns()
        try:
            return self.inner.acquire_policies(*a)  # type: ignore[attr-defined]
        finally:
            _times.limiter = (time.perf_counter_ns() - t0, time.thread_time_ns() - c0)

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)


class Stub:
    """`flask-rl-stub` (not run by default): the middleware with a limiter that answers every
    call with its first answer, no native call: the cost of the Flask glue alone."""

    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.answer: object = None

    def acquire_policies(self, *a: object) -> object:
        if self.answer is None:
            self.answer = self.inner.acquire_policies(*a)  # type: ignore[attr-defined]
        return self.answer


# With BENCH_TIME=1: the garbage collector's time, in ns, per generation since the process began.
_gc_ns = [0, 0, 0]
_gc_runs = [0, 0, 0]
_gc_start = [0]


def _gc_timer(phase: str, info: dict) -> None:  # type: ignore[type-arg]
    if phase == "start":
        _gc_start[0] = time.perf_counter_ns()
    else:
        _gc_ns[info["generation"]] += time.perf_counter_ns() - _gc_start[0]
        _gc_runs[info["generation"]] += 1


def timed_wsgi(inner):  # type: ignore[no-untyped-def]
    """With BENCH_TIME=1: each request's line gets its WSGI call's wall time, the limiter's
    wall and CPU time, and the time the garbage collector ran during the call, per generation
    (ns), then the collector's runs and time per generation since the process began:
    `<ms> <mode> <request> <limiter> <limiter cpu> <gc ns gen0..2> <gc runs gen0..2> <gc ns gen0..2>`."""
    import gc

    gc.callbacks.append(_gc_timer)

    def app(environ, start_response):  # type: ignore[no-untyped-def]
        _times.limiter = (0, 0)
        gc0 = list(_gc_ns)
        t0 = time.perf_counter_ns()
        out = inner(environ, start_response)
        took = time.perf_counter_ns() - t0
        gcs = [a - b for a, b in zip(_gc_ns, gc0)]
        if "bench.ms" not in environ:
            return out  # not served by the view (a 429): only served requests are counted
        os.write(_fd, b"%d %s %d %d %d %d %d %d %d %d %d %d %d %d\n" % (environ["bench.ms"], environ["bench.mode"].encode(),
                                                                    took, *_times.limiter, *gcs, *_gc_runs, *_gc_ns))
        return out

    return app


def one_key(*_: object) -> str:
    return "bench"


# `-leases` variants: rl's middleware on a limiter with exact leases (README: Hot keys), so most
# requests are decided without a Redis round trip. `-rl-memory` (not run by default): the
# middleware on the memory backend, its own cost with no Redis and no lease bookkeeping.
RL_OPTIONS = {"leases": "on"} if VARIANT.endswith("-leases") else {}
RL_URL = "memory://" if VARIANT.endswith("-rl-memory") else REDIS


if VARIANT.startswith("fastapi"):
    from fastapi import FastAPI, Request, Response

    app = FastAPI()
    if VARIANT in ("fastapi-rl", "fastapi-rl-leases", "fastapi-rl-memory"):
        import rl
        from rl.starlette import RateLimitMiddleware

        app.add_middleware(RateLimitMiddleware, limiter=rl.AsyncLimiter(RL_URL, **RL_OPTIONS), policies=POLICY, key=one_key)

        @app.get("/")
        async def root(request: Request) -> dict:  # type: ignore[type-arg]
            served(request.state.rl_decision.mode)
            return {"ok": True}

    elif VARIANT == "fastapi-slowapi":
        from slowapi import Limiter, _rate_limit_exceeded_handler
        from slowapi.errors import RateLimitExceeded

        limiter = Limiter(key_func=one_key, storage_uri=REDIS, headers_enabled=True)
        app.state.limiter = limiter
        app.add_exception_handler(RateLimitExceeded, _rate_limit_exceeded_handler)  # type: ignore[arg-type]

        @app.get("/")
        @limiter.limit(POLICY)
        async def root(request: Request, response: Response) -> dict:  # type: ignore[type-arg]
            # `response`: slowapi writes its headers there (with headers_enabled it answers 500
            # to an admitted request of an endpoint without one).
            served()
            return {"ok": True}

    else:

        @app.get("/")
        async def root() -> dict:  # type: ignore[type-arg]
            served()
            return {"ok": True}

else:
    from flask import Flask

    app = Flask(__name__)  # type: ignore[assignment]
    if VARIANT in ("flask-rl", "flask-rl-leases", "flask-rl-memory", "flask-rl-stub"):
        import rl
        from rl.flask import RateLimiter

        lim = rl.Limiter(RL_URL, **RL_OPTIONS)
        if VARIANT == "flask-rl-stub":
            lim = Stub(lim)  # type: ignore[assignment]
        RateLimiter(app, limiter=Timed(lim) if TIME else lim, policies=POLICY, key=one_key)  # type: ignore[arg-type]
    elif VARIANT.startswith("flask-spin"):
        _spin_ns = int(VARIANT[len("flask-spin"):]) * 1000

        @app.before_request
        def spin() -> None:
            end = time.perf_counter_ns() + _spin_ns
            while time.perf_counter_ns() < end:
                pass

    elif VARIANT == "flask-limiter":
        from flask_limiter import Limiter as FlaskLimiter

        FlaskLimiter(one_key, app=app, storage_uri=REDIS, default_limits=[POLICY], headers_enabled=True)  # type: ignore[arg-type]

    @app.get("/")  # type: ignore[misc]
    def root() -> dict:  # type: ignore[type-arg]
        from flask import g, request

        mode = g.rl_decision.mode if "rl_decision" in g else "-"
        request.environ["bench.mode"] = mode
        request.environ["bench.ms"] = time.time_ns() // 1_000_000  # when served, as served() records it
        served(mode)
        return {"ok": True}

    if TIME:
        app.wsgi_app = timed_wsgi(app.wsgi_app)  # type: ignore[method-assign]

# A long-running app's import-time objects sit in the collector's oldest generation; a fresh
# process's do not yet, and its first young collections each take about a millisecond to
# traverse them (seen with --time: 0.8-1.4 ms per generation-1 run), landing by chance in one
# app's measured window and not another's. Every app here is measured seconds after it starts,
# so each one first collects once, as if it had been running for a while.
import gc  # noqa: E402

gc.collect()
