"""rl: an exact, distributed sliding-window rate limiter.

At most ``limit`` permits in ANY span of ``window_ms`` milliseconds per key, shared by every
process that uses the same Redis (one atomic Lua script call per decision, on Redis's clock), or
in process memory when no Redis URL is given.

    >>> import rl
    >>> limiter = rl.Limiter("redis://127.0.0.1:6379/")
    >>> d = limiter.acquire("api:orders", limit=5000, window_ms=1000)
    >>> d.allowed, d.remaining, d.retry_after_ms

``Limiter`` is synchronous and thread-safe (it releases the GIL while it waits on Redis);
``AsyncLimiter`` has the same methods as coroutines for asyncio. See the README for errors,
fork-safety and options.
"""

from __future__ import annotations

import asyncio
import weakref
from asyncio import AbstractEventLoop, get_running_loop
from types import TracebackType
from typing import TYPE_CHECKING, Dict, List, Literal, Optional, Tuple, Type, Union

from ._errors import (
    BackendError,
    BackendUnavailable,
    ClockSkewError,
    InvalidArgument,
    InvalidArgumentType,
    LimiterClosed,
    NativePanicError,
    RateLimitError,
)
from ._options import LimiterOptions
from ._rl import (
    MAX_KEY_BYTES,
    MAX_PERMITS,
    MAX_RULES,
    MAX_WINDOW_MS,
    MODES,
    OPTIONS,
    PROBLEM_CONTENT_TYPE,
    AsyncCore as _AsyncCore,
    Bridge as _Bridge,
    CompositeDecision,
    Decision,
    Limiter,
    Policy,
    PreparedPolicies,
    Rule,
    Stats,
    __version__,
    parse_policies,
    prepare_policies,
    problem_body,
    render_headers,
)

if TYPE_CHECKING:
    from typing import Iterable as _Iterable

    from typing_extensions import Unpack as _Unpack

__all__ = [
    "AsyncLimiter",
    "BackendError",
    "BackendUnavailable",
    "ClockSkewError",
    "CompositeDecision",
    "Decision",
    "InvalidArgument",
    "InvalidArgumentType",
    "Key",
    "Limiter",
    "LimiterClosed",
    "LimiterOptions",
    "MAX_KEY_BYTES",
    "MAX_PERMITS",
    "MAX_RULES",
    "MAX_WINDOW_MS",
    "MODES",
    "OPTIONS",
    "NativePanicError",
    "PROBLEM_CONTENT_TYPE",
    "Policy",
    "PreparedPolicies",
    "RateLimitError",
    "Rule",
    "Stats",
    "__version__",
    "parse_policies",
    "prepare_policies",
    "problem_body",
    "render_headers",
]

#: A limiter key: ``str`` (used as its UTF-8 bytes) or ``bytes``.
Key = Union[str, bytes]

# Event loop -> its completion bridge (see bindings-python/src/aio.rs). Weak keys: a bridge lives
# as long as its loop. Loops that cannot be weakly referenced are kept in a plain dict.
_BRIDGES: "weakref.WeakKeyDictionary[AbstractEventLoop, _Bridge]" = weakref.WeakKeyDictionary()
_BRIDGES_STRONG: Dict[int, Tuple[AbstractEventLoop, _Bridge]] = {}


def _drain(bridge: _Bridge) -> None:
    """The loop's reader callback: resolves the futures of every finished call."""
    for fut, ok, value in bridge.take():
        if fut.done():  # cancelled by its awaiter
            continue
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)


def _sweep() -> None:
    """Lets go of the calls still pending on closed loops (e.g. those of an ``asyncio.run()``
    that ended with calls in flight): their futures can never be resolved, and they would keep
    the loop, its bridge and its pipe alive."""
    for loop, bridge in list(_BRIDGES.items()):
        if loop.is_closed():
            bridge.abandon()
    for key, (loop, bridge) in list(_BRIDGES_STRONG.items()):
        if loop.is_closed():
            bridge.abandon()
            del _BRIDGES_STRONG[key]


