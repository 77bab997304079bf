# Stubs for the native module rl._rl (built from bindings-python/src). Public names are
# re-exported by `rl`; import them from there.
import asyncio
from typing import Any, ClassVar, Iterable, Literal, Optional, Tuple, Union, final

from typing_extensions import Self, Unpack

from rl._options import LimiterOptions

__all__ = [
    "AsyncCore",
    "Bridge",
    "CompositeDecision",
    "Decision",
    "Limiter",
    "MAX_KEY_BYTES",
    "MAX_PERMITS",
    "MAX_RULES",
    "MAX_WINDOW_MS",
    "MODES",
    "OPTIONS",
    "PROBLEM_CONTENT_TYPE",
    "Policy",
    "PreparedPolicies",
    "Rule",
    "Stats",
    "__version__",
    "_at_exit",
    "parse_policies",
    "prepare_policies",
    "problem_body",
    "render_headers",
]
__version__: str
MAX_WINDOW_MS: int
MAX_PERMITS: int
MAX_KEY_BYTES: int
#: Most rules in one acquire_all call.
MAX_RULES: int
#: The media type of problem_body(): "application/problem+json".
PROBLEM_CONTENT_TYPE: str

_Key = Union[str, bytes]
_HeaderStyle = Literal["ietf", "legacy", "both", "none"]

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
        """Which path decided: one of MODES."""
    @property
    def now_ms(self) -> int:
        """The time of the decision in ms since the epoch, on Redis's clock for Redis."""
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...
    def __reduce__(self) -> Tuple[Any, Tuple[bool, int, int, int, int, str, int]]: ...

@final
class Policy:
    """One named limit: at most ``limit`` permits in any ``window_ms`` span. ``name`` (default:
    the canonical text, e.g. ``100/1s``) is what the RateLimit headers and problem bodies call it.
    Immutable, hashable; ``str()`` is text that parse_policies reads back."""

    def __new__(cls, limit: int, window_ms: int, name: Optional[str] = None) -> Self: ...
    @property
    def name(self) -> str: ...
    @property
    def limit(self) -> int: ...
    @property
    def window_ms(self) -> int: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Rule:
    """One rule of acquire_all: at most ``limit`` permits in any ``window_ms`` span of ``key``;
    the call asks for ``cost``. Immutable, hashable; ranges are checked by acquire_all."""

    def __new__(cls, key: _Key, limit: int, window_ms: int, cost: int = 1) -> Self: ...
    @staticmethod
    def from_policy(policy: Policy, key: _Key, cost: int = 1) -> Rule:
        """The rule ``policy`` sets on ``key``."""
    @property
    def key(self) -> bytes:
        """The key as bytes (a str key is its UTF-8 encoding)."""
    @property
    def limit(self) -> int: ...
    @property
    def window_ms(self) -> int: ...
    @property
    def cost(self) -> int: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

@final
class CompositeDecision:
    """The answer to one acquire_all: all rules or none."""

    @property
    def allowed(self) -> bool:
        """Whether the cost was taken from every rule (if False, nothing was taken from any)."""
    @property
    def retry_after_ms(self) -> int:
        """0 if allowed; otherwise the wait after which every rule fits."""
    @property
    def mode(self) -> str:
        """Which path decided (one of MODES)."""
    @property
    def now_ms(self) -> int:
        """The latest of the rules' decision times, in ms since the epoch."""
    @property
    def decisions(self) -> list[Decision]:
        """One decision per rule, in the rules' order."""
    def __eq__(self, other: object) -> bool: ...

def parse_policies(text: str) -> list[Policy]:
    """Parses ``"burst: 100/s; 5000 per hour"``; InvalidArgument naming ``policy`` otherwise."""

def render_headers(
    policies: Iterable[Policy], decision: CompositeDecision, style: Optional[_HeaderStyle] = None
) -> list[tuple[str, str]]:
    """The response fields for ``decision`` under ``policies`` (one per rule, in order)."""

def problem_body(policies: Iterable[Policy], decision: CompositeDecision) -> str:
    """The RFC 9457 JSON body of a 429 for a denied ``decision``."""

@final
class PreparedPolicies:
    """Policies and a header style checked once, for ``acquire_policies`` (made by
    ``prepare_policies``)."""

    @property
    def policies(self) -> list[Policy]:
        """The policies, in order: rule i of a call is policy i on its key."""
    @property
    def style(self) -> _HeaderStyle: ...

def prepare_policies(
    policies: Union[str, Iterable[Policy]], style: Optional[_HeaderStyle] = None
) -> PreparedPolicies:
    """Checks a policy string (``"burst: 100/s; 5000/h"``) or policies, and the header style
    (default "ietf"), once; InvalidArgument naming ``policies`` or ``style`` otherwise."""

#: What ``acquire_policies`` returns: the decision, the response fields as ``(name, value)``
#: pairs in the order to send them, and the problem body of a denial (else None).
_Responded = Tuple[CompositeDecision, list[tuple[str, str]], Optional[str]]

