"""The local fallback (on by default), the new limiter options and ``stats()``.

A limiter on a port where nothing listens: the first call is refused, retried once after
``retry_delay_ms`` and then decided locally (``Decision.mode == "local"``) from the local budget
``limit // instances``; with ``local_fallback=False`` the same calls raise ``BackendUnavailable``.
Options are checked by the core's option table, whose errors name the keyword as given (e.g.
``recover_rtt_ms``); the binding only refuses what it cannot hand over (a ``float``, an object
that is not None/bool/int/str, an int beyond 128 bits), naming the keyword too.
"""

from __future__ import annotations

import asyncio
import pickle
import socket
import time
from typing import Any, Dict, List, Tuple

import pytest

import rl

REQUEST_TIMEOUT_MS = 500
SLACK_S = 0.5  # scheduling on a busy 2-core machine

INT_FIELDS = [
    "decisions_normal", "decisions_local", "decisions_memory", "transitions_to_local", "transitions_to_normal",
    "state_ms", "redis_errors", "retries", "probes", "repairs", "repaired_permits", "failovers", "instances",
    "local_keys", "rtt_samples", "rtt_last_us", "rtt_p50_us", "rtt_p99_us", "rtt_max_us",
    "shard_borrows", "decisions_lease", "leases_taken", "lease_refunds", "leased_permits", "refunded_permits",
    "denials_cached", "denied_normal", "denied_local", "denied_memory",
]
FIELDS = ["mode", "topology", *INT_FIELDS[:6], "state_reason", *INT_FIELDS[6:]]

# A Redis that is never slow enough to leave `normal` on a busy test machine (only errors would).
PATIENT: Dict[str, Any] = {"degrade_rtt_ms": 5_000, "degrade_after_ms": 60_000, "recover_rtt_ms": 2}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def nobody_url() -> str:
    return f"redis://127.0.0.1:{free_port()}/"


def check_stats_shape(s: rl.Stats) -> None:
    assert isinstance(s, rl.Stats)
    assert rl.Stats.__match_args__ == tuple(FIELDS)
    for f in INT_FIELDS:
        v = getattr(s, f)
        assert type(v) is int and v >= 0, (f, v)
    assert type(s.mode) is str and type(s.topology) is str and type(s.state_reason) is str
    assert list(s.as_dict()) == FIELDS
    r = repr(s)
    assert r.startswith(f"Stats(mode='{s.mode}', topology='{s.topology}', decisions_normal=") and r.endswith(")"), r
    assert all(f"{f}=" in r for f in FIELDS)
    with pytest.raises(AttributeError):
        s.mode = "normal"  # type: ignore[misc]
    again = pickle.loads(pickle.dumps(s))
    assert again == s and repr(again) == r
    assert rl.Stats(*s.as_dict().values()) == s  # type: ignore[arg-type]


def assert_local_budget(decisions: List[rl.Decision], took_first: float) -> None:
    """25 allowed (remaining counts down from the local budget 100 // 4), then denied."""
    assert took_first < REQUEST_TIMEOUT_MS / 1000 + SLACK_S, f"the first call took {took_first:.3f} s"
    for i, d in enumerate(decisions[:25], start=1):
        assert d.mode == "local", d
        assert d.allowed and d.used == i and d.remaining == 25 - i, (i, d)
    denied = decisions[25]
    assert denied.mode == "local" and not denied.allowed, denied
    assert denied.used == 25 and denied.remaining == 0 and denied.retry_after_ms > 0, denied


def assert_local_stats(s: rl.Stats, calls: int) -> None:
    check_stats_shape(s)
    assert s.mode == "local", s
    assert s.topology == "standalone", s
    assert s.transitions_to_local == 1 and s.transitions_to_normal == 0, s
    assert s.decisions_local == calls and s.decisions_normal == 0 and s.decisions_memory == 0, s
    assert s.redis_errors >= 1 and s.retries >= 1, s
    assert s.instances == 4 and s.local_keys == 1, s
    assert s.state_reason, s


