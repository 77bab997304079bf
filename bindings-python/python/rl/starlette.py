"""Rate limiting for Starlette and FastAPI apps: an ASGI middleware over ``rl.AsyncLimiter``
(``pip install 'rl-limiter[fastapi]'``). Per-route limits in FastAPI: ``rl.fastapi.limit``.

    app.add_middleware(RateLimitMiddleware, limiter=rl.AsyncLimiter(url), policies="100/s; 5000/h")

Every response carries the core's rate-limit fields (``RateLimit-Policy`` / ``RateLimit`` by
default); a denied request gets 429, ``Retry-After`` and the core's ``application/problem+json``
body. The limiter is awaited, never waited on, so the event loop keeps serving while Redis answers.

Configuration:
- ``key``: the request's identity (default: the client address, see ``client_ip``; helpers
  ``user_key`` and ``route_key``); the limited key is ``f"{scope}:{identity}"``, so the global
  limit and each per-route limit are separate windows.
- ``cost``: permits a request takes (default 1).
- ``exempt``: a predicate; an exempt request is not counted and gets no fields.
- ``on_denied``: called with the request and the ``CompositeDecision`` of a denial; a
  ``Response`` it returns replaces the 429 (the rate-limit fields are added to it).
- ``header_style``: "ietf", "legacy", "both" or "none".
- ``trusted_proxy_header`` / ``trusted_hops``: honour e.g. ``X-Forwarded-For`` (only then).
- ``on_error``: "open" (default: serve, log a warning) or "closed" (503) when the limiter raises.
  The core already decides locally while Redis is unhealthy, so this is about errors the limiter
  still raises (``local_fallback=False``, a closed limiter).
"""

from __future__ import annotations

import inspect
import typing as t

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from . import AsyncLimiter, CompositeDecision, Policy, RateLimitError, prepare_policies
from ._rl import PROBLEM_CONTENT_TYPE
if t.TYPE_CHECKING:
    from ._web import _HeaderStyle, _OnError
from ._web import (
    UNAVAILABLE_BODY,
    _Policies,
    check_on_error,
    client_address,
    failed,
)

__all__ = ["Limit", "RateLimitMiddleware", "client_ip", "route_key", "user_key"]

KeyFunc = t.Callable[[Request], t.Union[str, t.Awaitable[str]]]
CostFunc = t.Callable[[Request], t.Union[int, t.Awaitable[int]]]
Exempt = t.Callable[[Request], t.Union[bool, t.Awaitable[bool]]]
OnDenied = t.Callable[[Request, CompositeDecision], t.Union[t.Optional[Response], t.Awaitable[t.Optional[Response]]]]

#: Where a per-route limit leaves its fields for the middleware (scope key).
SCOPE_FIELDS = "rl.fields"
#: Set by the middleware, so per-route limits know it will write their fields.
SCOPE_MIDDLEWARE = "rl.middleware"


async def _value(v: t.Any) -> t.Any:
    return await v if inspect.isawaitable(v) else v


def client_ip(trusted_proxy_header: t.Optional[str] = None, trusted_hops: int = 1) -> KeyFunc:
    """A key function: the client address, from ``trusted_proxy_header`` (e.g.
    ``"X-Forwarded-For"``, ``hops`` entries from the right) only when one is given."""

    def key(request: Request) -> str:
        peer = request.client.host if request.client else None
        forwarded = request.headers.get(trusted_proxy_header) if trusted_proxy_header else None
        return "ip:" + client_address(peer, forwarded, trusted_hops)

    return key


def user_key(get_user: t.Callable[[Request], t.Optional[str]], fallback: t.Optional[KeyFunc] = None) -> KeyFunc:
    """A key function: ``user:<id>`` from ``get_user``; requests without a user fall back to
    ``fallback`` (default: the client address)."""
    other = fallback or client_ip()

    async def key(request: Request) -> str:
        user = get_user(request)
        return f"user:{user}" if user else str(await _value(other(request)))

    return key


def route_key(request: Request) -> str:
    """A key function: the route (its path template when routed, else the path), shared by
    every client: a limit on the route as a whole."""
    route = request.scope.get("route")
    return "route:" + str(getattr(route, "path", None) or request.url.path)


