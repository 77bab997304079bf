"""Type-checked (mypy --strict, by test.sh), not run by pytest: what a user writes, with the
types the stubs must give it. `type: ignore` lines must stay errors (warn_unused_ignores)."""

from __future__ import annotations

import asyncio
from typing import Literal

from typing_extensions import assert_type

import rl


def sync_use(url: str) -> bool:
    with rl.Limiter(url, key_prefix="app:", request_timeout_ms=200) as lim:
        d = lim.acquire("api:orders", 5000, 1000)
        assert_type(d, rl.Decision)
        assert_type(d.allowed, bool)
        assert_type(d.retry_after_ms, int)
        assert_type(d.mode, str)
        assert_type(lim.peek(b"api:orders", 5000, 1000, ), rl.Decision)
        assert_type(lim.reset("api:orders"), None)
        assert_type(lim.backend, Literal["redis", "memory", "closed"])
        assert_type(lim.redis_key("k"), bytes)
        lim.acquire("k", 10, 1000, cost=2)
        lim.acquire("k", 10.0, 1000)  # type: ignore[arg-type]
        lim.acquire(42, 10, 1000)  # type: ignore[arg-type]
        lim.acquire("k", 10, 1000, 500)
        rl.Limiter(url, "app:")  # type: ignore[misc]
        assert_type(lim.acquire_policies(rl.prepare_policies("10/s"), "k", group="g")[0].allowed, bool)
        d.allowed = False  # type: ignore[misc]
        return d.allowed


def fallback_and_stats(url: str) -> int:
    lim = rl.Limiter(url, retry_delay_ms=20, local_fallback=True, degrade_rtt_ms=10, degrade_after_ms=200,
                     recover_rtt_ms=5, recover_after_ms=1000, instances=4, local_max_keys=50_000)
    rl.Limiter(url, instances=None, local_fallback=False, client_clock=True)
    rl.Limiter(url, client_clock="yes")  # type: ignore[arg-type]
    rl.Limiter(url, retry_delay=50)  # type: ignore[call-arg]
    opts: rl.LimiterOptions = {"request_timeout_ms": 200, "client_clock": False}
    rl.AsyncLimiter(url, **opts)
    rl.Limiter(url, local_fallback=1)  # type: ignore[arg-type]
    rl.Limiter(url, retry_delay_ms=0.05)  # type: ignore[arg-type]
    s = lim.stats()
    assert_type(s, rl.Stats)
    assert_type(s.mode, str)
    assert_type(s.topology, str)
    assert_type(s.state_reason, str)
    assert_type(s.decisions_local, int)
    assert_type(s.rtt_p99_us, int)
    assert_type(s.as_dict(), "dict[str, str | int]")
    assert_type(lim.instance_id, "str | None")
    s.mode = "normal"  # type: ignore[misc]
    alim = rl.AsyncLimiter(url, local_fallback=False, instances=2)
    assert_type(alim.stats(), rl.Stats)
    assert_type(alim.instance_id, "str | None")
    return s.decisions_normal + s.decisions_local


async def async_use(url: str) -> int:
    async with rl.AsyncLimiter(url) as lim:
        d = await lim.acquire("api:orders", 5000, 1000, cost=1)
        assert_type(d, rl.Decision)
        t = asyncio.create_task(lim.peek("api:orders", 5000, 1000))
        assert_type(await t, rl.Decision)
        assert_type(await lim.reset("k"), None)
        await lim.ping()
        prepared = rl.prepare_policies("burst: 100/s; 5000/h", "both")
        assert_type(prepared, rl.PreparedPolicies)
        decision, fields, body = await lim.acquire_policies(prepared, "ip:1.2.3.4", cost=2)
        assert_type(decision, rl.CompositeDecision)
        assert_type(fields, "list[tuple[str, str]]")
        assert_type(body, "str | None")
        rl.prepare_policies("1/s", "draft")  # type: ignore[arg-type]
        await lim.acquire_policies(rl.parse_policies("1/s"), "k")  # type: ignore[arg-type]
        await lim.aclose()
        return d.remaining


def errors() -> str:
    try:
        rl.Limiter().acquire("", 1, 1)
    except rl.InvalidArgumentType as e:
        assert_type(e, rl.InvalidArgumentType)
        return "type"
    except rl.InvalidArgument as e:
        assert_type(e.argument, "str | None")
        return e.argument or ""
    except (rl.BackendUnavailable, rl.BackendError, rl.ClockSkewError, rl.LimiterClosed) as e:
        assert_type(e, "rl.BackendUnavailable | rl.BackendError | rl.ClockSkewError | rl.LimiterClosed")
        return str(e)
    except rl.RateLimitError:
        return "other"
    return ""


def prometheus_use(url: str) -> None:
    from prometheus_client import CollectorRegistry

    from rl.prometheus import RlCollector

    registry = CollectorRegistry()
    registry.register(RlCollector(rl.Limiter(url)))
    registry.register(RlCollector({"api": rl.Limiter(url), "login": rl.AsyncLimiter(url)}, const_labels={"service": "shop"}))
    RlCollector(rl.Limiter(url), const_labels={"service": 1})  # type: ignore[dict-item]
    RlCollector("redis://")  # type: ignore[arg-type]
