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
    "Stats",
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
class Stats:
    """A snapshot of a limiter's state and counters (Limiter.stats()). Immutable, picklable,
    == by value."""

    __match_args__: ClassVar[
        Tuple[
            Literal["mode"],
            Literal["topology"],
            Literal["decisions_normal"],
            Literal["decisions_local"],
            Literal["decisions_memory"],
            Literal["transitions_to_local"],
            Literal["transitions_to_normal"],
            Literal["state_ms"],
            Literal["state_reason"],
            Literal["redis_errors"],
            Literal["retries"],
            Literal["probes"],
            Literal["repairs"],
            Literal["repaired_permits"],
            Literal["failovers"],
            Literal["instances"],
            Literal["local_keys"],
            Literal["rtt_samples"],
            Literal["rtt_last_us"],
            Literal["rtt_p50_us"],
            Literal["rtt_p99_us"],
            Literal["rtt_max_us"],
        ]
    ]
    def __new__(
        cls,
        mode: str,
        topology: str,
        decisions_normal: int,
        decisions_local: int,
        decisions_memory: int,
        transitions_to_local: int,
        transitions_to_normal: int,
        state_ms: int,
        state_reason: str,
        redis_errors: int,
        retries: int,
        probes: int,
        repairs: int,
        repaired_permits: int,
        failovers: int,
        instances: int,
        local_keys: int,
        rtt_samples: int,
        rtt_last_us: int,
        rtt_p50_us: int,
        rtt_p99_us: int,
        rtt_max_us: int,
    ) -> Self: ...
    @property
    def mode(self) -> str:
        """The path new decisions take now: "normal" (Redis), "local" (fallback) or "memory"."""
    @property
    def topology(self) -> str:
        """"standalone", "sentinel", "cluster" or "memory"."""
    @property
    def decisions_normal(self) -> int:
        """Decisions made by Redis since the limiter was opened."""
    @property
    def decisions_local(self) -> int:
        """Decisions made by the local fallback."""
    @property
    def decisions_memory(self) -> int:
        """Decisions made by the memory backend."""
    @property
    def transitions_to_local(self) -> int:
        """normal → local transitions."""
    @property
    def transitions_to_normal(self) -> int:
        """local → normal transitions."""
    @property
    def state_ms(self) -> int:
        """How long the current state has lasted, in ms."""
    @property
    def state_reason(self) -> str:
        """What caused the current state ("start" at first)."""
    @property
    def redis_errors(self) -> int:
        """Redis calls that failed with a connection-class error."""
    @property
    def retries(self) -> int:
        """Of those, how many were retried."""
    @property
    def probes(self) -> int:
        """Recovery probes sent while local."""
    @property
    def repairs(self) -> int:
        """Repair calls that wrote locally admitted permits back to Redis."""
    @property
    def repaired_permits(self) -> int:
        """Permits those repairs added."""
    @property
    def failovers(self) -> int:
        """New primaries seen (Sentinel, Cluster)."""
    @property
    def instances(self) -> int:
        """The divisor of the local budget (limit // instances): configured, or live instances seen in Redis."""
    @property
    def local_keys(self) -> int:
        """Keys the local record holds (at most local_max_keys)."""
    @property
    def rtt_samples(self) -> int:
        """Round trips recorded (of the last 1024 Redis decisions)."""
    @property
    def rtt_last_us(self) -> int:
        """Last round trip, in microseconds."""
    @property
    def rtt_p50_us(self) -> int:
        """Median round trip, in microseconds."""
    @property
    def rtt_p99_us(self) -> int:
        """99th percentile round trip, in microseconds."""
    @property
    def rtt_max_us(self) -> int:
        """Longest round trip, in microseconds."""
    def as_dict(self) -> dict[str, Union[str, int]]:
        """Every attribute in a new dict (for logs and metrics exporters)."""
    def __eq__(self, other: object) -> bool: ...
    def __reduce__(self) -> Tuple[Any, Tuple[Union[str, int], ...]]: ...

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
        retry_delay_ms: Optional[int] = None,
        local_fallback: Optional[bool] = None,
        degrade_rtt_ms: Optional[int] = None,
        degrade_after_ms: Optional[int] = None,
        recover_rtt_ms: Optional[int] = None,
        recover_after_ms: Optional[int] = None,
        instances: Optional[int] = None,
        local_max_keys: Optional[int] = None,
    ) -> Self: ...
    def acquire(self, key: _Key, limit: int, window_ms: int, cost: int = 1) -> Decision: ...
    def peek(self, key: _Key, limit: int, window_ms: int) -> Decision: ...
    def reset(self, key: _Key) -> None: ...
    def ping(self) -> None: ...
    def redis_key(self, key: _Key) -> bytes: ...
    def stats(self) -> Stats:
        """Which path decides now, counters, transitions, round trips. Never waits (no I/O)."""
    @property
    def instance_id(self) -> Optional[str]:
        """This limiter's id in the fleet's heartbeats in Redis; None for the memory backend."""
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
        retry_delay_ms: Optional[int] = None,
        local_fallback: Optional[bool] = None,
        degrade_rtt_ms: Optional[int] = None,
        degrade_after_ms: Optional[int] = None,
        recover_rtt_ms: Optional[int] = None,
        recover_after_ms: Optional[int] = None,
        instances: Optional[int] = None,
        local_max_keys: Optional[int] = None,
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
    def stats(self) -> Stats: ...
    @property
    def instance_id(self) -> Optional[str]: ...
    @property
    def backend(self) -> Literal["redis", "memory"]: ...
    @property
    def closed(self) -> bool: ...
    @property
    def target(self) -> str: ...
    def close(self) -> None: ...

def _at_exit() -> None: ...
