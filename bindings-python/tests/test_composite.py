"""acquire_all (sync and asyncio), Rule, Policy / parse_policies, render_headers and
problem_body: the core's composite acquire and HTTP fields through the binding, against a real
redis-server and the memory backend."""

from __future__ import annotations

import asyncio
import time
import json
from typing import Iterator

import pytest

import rl


@pytest.fixture
def limiter(redis_url: str) -> Iterator[rl.Limiter]:
    with rl.Limiter(redis_url) as l:
        yield l


def test_all_or_nothing(limiter: rl.Limiter, key: str) -> None:
    a, b, g = "ip:1.2.3.4", "user:42", key  # different slots: one group
    assert limiter.acquire_all([rl.Rule(b, 5, 60_000, cost=5)], g).allowed  # b is full
    d = limiter.acquire_all([rl.Rule(a, 5, 60_000), rl.Rule(b, 5, 60_000)], g)
    assert not d.allowed and d.retry_after_ms > 0 and d.mode == "normal"
    assert [x.allowed for x in d.decisions] == [True, False]
    # Nothing was taken from a, the rule that alone would have admitted: it still holds 5.
    assert limiter.acquire_all([rl.Rule(a, 5, 60_000, cost=5)], g).allowed
    g = key + ":2"
    d = limiter.acquire_all([rl.Rule(a, 5, 60_000, cost=2), rl.Rule(b, 5, 60_000, cost=3)], g)
    assert d.allowed and d.retry_after_ms == 0
    assert [(x.used, x.remaining) for x in d.decisions] == [(2, 3), (3, 2)]


def test_burst_and_daily_on_one_key(limiter: rl.Limiter, key: str) -> None:
    policies = rl.parse_policies("burst: 3/s; daily: 5/d")
    rules = [rl.Rule.from_policy(p, key) for p in policies]
    results = [limiter.acquire_all(rules) for _ in range(4)]
    assert [r.allowed for r in results] == [True, True, True, False]
    denied = results[-1]
    assert [x.allowed for x in denied.decisions] == [False, True]
    assert 0 < denied.retry_after_ms <= 1000
    time.sleep(1.05)
    results = [limiter.acquire_all(rules) for _ in range(3)]
    assert [r.allowed for r in results] == [True, True, False]
    assert [x.allowed for x in results[-1].decisions] == [True, False]  # the daily limit now
    assert results[-1].retry_after_ms > 80_000_000


def test_a_group_puts_keys_of_different_slots_in_one_call(limiter: rl.Limiter, key: str) -> None:
    rules = [rl.Rule(f"ip:{key}", 2, 60_000), rl.Rule(f"user:{key}", 1, 60_000)]
    with pytest.raises(rl.InvalidArgument, match="pass a group") as e:
        limiter.acquire_all(rules)
    assert e.value.argument == "rules"
    assert limiter.acquire_all(rules, group="tenant-1").allowed
    assert not limiter.acquire_all(rules, group=b"tenant-1").allowed  # bytes name the same group
    # Another group is another set of windows.
    assert limiter.acquire_all(rules, group="tenant-2").allowed


def test_asyncio_twin(redis_url: str, key: str) -> None:
    async def go() -> list[rl.CompositeDecision]:
        async with rl.AsyncLimiter(redis_url) as a:
            rules = [rl.Rule(key, 2, 60_000)]
            out = [await a.acquire_all(rules) for _ in range(3)]
            with pytest.raises(rl.InvalidArgument) as e:
                await a.acquire_all([])
            assert e.value.argument == "rules"
            return out

    assert [d.allowed for d in asyncio.run(go())] == [True, True, False]


def test_memory_backend_decides_in_place(key: str) -> None:
    async def go() -> list[bool]:
        a = rl.AsyncLimiter()
        rules = [rl.Rule(key, 1, 60_000)]
        return [(await a.acquire_all(rules)).allowed for _ in range(2)]

    assert asyncio.run(go()) == [True, False]
    with rl.Limiter() as l:
        assert l.acquire_all([rl.Rule(key, 1, 60_000)]).mode == "memory"


@pytest.mark.parametrize(
    "rules, group, argument, says",
    [
        ([], None, "rules", "empty"),
        ([rl.Rule("k", 1, 1000)] * 17, None, "rules", "at most 16"),
        ([rl.Rule("k", 1, 1000)], "", "group", "1 to 1024"),
        ([rl.Rule("k", 1, 1000), rl.Rule("", 1, 1000)], None, "key", "rule 1"),
        ([rl.Rule("k", 0, 1000)], None, "limit", "rule 0"),
        ([rl.Rule("k", 1, 0)], None, "window_ms", "rule 0"),
        ([rl.Rule("k", 1, 1000, cost=2)], None, "cost", "above the limit"),
        ([rl.Rule("k", 9, 1000), rl.Rule("k", 9, 2000, cost=2)], None, "cost", "different costs"),
    ],
)
def test_invalid_calls_name_the_value(limiter: rl.Limiter, rules: list, group: object, argument: str, says: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(rl.InvalidArgument, match=says) as e:
        limiter.acquire_all(rules, group)  # type: ignore[arg-type]
    assert e.value.argument == argument, str(e.value)


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda l: l.acquire_all("k"), "rules"),
        (lambda l: l.acquire_all([("k", 1, 1000)]), "rules"),
        (lambda l: l.acquire_all(5), "rules"),
        (lambda l: l.acquire_all([rl.Rule("k", 1, 1000)], 7), "group"),
        (lambda l: rl.Rule("k", 1.0, 1000), "limit"),
        (lambda l: rl.Rule(None, 1, 1000), "key"),
        (lambda l: rl.Rule("k", 1, 1000, cost=True), "cost"),
    ],
)
def test_wrong_types_name_the_value(limiter: rl.Limiter, call: object, argument: str) -> None:
    with pytest.raises(rl.InvalidArgumentType) as e:
        call(limiter)  # type: ignore[operator]
    assert e.value.argument == argument
    assert isinstance(e.value, TypeError)


