"""The exceptions rl raises; all are importable from ``rl``.

rl makes them with the message as the only argument and sets the extra attributes after, so no
class here has a Python ``__init__`` (raising must not run Python code inside the native module,
see bindings-python/src/lifecycle.rs).
"""

from __future__ import annotations

from typing import Optional, Tuple


class RateLimitError(Exception):
    """Base class of every error raised by rl."""


class InvalidArgument(RateLimitError, ValueError):
    """An argument rl cannot honour (empty key, limit 0, cost above the limit, negative or
    too large int ...). Nothing was sent to Redis. ``argument`` names the offending parameter."""

    argument: Optional[str] = None

    def __reduce__(self) -> Tuple[object, ...]:
        return (_rebuild, (type(self), str(self), {"argument": self.argument}))


class InvalidArgumentType(InvalidArgument, TypeError):
    """An argument of the wrong type: ``None``, a ``float`` (even ``1.0``, ``nan``, ``inf``), a
    ``bool``, a ``str`` where an ``int`` is needed, a key that is neither ``str`` nor ``bytes``.
    It is both an ``InvalidArgument`` (so a ``ValueError``) and a ``TypeError``."""


class BackendUnavailable(RateLimitError):
    """Redis could not be reached within the configured timeout (refused, timed out, dropped).
    Retrying later may succeed; the same limiter reconnects by itself. ``acquire``/``peek`` raise
    it only with ``local_fallback=False`` (otherwise they are decided locally); ``reset``/``ping``
    raise it either way."""


class BackendError(RateLimitError):
    """Redis answered with an error (wrong type at the key, script error, auth, OOM ...)."""


class ClockSkewError(RateLimitError):
    """A client-supplied clock is further from Redis time than ``max_clock_skew_ms``; the
    attributes give the times in ms."""

    client_ms: Optional[int] = None
    server_ms: Optional[int] = None
    skew_ms: Optional[int] = None
    max_skew_ms: Optional[int] = None

    def __reduce__(self) -> Tuple[object, ...]:
        attrs = {k: getattr(self, k) for k in ("client_ms", "server_ms", "skew_ms", "max_skew_ms")}
        return (_rebuild, (type(self), str(self), attrs))


class LimiterClosed(RateLimitError, RuntimeError):
    """The limiter was closed; calls after ``close()`` raise this."""


class NativePanicError(RateLimitError):
    """A bug inside the native module (a Rust panic), caught so that it neither escapes as a bare
    ``BaseException`` nor leaves an awaitable pending. The limiter stays usable. Please report
    the message."""


def _rebuild(cls: type, message: str, attrs: dict) -> BaseException:  # type: ignore[type-arg]
    exc: BaseException = cls(message)
    for k, v in attrs.items():
        setattr(exc, k, v)
    return exc


for _cls in (RateLimitError, InvalidArgument, InvalidArgumentType, BackendUnavailable, BackendError, ClockSkewError, LimiterClosed, NativePanicError):
    _cls.__module__ = "rl"
del _cls
