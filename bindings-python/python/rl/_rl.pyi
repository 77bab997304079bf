# Stubs for the native module rl._rl (built from bindings-python/src). Public names are
# re-exported by `rl`; import them from there.
import asyncio
from typing import Any, ClassVar, Literal, Optional, Tuple, Union, final

from typing_extensions import Self

__all__ = [
    "AsyncCore",
    "Bridge",
    "Decision",
    "Limiter",
    "MAX_KEY_BYTES",
    "MAX_PERMITS",
    "MAX_WINDOW_MS",
    "__version__",
    "_at_exit",
]
__version__: str
MAX_WINDOW_MS: int
MAX_PERMITS: int
MAX_KEY_BYTES: int

_Key = Union[str, bytes]

@final
class Decision:
    """The answer to one acquire or peek. Immutable, hashable, picklable."""

    __match_args__: ClassVar[
        Tuple[
            Literal["allowed"],
            Literal["remaining"],
            Literal["used"],
            Literal["retry_after_ms"],
            Literal["reset_after_ms"],
            Literal["mode"],
            Literal["now_ms"],
        ]
    ]
    def __new__(
        cls,
        allowed: bool,
        remaining: int,
        used: int,
        retry_after_ms: int,
        reset_after_ms: int,
        mode: str,
        now_ms: int,
    ) -> Self: ...
    @property
    def allowed(self) -> bool:
        """Whether the permits were granted (for peek: whether one permit would be)."""
    @property
    def remaining(self) -> int:
        """Permits left in the window after this call: limit - used."""
    @property
    def used(self) -> int:
        """Permits counted in the window after this call (denied requests are not counted)."""
    @property
    def retry_after_ms(self) -> int:
        """0 if allowed; otherwise the wait after which the same request fits."""
    @property
    def reset_after_ms(self) -> int:
        """When the window is empty again if nothing else is admitted; 0 if it is empty now."""
    @property
    def mode(self) -> str:
        """Which path decided: "normal" (Redis), "memory" (in-process), "local", "lease"."""
    @property
    def now_ms(self) -> int:
        """The time of the decision in ms since the epoch, on Redis's clock for Redis."""
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...
    def __reduce__(self) -> Tuple[Any, Tuple[bool, int, int, int, int, str, int]]: ...

@final
class Limiter:
    """The synchronous limiter: thread-safe, releases the GIL while it waits on Redis."""

    def __new__(
        cls,
        url: Optional[str] = None,
        *,
        key_prefix: Optional[str] = None,
        connect_timeout_ms: Optional[int] = None,
        request_timeout_ms: Optional[int] = None,
        max_clock_skew_ms: Optional[int] = None,
    ) -> Self: ...
    def acquire(self, key: _Key, limit: int, window_ms: int, cost: int = 1) -> Decision: ...
    def peek(self, key: _Key, limit: int, window_ms: int) -> Decision: ...
    def reset(self, key: _Key) -> None: ...
    def ping(self) -> None: ...
    def redis_key(self, key: _Key) -> bytes: ...
    @property
    def backend(self) -> Literal["redis", "memory"]: ...
    @property
    def closed(self) -> bool: ...
    def close(self) -> None: ...
    def __enter__(self) -> Self: ...
    def __exit__(self, *_exc: object) -> None: ...

@final
class Bridge:
    """One event loop's completion pipe (internal; see rl._bridge_for)."""

    def __new__(cls) -> Self: ...
    def fileno(self) -> int: ...
    @property
    def stale(self) -> bool: ...
    def submit(self) -> None: ...
    def abandon(self) -> None: ...
    def take(self) -> list[tuple[asyncio.Future[Any], bool, Any]]: ...

@final
class AsyncCore:
    """Native half of rl.AsyncLimiter (internal): each call is queued on a bridge to resolve a
    future; the return value says whether the caller must schedule bridge.submit."""

    def __new__(
        cls,
        url: Optional[str] = None,
        *,
        key_prefix: Optional[str] = None,
        connect_timeout_ms: Optional[int] = None,
        request_timeout_ms: Optional[int] = None,
        max_clock_skew_ms: Optional[int] = None,
    ) -> Self: ...
    def acquire(
        self, bridge: Bridge, fut: asyncio.Future[Decision], key: _Key, limit: int, window_ms: int, cost: int = 1
    ) -> bool: ...
    def peek(self, bridge: Bridge, fut: asyncio.Future[Decision], key: _Key, limit: int, window_ms: int) -> bool: ...
    def reset(self, bridge: Bridge, fut: asyncio.Future[None], key: _Key) -> bool: ...
    def ping(self, bridge: Bridge, fut: asyncio.Future[None]) -> bool: ...
    def decide_acquire(self, key: _Key, limit: int, window_ms: int, cost: int = 1) -> Decision: ...
    def decide_peek(self, key: _Key, limit: int, window_ms: int) -> Decision: ...
    def decide_reset(self, key: _Key) -> None: ...
    def check_open(self) -> None: ...
    def redis_key(self, key: _Key) -> bytes: ...
    @property
    def backend(self) -> Literal["redis", "memory"]: ...
    @property
    def closed(self) -> bool: ...
    @property
    def target(self) -> str: ...
    def close(self) -> None: ...

def _at_exit() -> None: ...