def test_policies_parse_in_the_core() -> None:
    ps = rl.parse_policies("burst: 100/s; 5000 per hour")
    assert [(p.name, p.limit, p.window_ms) for p in ps] == [("burst", 100, 1000), ("5000/1h", 5000, 3_600_000)]
    assert [str(p) for p in ps] == ["burst: 100/1s", "5000/1h"]
    assert rl.Policy(5, 1500) == rl.Policy(5, 1500, name="5/1500ms")
    for text, says in [("", "is empty"), ("100/fortnight", "fortnight"), ("a: 1/s; a: 2/m", "twice")]:
        with pytest.raises(rl.InvalidArgument, match=says) as e:
            rl.parse_policies(text)
        assert e.value.argument == "policy"
    with pytest.raises(rl.InvalidArgument) as e:
        rl.Policy(0, 1000)
    assert e.value.argument == "policy"
    with pytest.raises(rl.InvalidArgumentType) as t:
        rl.parse_policies(5)  # type: ignore[arg-type]
    assert t.value.argument == "policy"


def test_render_headers_and_problem_body(key: str) -> None:
    ps = rl.parse_policies("burst: 2/s; daily: 10/d")
    with rl.Limiter() as l:
        rules = [rl.Rule.from_policy(p, key) for p in ps]
        allowed = l.acquire_all(rules)
        l.acquire_all(rules)
        denied = l.acquire_all(rules)
    fields = dict(rl.render_headers(ps, allowed))
    assert fields == {
        "RateLimit-Policy": '"burst";q=2;w=1, "daily";q=10;w=86400',
        "RateLimit": '"burst";r=1;t=1, "daily";r=9;t=86400',
    }
    fields = dict(rl.render_headers(ps, denied, "both"))
    assert fields["Retry-After"] == "1" and fields["X-RateLimit-Remaining"] == "0"
    assert "RateLimit" not in dict(rl.render_headers(ps, denied, "legacy"))
    assert list(dict(rl.render_headers(ps, denied, "none"))) == ["Retry-After"]
    body = json.loads(rl.problem_body(ps, denied))
    assert body["violated-policies"] == ["burst"] and body["status"] == 429
    with pytest.raises(rl.InvalidArgument, match="one policy per rule") as e:
        rl.render_headers(ps[:1], denied)
    assert e.value.argument == "policies"
    with pytest.raises(rl.InvalidArgument, match="ietf") as e:
        rl.render_headers(ps, denied, "fancy")  # type: ignore[arg-type]
    assert e.value.argument == "style"
    with pytest.raises(rl.InvalidArgumentType) as t:
        rl.problem_body(["burst: 2/s"], denied)  # type: ignore[list-item]
    assert t.value.argument == "policies"


def _fits(limiter: rl.Limiter, key: str, group: str) -> bool:
    """Whether one more permit fits ``key``'s window in ``group`` (limit 1), taking it if so."""
    return limiter.acquire_all([rl.Rule(key, 1, 60_000)], group).allowed


def test_reset_in_group_clears_that_group_only(limiter: rl.Limiter, key: str) -> None:
    for g in ("tenant-1", "tenant-2"):
        assert _fits(limiter, key, g) and not _fits(limiter, key, g)
    assert limiter.acquire(key, 1, 60_000).allowed  # the ungrouped window: full too
    limiter.reset_in_group(key, "tenant-1")
    assert _fits(limiter, key, "tenant-1"), "the group's window was cleared"
    assert not _fits(limiter, key, "tenant-2"), "another group's window is untouched"
    assert limiter.peek(key, 1, 60_000).used == 1, "the ungrouped window is untouched"
    limiter.reset_in_group(key, None)  # no group: reset
    assert limiter.peek(key, 1, 60_000).used == 0
    assert not _fits(limiter, key, "tenant-1")
    with pytest.raises(rl.InvalidArgument, match="1 to 1024") as e:
        limiter.reset_in_group(key, "")
    assert e.value.argument == "group"
    with pytest.raises(rl.InvalidArgumentType) as t:
        limiter.reset_in_group(key, 7)  # type: ignore[arg-type]
    assert t.value.argument == "group"


@pytest.mark.parametrize("url", ["redis", "memory"])
def test_reset_in_group_asyncio(redis_url: str, key: str, url: str) -> None:
    async def go() -> None:
        async with rl.AsyncLimiter(redis_url if url == "redis" else None) as a:
            fits = lambda g: a.acquire_all([rl.Rule(key, 1, 60_000)], g)  # noqa: E731
            for g in ("tenant-1", "tenant-2"):
                assert (await fits(g)).allowed and not (await fits(g)).allowed
            assert (await a.acquire(key, 1, 60_000)).allowed
            await a.reset_in_group(key, b"tenant-1")  # bytes name the same group
            assert (await fits("tenant-1")).allowed
            assert not (await fits("tenant-2")).allowed
            assert (await a.peek(key, 1, 60_000)).used == 1
            with pytest.raises(rl.InvalidArgument) as e:
                await a.reset_in_group("", "tenant-1")
            assert e.value.argument == "key"

    asyncio.run(go())
