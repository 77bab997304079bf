"""What every HTTP integration shares (rl.starlette, rl.fastapi, rl.flask), free of any
framework: the client address behind a trusted proxy, policies from text, the rules of one
request, and the fail-open / fail-closed choice. The numbers, header syntax and problem body are
the core's (rl.render_headers, rl.problem_body); nothing here recomputes them.
"""

from __future__ import annotations

import logging
import typing as t

from ._errors import InvalidArgument, RateLimitError
from ._rl import CompositeDecision, Policy, Rule, parse_policies, problem_body, render_headers

#: What a request gets when the limiter raises (Redis unreachable with ``local_fallback=False``,
#: a closed limiter ...): "open" serves it without rate-limit fields and logs a warning on the
#: ``rl`` logger; "closed" answers 503. Bad input (``InvalidArgument``) always propagates: it is
#: a bug in the key or cost function, not an outage.
if t.TYPE_CHECKING:  # (type-only: stubtest cannot compare a Literal alias at runtime)
    _OnError = t.Literal["open", "closed"]
    _HeaderStyle = t.Literal["ietf", "legacy", "both", "none"]
_Policies = t.Union[str, t.Sequence[Policy]]
_Fields = t.List[t.Tuple[str, str]]

log = logging.getLogger("rl")

UNAVAILABLE_BODY = "rate limiter unavailable\n"


def policies_of(policies: _Policies) -> t.List[Policy]:
    """A policy string (``"burst: 100/s; 5000/h"``, parsed by the core) or policies as given."""
    if isinstance(policies, str):
        return parse_policies(policies)
    return list(policies)


def check_on_error(on_error: str) -> _OnError:
    if on_error == "open":
        return "open"
    if on_error == "closed":
        return "closed"
    raise InvalidArgument(f"invalid argument `on_error`: is {on_error!r}; use 'open' or 'closed'")


def client_address(peer: t.Optional[str], forwarded: t.Optional[str], hops: int) -> str:
    """The client's address: the peer's, or, when a trusted-proxy header is configured and
    present, the entry ``hops`` from the right of its comma-separated list (each trusted proxy
    appends the address it saw, so entries further left are the client's own claims)."""
    if forwarded:
        entries = [e.strip() for e in forwarded.split(",") if e.strip()]
        if entries:
            return entries[-min(hops, len(entries))]
    return peer or "unknown"


def rules_for(policies: t.Sequence[Policy], key: str, cost: int) -> t.List[Rule]:
    """One rule per policy on one key: one Redis window checked against every policy."""
    return [Rule.from_policy(p, key, cost) for p in policies]


def fields_of(policies: t.Sequence[Policy], decision: CompositeDecision, style: _HeaderStyle) -> _Fields:
    return render_headers(policies, decision, style)


def body_of(policies: t.Sequence[Policy], decision: CompositeDecision) -> bytes:
    return problem_body(policies, decision).encode()


def failed(on_error: _OnError, error: RateLimitError, where: str) -> bool:
    """Whether to refuse the request after the limiter raised ``error`` (``InvalidArgument`` is
    re-raised). Fail-open logs the error, so an outage is never an allow in silence."""
    if isinstance(error, InvalidArgument):
        raise error
    if on_error == "closed":
        log.error("rl: %s: the limiter failed, refusing the request (on_error='closed'): %s", where, error)
        return True
    log.warning("rl: %s: the limiter failed, serving the request unlimited (on_error='open'): %s", where, error)
    return False