class Limit:
    """One set of policies applied to requests: the part the middleware and the FastAPI
    dependency share. ``check`` takes the request's permits and says what to answer."""

    def __init__(
        self,
        policies: _Policies,
        *,
        limiter: t.Optional[AsyncLimiter] = None,
        key: t.Optional[KeyFunc] = None,
        cost: t.Optional[CostFunc] = None,
        exempt: t.Optional[Exempt] = None,
        on_denied: t.Optional[OnDenied] = None,
        header_style: _HeaderStyle = "ietf",
        trusted_proxy_header: t.Optional[str] = None,
        trusted_hops: int = 1,
        on_error: _OnError = "open",
        scope: str = "global",
        group: t.Optional[str] = None,
    ) -> None:
        # Checked once here (policies and header style); a request is then one native call.
        self.prepared = prepare_policies(policies, header_style)
        self.policies: t.List[Policy] = self.prepared.policies
        self.limiter = limiter
        self.key = key or client_ip(trusted_proxy_header, trusted_hops)
        self.cost = cost
        self.exempt = exempt
        self.on_denied = on_denied
        self.header_style: _HeaderStyle = header_style
        self.on_error = check_on_error(on_error)
        self.scope = scope
        self.group = group

    def limiter_for(self, request: Request) -> AsyncLimiter:
        if self.limiter is not None:
            return self.limiter
        found = getattr(request.app.state, "rl_limiter", None)
        if found is None:
            raise RuntimeError("rl: no limiter: pass limiter=, or set app.state.rl_limiter to an rl.AsyncLimiter")
        return found  # type: ignore[no-any-return]

    async def check(
        self, request: Request, scope: t.Optional[str] = None
    ) -> t.Tuple[t.Optional[CompositeDecision], t.List[t.Tuple[str, str]], t.Optional[Response]]:
        """``(decision, fields, denial)``: the decision (None if exempt or the limiter failed
        open), the fields for the response, and the response to send instead of the app's.
        ``scope`` overrides the configured one (a per-route limit's route)."""
        if self.exempt is not None:
            skip = self.exempt(request)
            if skip if not inspect.isawaitable(skip) else await skip:
                return None, [], None
        identity = self.key(request)
        if inspect.isawaitable(identity):
            identity = await identity
        cost = 1
        if self.cost is not None:
            c = self.cost(request)
            cost = int(await c if inspect.isawaitable(c) else c)
        try:
            decision, fields, body = await self.limiter_for(request).acquire_policies(
                self.prepared, f"{scope or self.scope}:{identity}", cost, self.group
            )
        except RateLimitError as e:
            if failed(self.on_error, e, request.url.path):
                return None, [], Response(UNAVAILABLE_BODY, status_code=503, media_type="text/plain")
            return None, [], None
        request.state.rl_decision = decision
        if decision.allowed:
            return decision, fields, None
        denial: t.Optional[Response] = None
        if self.on_denied is not None:
            denial = await _value(self.on_denied(request, decision))
        if denial is None:
            denial = Response(body, status_code=429, media_type=PROBLEM_CONTENT_TYPE)
        for name, value in fields:
            denial.headers.append(name, value)
        return decision, fields, denial


class RateLimitMiddleware:
    """A pure ASGI middleware (no response buffering, streaming untouched): limits every HTTP
    request by ``policies`` (optional: without them it only writes the fields of per-route
    limits, ``rl.fastapi.limit``, for endpoints that return a ``Response`` themselves). The
    keyword arguments are ``Limit``'s; ``limiter`` defaults to ``app.state.rl_limiter``."""

    def __init__(self, app: ASGIApp, policies: t.Optional[_Policies] = None, **config: t.Any) -> None:
        self.app = app
        self.limit = Limit(policies, **config) if policies is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope[SCOPE_MIDDLEWARE] = True
        extra: t.List[t.Tuple[str, str]] = []
        if self.limit is not None:
            request = Request(scope, receive)
            _, extra, denial = await self.limit.check(request)
            if denial is not None:
                await denial(scope, receive, send)
                return
        scope.setdefault(SCOPE_FIELDS, []).extend(extra)

        async def send_with_fields(message: Message) -> None:
            if message["type"] == "http.response.start":
                fields = scope.get(SCOPE_FIELDS) or []
                if fields:
                    headers = list(message.get("headers", []))
                    headers.extend((n.lower().encode("latin-1"), v.encode("latin-1")) for n, v in fields)
                    message = dict(message)
                    message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_fields)


def _attach(scope: t.MutableMapping[str, t.Any], fields: t.Sequence[t.Tuple[str, str]]) -> None:
    scope.setdefault(SCOPE_FIELDS, []).extend(fields)
