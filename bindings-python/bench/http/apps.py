"""The tiny apps the HTTP benchmark serves (bench.py): FastAPI under uvicorn and Flask under
gunicorn, each without a limiter, with rl's middleware, and with the ecosystem's peer (slowapi,
Flask-Limiter), all limited to BENCH_POLICY on one key against BENCH_REDIS. The handler appends
its wall-clock time (ms) to BENCH_SERVED for every request it serves."""

from __future__ import annotations

import os
import time

VARIANT = os.environ["BENCH_VARIANT"]
POLICY = os.environ.get("BENCH_POLICY", "100/second")
REDIS = os.environ["BENCH_REDIS"]
_fd = os.open(os.environ["BENCH_SERVED"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)


def served(mode: str = "-") -> None:
    """Records one served request: its time, and for rl the mode that decided it."""
    os.write(_fd, b"%d %s\n" % (time.time_ns() // 1_000_000, mode.encode()))


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
    if VARIANT in ("flask-rl", "flask-rl-leases", "flask-rl-memory"):
        import rl
        from rl.flask import RateLimiter

        RateLimiter(app, limiter=rl.Limiter(RL_URL, **RL_OPTIONS), policies=POLICY, key=one_key)  # type: ignore[arg-type]
    elif VARIANT == "flask-limiter":
        from flask_limiter import Limiter as FlaskLimiter

        FlaskLimiter(one_key, app=app, storage_uri=REDIS, default_limits=[POLICY], headers_enabled=True)  # type: ignore[arg-type]

    @app.get("/")  # type: ignore[misc]
    def root() -> dict:  # type: ignore[type-arg]
        from flask import g

        served(g.rl_decision.mode if "rl_decision" in g else "-")
        return {"ok": True}