def test_fallback_when_nothing_listens(key: str) -> None:
    # degrade_rtt is raised so that only the refusal and its retry (asserted below) can send it local.
    lim = rl.Limiter(
        nobody_url(), request_timeout_ms=REQUEST_TIMEOUT_MS, instances=4, retry_delay_ms=20, degrade_rtt_ms=60_000
    )
    assert lim.stats().mode == "normal"
    start = time.monotonic()
    decisions = [lim.acquire(key, 100, 60_000)]
    took_first = time.monotonic() - start
    start = time.monotonic()
    decisions += [lim.acquire(key, 100, 60_000) for _ in range(25)]
    assert time.monotonic() - start < 1.0, "local decisions waited on Redis"
    assert_local_budget(decisions, took_first)
    assert_local_stats(lim.stats(), 26)
    # Other keys get their own local budget.
    d = lim.acquire(key + ":other", 100, 60_000, cost=25)
    assert d.allowed and d.remaining == 0 and d.mode == "local", d
    assert lim.stats().local_keys == 2
    lim.close()
    with pytest.raises(rl.LimiterClosed):
        lim.stats()


def test_async_fallback_when_nothing_listens(key: str) -> None:
    async def main() -> Tuple[List[rl.Decision], float, rl.Stats]:
        lim = rl.AsyncLimiter(nobody_url(), request_timeout_ms=REQUEST_TIMEOUT_MS, instances=4, degrade_rtt_ms=60_000)
        start = time.monotonic()
        decisions = [await lim.acquire(key, 100, 60_000)]
        took_first = time.monotonic() - start
        decisions += [await lim.acquire(key, 100, 60_000) for _ in range(25)]
        stats = lim.stats()  # not a coroutine
        await lim.aclose()
        with pytest.raises(rl.LimiterClosed):
            lim.stats()
        return decisions, took_first, stats

    decisions, took_first, stats = asyncio.run(main())
    assert_local_budget(decisions, took_first)
    assert_local_stats(stats, 26)


def test_fallback_off_raises_backend_unavailable(key: str) -> None:
    url = nobody_url()
    lim = rl.Limiter(url, request_timeout_ms=REQUEST_TIMEOUT_MS, instances=4, local_fallback=False)
    for _ in range(3):
        with pytest.raises(rl.BackendUnavailable):
            lim.acquire(key, 100, 60_000)
    s = lim.stats()
    check_stats_shape(s)
    assert s.mode == "normal" and s.decisions_local == 0 and s.transitions_to_local == 0, s
    assert s.redis_errors >= 1, s

    async def main() -> rl.Stats:
        alim = rl.AsyncLimiter(url, request_timeout_ms=REQUEST_TIMEOUT_MS, local_fallback=False)
        res = await asyncio.gather(*(alim.acquire(key, 100, 60_000) for _ in range(5)), return_exceptions=True)
        assert all(isinstance(r, rl.BackendUnavailable) for r in res), res
        return alim.stats()

    s = asyncio.run(main())
    assert s.mode == "normal" and s.decisions_local == 0, s


def test_memory_stats() -> None:
    lim = rl.Limiter()
    for _ in range(3):
        lim.acquire("k", 10, 1000)
    s = lim.stats()
    check_stats_shape(s)
    assert s.mode == "memory" and s.topology == "memory", s
    assert s.decisions_memory == 3 and s.decisions_normal == 0 and s.decisions_local == 0, s
    assert lim.instance_id is None

    async def main() -> rl.Stats:
        alim = rl.AsyncLimiter("memory://")
        for _ in range(4):
            await alim.acquire("k", 10, 1000)
        assert alim.instance_id is None
        return alim.stats()

    s = asyncio.run(main())
    assert s.mode == "memory" and s.topology == "memory" and s.decisions_memory == 4, s


def test_live_redis_stats(redis_url: str, key: str) -> None:
    lim = rl.Limiter(redis_url, **PATIENT)
    for _ in range(5):
        assert lim.acquire(key, 100, 60_000).mode == "normal"
    s = lim.stats()
    check_stats_shape(s)
    assert s.mode == "normal" and s.topology == "standalone", s
    assert s.decisions_normal == 5 and s.decisions_local == 0 and s.transitions_to_local == 0, s
    assert s.rtt_samples > 0 and s.rtt_max_us >= s.rtt_p50_us > 0, s
    assert isinstance(lim.instance_id, str) and lim.instance_id

    async def main() -> rl.Stats:
        alim = rl.AsyncLimiter(redis_url, **PATIENT)
        for _ in range(3):
            assert (await alim.acquire(key, 100, 60_000)).mode == "normal"
        assert isinstance(alim.instance_id, str) and alim.instance_id != lim.instance_id
        return alim.stats()

    s = asyncio.run(main())
    assert s.mode == "normal" and s.topology == "standalone", s
    assert s.decisions_normal == 3 and s.rtt_samples > 0, s


