"""The FastAPI app the middleware tests serve under uvicorn (tests/test_http_asgi.py), configured
by environment: RL_URL, RL_PREFIX (the limiter's key_prefix, one per test), RL_GLOBAL (the
global policies), RL_PROXY (a trusted-proxy header, or unset), RL_STYLE, RL_TIMEOUT_MS.
Handlers append "<path> <decision now_ms>" to RL_SERVED for each request they serve."""

from __future__ import annotations

import json
import os

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

import rl
import rl.fastapi
from rl.starlette import RateLimitMiddleware

SERVED = os.environ["RL_SERVED"]
HOOKS = os.environ["RL_HOOKS"]

limiter = rl.AsyncLimiter(
    os.environ["RL_URL"],
    key_prefix=os.environ["RL_PREFIX"],
    request_timeout_ms=int(os.environ.get("RL_TIMEOUT_MS", "1000")),
    **json.loads(os.environ.get("RL_OPTIONS", "{}")),
)
app = FastAPI()
rl.fastapi.install(app, limiter)


def record(request: Request) -> None:
    d = request.state.rl_decision
    with open(SERVED, "a") as f:
        f.write(f"{request.url.path} {d.now_ms}\n")


def exempt(request: Request) -> bool:
    return request.url.path in ("/free", "/served")


def denied(request: Request, decision: rl.CompositeDecision) -> Response | None:
    with open(HOOKS, "a") as f:
        f.write(json.dumps({"path": request.url.path, "retry_after_ms": decision.retry_after_ms}) + "\n")
    if request.url.path == "/hooked":
        return JSONResponse({"custom": True}, status_code=429)
    return None


app.add_middleware(
    RateLimitMiddleware,
    policies=os.environ["RL_GLOBAL"],
    exempt=exempt,
    on_denied=denied,
    header_style=os.environ.get("RL_STYLE", "ietf"),
    trusted_proxy_header=os.environ.get("RL_PROXY") or None,
)


@app.get("/hello")
async def hello(request: Request) -> dict:  # type: ignore[type-arg]
    record(request)
    return {"ok": True}


@app.get("/hooked")
async def hooked(request: Request) -> dict:  # type: ignore[type-arg]
    record(request)
    return {"ok": True}


@app.get("/route", dependencies=[Depends(rl.fastapi.limit("route: 2/s", exempt=lambda r: False))])
async def route(request: Request) -> dict:  # type: ignore[type-arg]
    record(request)
    return {"ok": True}


@app.get("/route-raw", dependencies=[Depends(rl.fastapi.limit("raw: 2/s"))])
async def route_raw(request: Request) -> PlainTextResponse:
    record(request)
    return PlainTextResponse("raw")


@app.get("/free")
async def free() -> dict:  # type: ignore[type-arg]
    return {"free": True}


@app.get("/served")
async def served() -> dict:  # type: ignore[type-arg]
    return {"ok": True}
