"""Rate limiting for Flask: an extension over the synchronous ``rl.Limiter``
(``pip install 'rl-limiter[flask]'``), with a global limit and a per-route decorator.

    limits = rl.flask.RateLimiter(app, limiter=rl.Limiter(url), policies="100/s")  # global, optional

    @app.get("/search")
    @limits.limit("5/s; 100/h")
    def search(): ...

Every response carries the core's rate-limit fields (``RateLimit-Policy`` / ``RateLimit`` by
default; a global and a per-route limit each add their own list members); a denied request gets
429, ``Retry-After`` and the core's ``application/problem+json`` body.

Configuration (on the extension; ``limit`` takes the same per route): ``key`` (the request's
identity, default the client address, honouring ``trusted_proxy_header`` only when given; helpers
``user_key`` and ``route_key``), ``cost`` (default 1), ``exempt`` (a predicate; also the
``@limits.exempt`` decorator for the global limit), ``on_denied(request, decision)`` (a response
it returns replaces the 429), ``header_style``, ``on_error`` ("open": serve and log a warning,
the default; "closed": 503). The limited key is ``f"{scope}:{identity}"``: the global limit's
scope is "global", a route's is "route:<endpoint>".
"""

from __future__ import annotations

import functools
import typing as t

import flask as _flask
from flask.typing import ResponseReturnValue as _RV

from . import CompositeDecision, Limiter, Policy, RateLimitError, prepare_policies
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

__all__ = ["RateLimiter", "client_ip", "route_key", "user_key"]

F = t.TypeVar("F", bound=t.Callable[..., t.Any])
KeyFunc = t.Callable[[], str]
Denied = t.Callable[[t.Any, CompositeDecision], t.Optional[_RV]]

_EXEMPT = "_rl_exempt"


def client_ip(trusted_proxy_header: t.Optional[str] = None, trusted_hops: int = 1) -> KeyFunc:
    """A key function: the client address, from ``trusted_proxy_header`` (``hops`` entries from
    the right) only when one is given."""

    def key() -> str:
        forwarded = _flask.request.headers.get(trusted_proxy_header) if trusted_proxy_header else None
        return "ip:" + client_address(_flask.request.remote_addr, forwarded, trusted_hops)

    return key


def user_key(get_user: t.Callable[[], t.Optional[str]], fallback: t.Optional[KeyFunc] = None) -> KeyFunc:
    """A key function: ``user:<id>``; requests without a user fall back to ``fallback``."""
    other = fallback or client_ip()

    def key() -> str:
        user = get_user()
        return f"user:{user}" if user else other()

    return key


def route_key() -> str:
    """A key function: the endpoint, shared by every client (a limit on the route as a whole)."""
    return f"route:{_flask.request.endpoint or _flask.request.path}"


class _Limit:
    def __init__(
        self,
        owner: "RateLimiter",
        policies: _Policies,
        scope: str,
        key: t.Optional[KeyFunc],
        cost: t.Optional[t.Callable[[], int]],
        exempt: t.Optional[t.Callable[[], bool]],
        on_denied: t.Optional[Denied],
    ) -> None:
        self.owner = owner
        # Checked once here (policies and the owner's header style); a request is then one call.
        self.prepared = prepare_policies(policies, owner.header_style)
        self.policies: t.List[Policy] = self.prepared.policies
        self.scope = scope
        self.key = key
        self.cost = cost
        self.exempt = exempt
        self.on_denied = on_denied

    def check(self, scope: t.Optional[str] = None) -> t.Optional[_RV]:
        """Takes the request's permits; returns the response to send instead of the view's.
        ``scope`` overrides the configured one (a decorated view's endpoint)."""
        o = self.owner
        if self.exempt is not None and self.exempt():
            return None
        identity = (self.key or o.key)()
        cost = self.cost() if self.cost is not None else 1
        try:
            decision, fields, body = o.limiter.acquire_policies(self.prepared, f"{scope or self.scope}:{identity}", cost, o.group)
        except RateLimitError as e:
            if failed(o.on_error, e, _flask.request.path):
                return _flask.Response(UNAVAILABLE_BODY, status=503, mimetype="text/plain")
            return None
        g = _flask.g._get_current_object()  # one context lookup, not one per use of the proxy
        g.rl_decision = decision
        if decision.allowed:
            g.setdefault("_rl_fields", []).extend(fields)
            return None
        denied = self.on_denied or o.on_denied
        out: t.Any = denied(_flask.request, decision) if denied is not None else None
        resp = o.app_response(out) if out is not None else _flask.Response(body, status=429, mimetype=PROBLEM_CONTENT_TYPE)
        for name, value in fields:
            resp.headers.add(name, value)
        return resp