def test_defaults_and_good_options_open() -> None:
    for url in (None, nobody_url()):
        rl.Limiter(url, retry_delay_ms=0, local_fallback=True, degrade_rtt_ms=60_000, degrade_after_ms=1,
                   recover_rtt_ms=60_000, recover_after_ms=60_000, instances=1_000_000, local_max_keys=10_000_000).close()
        rl.AsyncLimiter(url, local_fallback=False, instances=None, local_max_keys=1).close()


# (options, exception, .argument): every refusal names the keyword.
BAD_OPTIONS: List[Tuple[Dict[str, Any], type, str]] = [
    ({"recover_rtt_ms": 10, "degrade_rtt_ms": 5}, rl.InvalidArgument, "recover_rtt_ms"),
    ({"recover_rtt_ms": 6}, rl.InvalidArgument, "recover_rtt_ms"),  # above the default degrade_rtt (5 ms)
    ({"instances": 0}, rl.InvalidArgument, "instances"),
    ({"instances": 1_000_001}, rl.InvalidArgument, "instances"),
    ({"instances": -1}, rl.InvalidArgument, "instances"),
    ({"instances": True}, rl.InvalidArgumentType, "instances"),
    ({"instances": 4.0}, rl.InvalidArgumentType, "instances"),
    ({"instances": "4"}, rl.InvalidArgumentType, "instances"),
    ({"retry_delay_ms": -1}, rl.InvalidArgument, "retry_delay_ms"),
    ({"retry_delay_ms": 60001}, rl.InvalidArgument, "retry_delay_ms"),
    ({"retry_delay_ms": 0.05}, rl.InvalidArgumentType, "retry_delay_ms"),
    ({"local_fallback": 1}, rl.InvalidArgumentType, "local_fallback"),
    ({"local_fallback": "false"}, rl.InvalidArgumentType, "local_fallback"),
    ({"degrade_rtt_ms": 0}, rl.InvalidArgument, "degrade_rtt_ms"),
    ({"degrade_rtt_ms": True}, rl.InvalidArgumentType, "degrade_rtt_ms"),
    ({"degrade_after_ms": 60_001}, rl.InvalidArgument, "degrade_after_ms"),
    ({"degrade_after_ms": 2**64}, rl.InvalidArgument, "degrade_after_ms"),
    ({"recover_rtt_ms": 0}, rl.InvalidArgument, "recover_rtt_ms"),
    ({"recover_rtt_ms": -5}, rl.InvalidArgument, "recover_rtt_ms"),
    ({"recover_after_ms": 0}, rl.InvalidArgument, "recover_after_ms"),
    ({"recover_after_ms": 1.5}, rl.InvalidArgumentType, "recover_after_ms"),
    ({"local_max_keys": 0}, rl.InvalidArgument, "local_max_keys"),
    ({"local_max_keys": 10_000_001}, rl.InvalidArgument, "local_max_keys"),
    ({"local_max_keys": False}, rl.InvalidArgumentType, "local_max_keys"),
    ({"instances": 2**200}, rl.InvalidArgument, "instances"),
    ({"client_clock": "yes"}, rl.InvalidArgumentType, "client_clock"),
    ({"client_clock": 1}, rl.InvalidArgumentType, "client_clock"),
    ({"key_prefix": [b"rl:"]}, rl.InvalidArgumentType, "key_prefix"),
    ({"no_such_option": 1}, rl.InvalidArgument, "options"),
]


@pytest.mark.parametrize("case", BAD_OPTIONS, ids=lambda c: ",".join(f"{k}={v!r}" for k, v in c[0].items()))
@pytest.mark.parametrize("cls", [rl.Limiter, rl.AsyncLimiter], ids=["sync", "async"])
@pytest.mark.parametrize("memory", [True, False], ids=["memory", "redis"])
def test_bad_options(case: Tuple[Dict[str, Any], type, str], cls: Any, memory: bool) -> None:
    options, exc, argument = case
    url = None if memory else "redis://127.0.0.1:1/"
    with pytest.raises(exc) as info:
        cls(url, **options)
    assert type(info.value) is exc, repr(info.value)
    assert info.value.argument == argument, repr(info.value)
    assert f"`{argument}`" in str(info.value), str(info.value)
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError) == (exc is rl.InvalidArgumentType)