# BEGIN GENERATED by rl-gen: do not edit
#: Every keyword option of Limiter and AsyncLimiter (see rl.LimiterOptions).
OPTIONS: Tuple[
    Literal["key_prefix"],
    Literal["connect_timeout_ms"],
    Literal["request_timeout_ms"],
    Literal["client_clock"],
    Literal["max_clock_skew_ms"],
    Literal["retry_delay_ms"],
    Literal["local_fallback"],
    Literal["degrade_rtt_ms"],
    Literal["degrade_after_ms"],
    Literal["recover_rtt_ms"],
    Literal["recover_after_ms"],
    Literal["instances"],
    Literal["local_max_keys"],
    Literal["key_shards"],
    Literal["leases"],
    Literal["lease_ms"],
    Literal["lease_hot_rate"],
    Literal["denial_cache"],
    Literal["busy_poll_us"],
]
#: Every value of Decision.mode and Stats.mode:
#: "normal": Redis decided, exactly, with one script call.
#: "memory": The in-process memory backend decided (single-process use), exactly.
#: "local": The local fallback decided while Redis was unhealthy.
#: "lease": This instance decided from a lease of permits Redis counted for it, exactly.
MODES: Tuple[
    Literal["normal"],
    Literal["memory"],
    Literal["local"],
    Literal["lease"],
]

@final
class Stats:
    """A snapshot of a limiter's state and counters (Limiter.stats()). Immutable, picklable,
    == by value."""

    __match_args__: ClassVar[Tuple[
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
        Literal["shard_borrows"],
        Literal["decisions_lease"],
        Literal["leases_taken"],
        Literal["lease_refunds"],
        Literal["leased_permits"],
        Literal["refunded_permits"],
        Literal["denials_cached"],
        Literal["denied_normal"],
        Literal["denied_local"],
        Literal["denied_memory"],
    ]]
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
        shard_borrows: int,
        decisions_lease: int,
        leases_taken: int,
        lease_refunds: int,
        leased_permits: int,
        refunded_permits: int,
        denials_cached: int,
        denied_normal: int,
        denied_local: int,
        denied_memory: int,
    ) -> Self: ...
    @property
    def mode(self) -> str:
        """The path new decisions take now: normal (Redis), local (fallback) or memory."""
    @property
    def topology(self) -> str:
        """standalone, sentinel, cluster or memory."""
    @property
    def decisions_normal(self) -> int:
        """Decisions Redis made since the limiter was opened."""
    @property
    def decisions_local(self) -> int:
        """Decisions the local fallback made."""
    @property
    def decisions_memory(self) -> int:
        """Decisions the memory backend made."""
    @property
    def transitions_to_local(self) -> int:
        """State machine transitions normal -> local."""
    @property
    def transitions_to_normal(self) -> int:
        """State machine transitions local -> normal."""
    @property
    def state_ms(self) -> int:
        """How long the current state has lasted, in milliseconds."""
    @property
    def state_reason(self) -> str:
        """What caused the current state (\"start\" at first)."""
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
        """Repair calls that wrote admitted permits back to Redis."""
    @property
    def repaired_permits(self) -> int:
        """Permits those repairs added."""
    @property
    def failovers(self) -> int:
        """New primaries seen."""
    @property
    def instances(self) -> int:
        """The divisor of the local budget (limit / instances): configured or counted from heartbeats."""
    @property
    def local_keys(self) -> int:
        """Keys the local record holds (bounded by local_max_keys)."""
    @property
    def rtt_samples(self) -> int:
        """Redis round trips sampled (the last 1024 decisions)."""
    @property
    def rtt_last_us(self) -> int:
        """The last Redis round trip, in microseconds."""
    @property
    def rtt_p50_us(self) -> int:
        """Median Redis round trip, in microseconds."""
    @property
    def rtt_p99_us(self) -> int:
        """99th percentile Redis round trip, in microseconds."""
    @property
    def rtt_max_us(self) -> int:
        """Slowest sampled Redis round trip, in microseconds."""
    @property
    def shard_borrows(self) -> int:
        """Calls to a sharded key's other shards after its home shard denied (key_shards)."""
    @property
    def decisions_lease(self) -> int:
        """Decisions this instance made from its leases (mode lease)."""
    @property
    def leases_taken(self) -> int:
        """Leases Redis granted this instance."""
    @property
    def lease_refunds(self) -> int:
        """Leases returned to Redis (at their end, when traffic stopped, on close)."""
    @property
    def leased_permits(self) -> int:
        """Permits those leases held."""
    @property
    def refunded_permits(self) -> int:
        """Leased permits returned unused."""
    @property
    def denials_cached(self) -> int:
        """Denials replayed from the denial cache without a Redis call (denial_cache); not in decisions_normal."""
    @property
    def denied_normal(self) -> int:
        """Of decisions_normal, the denials."""
    @property
    def denied_local(self) -> int:
        """Of decisions_local, the denials."""
    @property
    def denied_memory(self) -> int:
        """Of decisions_memory, the denials."""
    def as_dict(self) -> dict[str, Union[str, int]]:
        """Every attribute in a new dict (for logs and metrics exporters)."""
    def __eq__(self, other: object) -> bool: ...
    def __reduce__(self) -> Tuple[Any, Tuple[Union[str, int], ...]]: ...