class RateLimiter:
    """The Flask extension. ``policies``: the global limit (optional); ``limit`` decorates
    views with their own. ``limiter``: an ``rl.Limiter`` (or give ``url`` and keyword options)."""

    def __init__(
        self,
        app: t.Optional[_flask.Flask] = None,
        *,
        limiter: t.Optional[Limiter] = None,
        url: t.Optional[str] = None,
        policies: t.Optional[_Policies] = None,
        key: t.Optional[KeyFunc] = None,
        cost: t.Optional[t.Callable[[], int]] = None,
        exempt: t.Optional[t.Callable[[], bool]] = None,
        on_denied: t.Optional[Denied] = None,
        header_style: _HeaderStyle = "ietf",
        trusted_proxy_header: t.Optional[str] = None,
        trusted_hops: int = 1,
        on_error: _OnError = "open",
        group: t.Optional[str] = None,
        **options: t.Any,
    ) -> None:
        self.limiter = limiter if limiter is not None else Limiter(url, **options)
        self.key: KeyFunc = key or client_ip(trusted_proxy_header, trusted_hops)
        self.on_denied = on_denied
        self.header_style: _HeaderStyle = header_style
        self.on_error = check_on_error(on_error)
        self.group = group
        self.app: t.Optional[_flask.Flask] = None
        self.glob = _Limit(self, policies, "global", None, cost, exempt, None) if policies is not None else None
        if app is not None:
            self.init_app(app)

    def init_app(self, app: _flask.Flask) -> None:
        self.app = app
        app.before_request(self._before)
        app.after_request(self._after)
        app.extensions["rl"] = self

    def app_response(self, rv: t.Any) -> _flask.Response:
        assert self.app is not None
        return self.app.make_response(rv)

    def _before(self) -> t.Optional[_RV]:
        if self.glob is None:
            return None
        view = self.app.view_functions.get(_flask.request.endpoint or "") if self.app is not None else None
        if view is not None and getattr(view, _EXEMPT, False):
            return None
        return self.glob.check()

    def _after(self, response: _flask.Response) -> _flask.Response:
        for name, value in _flask.g.pop("_rl_fields", []):
            response.headers.add(name, value)
        return response

    def exempt(self, view: F) -> F:
        """Exempts a view from the global limit (its own ``limit`` still applies)."""
        setattr(view, _EXEMPT, True)
        return view

    def limit(
        self,
        policies: _Policies,
        *,
        key: t.Optional[KeyFunc] = None,
        cost: t.Optional[t.Callable[[], int]] = None,
        exempt: t.Optional[t.Callable[[], bool]] = None,
        on_denied: t.Optional[Denied] = None,
        scope: t.Optional[str] = None,
    ) -> t.Callable[[F], F]:
        """A decorator: the view's own limit, in its own window (``route:<endpoint>`` unless
        ``scope`` is given)."""

        def wrap(view: F) -> F:
            lim = _Limit(self, policies, scope or "route", key, cost, exempt, on_denied)

            @functools.wraps(view)
            def limited(*args: t.Any, **kwargs: t.Any) -> t.Any:
                denial = lim.check(scope or f"route:{_flask.request.endpoint}")
                if denial is not None:
                    return denial
                return view(*args, **kwargs)

            return t.cast(F, limited)

        return wrap