def _bridge_for(loop: AbstractEventLoop) -> _Bridge:
    try:
        bridge = _BRIDGES.get(loop)
        weak = True
    except TypeError:
        entry = _BRIDGES_STRONG.get(id(loop))
        bridge = entry[1] if entry is not None and entry[0] is loop else None
        weak = False
    if bridge is not None and not bridge.stale:
        return bridge
    if bridge is not None:
        # Made before a fork(): unhook it from this loop (its pipe stays open, unused).
        loop.remove_reader(bridge.fileno())
    _sweep()
    bridge = _Bridge()
    loop.add_reader(bridge.fileno(), _drain, bridge)
    if weak:
        _BRIDGES[loop] = bridge
    else:
        _BRIDGES_STRONG[id(loop)] = (loop, bridge)
    return bridge


class AsyncLimiter:
    """The asyncio twin of :class:`Limiter`: same arguments, same semantics, same errors; every
    call is a coroutine. Calls run on rl's own Rust runtime (no thread per call) and complete on
    the event loop that awaited them; one ``AsyncLimiter`` may serve several loops.

    ``url=None`` (or ``"memory://"``) is the in-process memory backend; ``redis://``,
    ``rediss://`` (TLS), ``unix://``, ``redis+sentinel://`` and ``redis+cluster://`` URLs use
    Redis. The keyword options are :class:`LimiterOptions` (names in ``rl.OPTIONS``); one left
    out, or ``None``, takes the core's default. Nothing is connected until the first call.
    """

    __slots__ = ("_core", "_memory", "_last", "__weakref__")

    def __init__(self, url: Optional[str] = None, **options: _Unpack[LimiterOptions]) -> None:
        self._core = _AsyncCore(url, **options)
        self._memory = self._core.backend == "memory"
        # The last loop used (weakly) and its bridge, as one tuple so threads see a consistent
        # pair: skips the registry on the hot path.
        self._last: Optional[Tuple["weakref.ReferenceType[AbstractEventLoop]", _Bridge]] = None

    def _bridge_for(self, loop: AbstractEventLoop) -> _Bridge:
        last = self._last
        if last is not None and last[0]() is loop and not last[1].stale:
            return last[1]
        bridge = _bridge_for(loop)
        try:
            self._last = (weakref.ref(loop), bridge)
        except TypeError:
            self._last = None
        return bridge

    async def acquire(self, key: Key, limit: int, window_ms: int, cost: int = 1) -> Decision:
        """Takes ``cost`` permits from ``key``'s window if they fit (at most ``limit`` in any
        ``window_ms`` span). A denied request takes nothing."""
        if self._memory:
            return self._core.decide_acquire(key, limit, window_ms, cost)
        loop = get_running_loop()
        bridge = self._bridge_for(loop)
        fut: "asyncio.Future[Decision]" = loop.create_future()
        r = self._core.acquire(bridge, fut, key, limit, window_ms, cost)
        return r if isinstance(r, Decision) else await r

    async def acquire_all(self, rules: "_Iterable[Rule]", group: Optional[Key] = None) -> CompositeDecision:
        """Takes every rule's cost if every rule fits, else nothing: one atomic decision (see
        :meth:`Limiter.acquire_all`)."""
        if self._memory:
            return self._core.decide_acquire_all(rules, group)
        loop = get_running_loop()
        bridge = self._bridge_for(loop)
        fut: "asyncio.Future[CompositeDecision]" = loop.create_future()
        r = self._core.acquire_all(bridge, fut, rules, group)
        return r if isinstance(r, CompositeDecision) else await r

    async def acquire_policies(
        self, policies: PreparedPolicies, key: Key, cost: int = 1, group: Optional[Key] = None
    ) -> "Tuple[CompositeDecision, List[Tuple[str, str]], Optional[str]]":
        """One rule per policy of ``policies`` (from :func:`prepare_policies`) on ``key``, decided
        like :meth:`acquire_all`, and the response the core renders for it: ``(decision, headers,
        body)`` (see :meth:`Limiter.acquire_policies`). A middleware's check in one call."""
        if self._memory:
            return self._core.decide_acquire_policies(policies, key, cost, group)  # type: ignore[no-any-return]
        loop = get_running_loop()
        bridge = self._bridge_for(loop)
        fut: "asyncio.Future[Tuple[CompositeDecision, List[Tuple[str, str]], Optional[str]]]" = loop.create_future()
        r = self._core.acquire_policies(bridge, fut, policies, key, cost, group)
        return r if isinstance(r, tuple) else await r  # type: ignore[no-any-return]

    async def peek(self, key: Key, limit: int, window_ms: int) -> Decision:
        """The window's state without taking anything; ``allowed`` tells whether one permit
        would be granted."""
        if self._memory:
            return self._core.decide_peek(key, limit, window_ms)
        loop = get_running_loop()
        bridge = self._bridge_for(loop)
        fut: "asyncio.Future[Decision]" = loop.create_future()
        r = self._core.peek(bridge, fut, key, limit, window_ms)
        return r if isinstance(r, Decision) else await r

    async def reset(self, key: Key) -> None:
        """Forgets everything admitted on ``key``."""
        if self._memory:
            return self._core.decide_reset(key)
        loop = get_running_loop()
        bridge = self._bridge_for(loop)
        fut: "asyncio.Future[None]" = loop.create_future()
        r = self._core.reset(bridge, fut, key)
        if r is not None:
            await r

    async def reset_in_group(self, key: Key, group: Optional[Key]) -> None:
        """Forgets everything admitted on ``key`` inside ``group`` (see
        :meth:`Limiter.reset_in_group`)."""
        if self._memory:
            return self._core.decide_reset_in_group(key, group)
        loop = get_running_loop()
        bridge = self._bridge_for(loop)
        fut: "asyncio.Future[None]" = loop.create_future()
        r = self._core.reset_in_group(bridge, fut, key, group)
        if r is not None:
            await r

    async def ping(self) -> None:
        """Checks that the backend answers (connecting if needed): readiness probes, fail-fast
        startup. Raises ``BackendUnavailable`` otherwise."""
        if self._memory:
            return self._core.check_open()
        loop = get_running_loop()
        bridge = self._bridge_for(loop)
        fut: "asyncio.Future[None]" = loop.create_future()
        r = self._core.ping(bridge, fut)
        if r is not None:
            await r

    def redis_key(self, key: Key) -> bytes:
        """The Redis key that holds ``key``'s window."""
        return self._core.redis_key(key)

    def stats(self) -> Stats:
        """Which path decides now, per-path counters, state transitions and Redis round trips.
        A plain method, not a coroutine: it never waits (no I/O). Raises ``LimiterClosed`` after
        ``close()``."""
        return self._core.stats()

    @property
    def instance_id(self) -> Optional[str]:
        """This limiter's id in the fleet's heartbeats in Redis; ``None`` for the memory backend."""
        return self._core.instance_id

    @property
    def backend(self) -> Literal["redis", "memory", "closed"]:
        """``"redis"`` or ``"memory"``; ``"closed"`` after ``close()``."""
        return self._core.backend

    @property
    def closed(self) -> bool:
        return self._core.closed

    def close(self) -> None:
        """Returns this limiter's unused leases to Redis (waiting for that: prefer ``await
        aclose()`` inside a running loop), then releases the connection; later calls raise
        ``LimiterClosed``. Calls already running finish. Closing twice is fine."""
        self._core.close()

    async def aclose(self) -> None:
        """``close()`` as a coroutine, for ``contextlib.aclosing`` and friends: the leases are
        returned without blocking the loop."""
        await self._aclose()

    async def _aclose(self) -> None:
        if self._core.closed:
            return
        loop = get_running_loop()
        bridge = self._bridge_for(loop)
        fut: "asyncio.Future[None]" = loop.create_future()
        r = self._core.aclose(bridge, fut)
        if r is not None:
            await r

    async def __aenter__(self) -> AsyncLimiter:
        if self._core.closed:
            raise LimiterClosed("this AsyncLimiter is closed; make a new one")
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        await self._aclose()

    def __repr__(self) -> str:
        return f"<rl.AsyncLimiter {self._core.target} {'closed' if self._core.closed else 'open'}>"
