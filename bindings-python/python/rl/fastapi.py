"""Per-route limits for FastAPI: a dependency over ``rl.AsyncLimiter``
(``pip install 'rl-limiter[fastapi]'``).

    limiter = rl.AsyncLimiter(url)
    app = FastAPI()
    rl.fastapi.install(app, limiter)

    @app.get("/search", dependencies=[Depends(rl.fastapi.limit("5/s; 100/h"))])
    async def search(): ...

``limit`` takes the configuration of ``rl.starlette.Limit`` (key, cost, exempt, on_denied,
header_style, trusted_proxy_header, on_error ...); its window is the route's own
(``route:<path template>:<identity>``) unless ``scope`` says otherwise. A denial raises
``RateLimited``, which ``install`` turns into the core's 429 problem response (without
``install``, FastAPI's own HTTPException handler still answers 429 with the fields, its body
being ``{"detail": <the problem object>}``). Allowed responses get the fields through the
injected ``Response``; for endpoints that return a ``Response`` themselves, add
``rl.starlette.RateLimitMiddleware`` (with or without global policies), which writes them.
"""

from __future__ import annotations

import json
import typing as t

import fastapi as _fastapi
from fastapi import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from . import AsyncLimiter
from .starlette import SCOPE_MIDDLEWARE, Limit, RateLimitMiddleware, _attach, client_ip, route_key, user_key
from ._web import _Policies

__all__ = ["RateLimited", "RateLimitMiddleware", "client_ip", "install", "limit", "route_key", "user_key"]


class RateLimited(HTTPException):
    """Raised by a ``limit`` dependency on denial; ``response`` is what to send."""

    def __init__(self, response: Response) -> None:
        try:
            detail: t.Any = json.loads(bytes(response.body))
        except ValueError:
            detail = "Too Many Requests"
        super().__init__(status_code=response.status_code, detail=detail, headers=dict(response.headers))
        self.response = response


async def _handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RateLimited)
    return exc.response


def install(app: _fastapi.FastAPI, limiter: t.Optional[AsyncLimiter] = None) -> None:
    """Registers the 429 handler, and ``limiter`` as the app's default (``app.state.rl_limiter``)."""
    app.add_exception_handler(RateLimited, _handler)
    if limiter is not None:
        app.state.rl_limiter = limiter


def limit(policies: _Policies, *, scope: t.Optional[str] = None, **config: t.Any) -> t.Callable[[Request, Response], t.Awaitable[None]]:
    """A dependency limiting the route it is on by ``policies``; see ``rl.starlette.Limit``."""
    lim = Limit(policies, **config, scope=scope or "route")
    per_route = scope is None

    async def dependency(request: Request, response: Response) -> None:
        where = None
        if per_route:
            route = request.scope.get("route")
            where = "route:" + str(getattr(route, "path", None) or request.url.path)
        _, fields, denial = await lim.check(request, where)
        if denial is not None:
            raise RateLimited(denial)
        if request.scope.get(SCOPE_MIDDLEWARE):
            _attach(request.scope, fields)
        else:
            for name, value in fields:
                response.headers.append(name, value)

    return dependency

