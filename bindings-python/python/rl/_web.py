"""What every HTTP integration shares (rl.starlette, rl.fastapi, rl.flask), free of any
framework: the client address behind a trusted proxy and the fail-open / fail-closed choice.
The policies are checked once by ``rl.prepare_policies``, and each request's decision, header
fields and problem body come from one ``acquire_policies`` call: the core's numbers and syntax;
nothing here recomputes them.
"""

from __future__ import annotations

import logging
import typing as t

from ._errors import InvalidArgument, RateLimitError
from ._rl import Policy

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