# END GENERATED

@final
class Limiter:
    """The synchronous limiter: thread-safe, releases the GIL while it waits on Redis."""

    def __new__(cls, url: Optional[str] = None, **options: Unpack[LimiterOptions]) -> Self: ...
    def acquire(self, key: _Key, limit: int, window_ms: int, cost: int = 1) -> Decision: ...
    def acquire_all(self, rules: Iterable[Rule], group: Optional[_Key] = None) -> CompositeDecision:
        """Every rule's cost if every rule fits, else nothing: one atomic decision."""
    def acquire_policies(
        self, policies: PreparedPolicies, key: _Key, cost: int = 1, group: Optional[_Key] = None
    ) -> _Responded:
        """One rule per policy on ``key``, decided like ``acquire_all``, and the response the
        core renders for it: ``(decision, headers, body)``."""
    def peek(self, key: _Key, limit: int, window_ms: int) -> Decision: ...
    def reset(self, key: _Key) -> None: ...
    def reset_in_group(self, key: _Key, group: Optional[_Key]) -> None:
        """Forgets ``key``'s window inside ``group`` (the one acquire_all keeps with that group);
        the key ungrouped or in another group is untouched. ``group`` None is ``reset``."""
    def ping(self) -> None: ...
    def redis_key(self, key: _Key) -> bytes: ...
    def stats(self) -> Stats:
        """Which path decides now, counters, transitions, round trips. Never waits (no I/O)."""
    @property
    def instance_id(self) -> Optional[str]:
        """This limiter's id in the fleet's heartbeats in Redis; None for the memory backend."""
    @property
    def backend(self) -> Literal["redis", "memory", "closed"]: ...
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
    def abandon(self) -> None: ...
    def take(self) -> list[tuple[asyncio.Future[Any], bool, Any]]: ...

@final
class AsyncCore:
    """Native half of rl.AsyncLimiter (internal): each call returns its result if it is decided
    at once, else ``fut``, which the bridge resolves."""

    def __new__(cls, url: Optional[str] = None, **options: Unpack[LimiterOptions]) -> Self: ...
    def acquire(
        self, bridge: Bridge, fut: asyncio.Future[Decision], key: _Key, limit: int, window_ms: int, cost: int = 1
    ) -> Union[Decision, asyncio.Future[Decision]]: ...
    def acquire_all(
        self,
        bridge: Bridge,
        fut: asyncio.Future[CompositeDecision],
        rules: Iterable[Rule],
        group: Optional[_Key] = None,
    ) -> Union[CompositeDecision, asyncio.Future[CompositeDecision]]: ...
    def acquire_policies(
        self,
        bridge: Bridge,
        fut: asyncio.Future[_Responded],
        policies: PreparedPolicies,
        key: _Key,
        cost: int = 1,
        group: Optional[_Key] = None,
    ) -> Union[_Responded, asyncio.Future[_Responded]]: ...
    def peek(
        self, bridge: Bridge, fut: asyncio.Future[Decision], key: _Key, limit: int, window_ms: int
    ) -> Union[Decision, asyncio.Future[Decision]]: ...
    def reset(self, bridge: Bridge, fut: asyncio.Future[None], key: _Key) -> Optional[asyncio.Future[None]]: ...
    def reset_in_group(
        self, bridge: Bridge, fut: asyncio.Future[None], key: _Key, group: Optional[_Key]
    ) -> Optional[asyncio.Future[None]]: ...
    def ping(self, bridge: Bridge, fut: asyncio.Future[None]) -> Optional[asyncio.Future[None]]: ...
    def decide_acquire(self, key: _Key, limit: int, window_ms: int, cost: int = 1) -> Decision: ...
    def decide_acquire_all(self, rules: Iterable[Rule], group: Optional[_Key] = None) -> CompositeDecision: ...
    def decide_acquire_policies(
        self, policies: PreparedPolicies, key: _Key, cost: int = 1, group: Optional[_Key] = None
    ) -> _Responded: ...
    def decide_peek(self, key: _Key, limit: int, window_ms: int) -> Decision: ...
    def decide_reset(self, key: _Key) -> None: ...
    def decide_reset_in_group(self, key: _Key, group: Optional[_Key]) -> None: ...
    def check_open(self) -> None: ...
    def redis_key(self, key: _Key) -> bytes: ...
    def stats(self) -> Stats: ...
    @property
    def instance_id(self) -> Optional[str]: ...
    @property
    def backend(self) -> Literal["redis", "memory", "closed"]: ...
    @property
    def closed(self) -> bool: ...
    @property
    def target(self) -> str: ...
    def close(self) -> None: ...
    def aclose(self, bridge: Bridge, fut: asyncio.Future[None]) -> Optional[asyncio.Future[None]]: ...

def _at_exit() -> None: ...
