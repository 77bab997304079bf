"""prepare_policies and acquire_policies (sync and asyncio, Redis and memory): the middleware's
one call per request. The decision must be acquire_all's, and the fields and body exactly what
render_headers and problem_body give for it (one renderer, the core's); bad input is refused
naming the argument the caller wrote."""

from __future__ import annotations

import asyncio
import json
from typing import Any, Optional

import pytest

import rl

BACKENDS = ["redis", "memory"]


def url_for(backend: str, redis_url: str) -> Optional[str]:
    return redis_url if backend == "redis" else None


def check_pair(prepared: rl.PreparedPolicies, key: str, first: Any, denied: Any) -> None:
    decision, fields, body = first
    assert decision.allowed and [d.used for d in decision.decisions] == [2, 2]
    assert fields == rl.render_headers(prepared.policies, decision, "both")
    assert body is None
    decision, fields, body = denied
    assert not decision.allowed
    assert [d.allowed for d in decision.decisions] == [False, True]
    assert fields == rl.render_headers(prepared.policies, decision, "both")
    assert fields[-1][0] == "Retry-After"
    assert body == rl.problem_body(prepared.policies, decision)
    assert json.loads(body)["violated-policies"] == ["burst"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_sync_decides_like_acquire_all_and_renders_like_render_headers(backend: str, redis_url: str, key: str) -> None:
    text = "burst: 2/10s; daily: 100/d"
    prepared = rl.prepare_policies(text, "both")
    assert prepared.policies == rl.parse_policies(text) and prepared.style == "both"
    with rl.Limiter(url_for(backend, redis_url)) as l:
        first = l.acquire_policies(prepared, key, 2)
        denied = l.acquire_policies(prepared, key)
        check_pair(prepared, key, first, denied)
        # The same key through acquire_all sees the same window.
        rules = [rl.Rule.from_policy(p, key) for p in prepared.policies]
        assert l.acquire_all(rules).decisions[1].used == 2


@pytest.mark.parametrize("backend", BACKENDS)
def test_async_decides_like_acquire_all_and_renders_like_render_headers(backend: str, redis_url: str, key: str) -> None:
    prepared = rl.prepare_policies("burst: 2/10s; daily: 100/d", "both")

    async def main() -> None:
        async with rl.AsyncLimiter(url_for(backend, redis_url)) as l:
            first = await l.acquire_policies(prepared, key, cost=2)
            denied = await l.acquire_policies(prepared, key)
            check_pair(prepared, key, first, denied)

    asyncio.run(main())


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_group_and_policies_given_as_objects(backend: str, redis_url: str, key: str) -> None:
    prepared = rl.prepare_policies([rl.Policy(1, 60_000, "one")])
    assert prepared.style == "ietf"
    with rl.Limiter(url_for(backend, redis_url)) as l:
        assert l.acquire_policies(prepared, "k", group=key)[0].allowed
        decision, fields, _ = l.acquire_policies(prepared, "k", group=key)
        assert not decision.allowed
        assert [n for n, _ in fields] == ["RateLimit-Policy", "RateLimit", "Retry-After"]
        assert l.acquire_policies(prepared, "k", group=key + ":other")[0].allowed


def test_with_leases_the_decisions_come_from_a_lease(redis_url: str, key: str) -> None:
    prepared = rl.prepare_policies("1000/s")
    with rl.Limiter(redis_url, leases="on") as l:
        modes = [l.acquire_policies(prepared, key)[0].mode for _ in range(50)]
    assert modes.count("lease") >= 40, modes


def test_prepare_policies_refuses_bad_input_naming_it() -> None:
    cases: list[tuple[Any, Any, type, str, str]] = [
        ("10/fortnight", None, rl.InvalidArgument, "policies", "fortnight"),
        ("a: 1/s; a: 2/m", None, rl.InvalidArgument, "policies", "twice"),
        (42, None, rl.InvalidArgumentType, "policies", "policy string or a list of rl.Policy"),
        (["1/s"], None, rl.InvalidArgumentType, "policies", "item 0 is '1/s'"),
        ([], None, rl.InvalidArgument, "policies", "is empty"),
        ([rl.Policy(1, 1000, "a"), rl.Policy(2, 60_000, "a")], None, rl.InvalidArgument, "policies", "twice"),
        ("1/s", "draft", rl.InvalidArgument, "style", "'draft'|\"draft\""),
        ("1/s", 7, rl.InvalidArgumentType, "style", "str"),
    ]
    for policies, style, kind, argument, says in cases:
        with pytest.raises(kind, match=says) as e:
            rl.prepare_policies(policies, style)
        assert e.value.argument == argument, (policies, style)


@pytest.mark.parametrize("backend", BACKENDS)
def test_acquire_policies_refuses_bad_input_naming_it(backend: str, redis_url: str) -> None:
    prepared = rl.prepare_policies("5/s")
    cases: list[tuple[dict[str, Any], type, str, str]] = [
        ({"policies": rl.parse_policies("5/s")}, rl.InvalidArgumentType, "policies", "prepare_policies"),
        ({"policies": "5/s"}, rl.InvalidArgumentType, "policies", "prepare_policies"),
        ({"key": 42}, rl.InvalidArgumentType, "key", "str or bytes"),
        ({"cost": -1}, rl.InvalidArgument, "cost", "-1"),
        ({"cost": "x"}, rl.InvalidArgumentType, "cost", "int"),
        ({"group": 3}, rl.InvalidArgumentType, "group", "str or bytes"),
    ]

    async def on_async(args: dict[str, Any]) -> None:
        async with rl.AsyncLimiter(url_for(backend, redis_url)) as a:
            await a.acquire_policies(**args)

    with rl.Limiter(url_for(backend, redis_url)) as l:
        for change, kind, argument, says in cases:
            args: dict[str, Any] = {"policies": prepared, "key": "k", **change}
            with pytest.raises(kind, match=says) as e:
                l.acquire_policies(**args)
            assert e.value.argument == argument, change
            with pytest.raises(kind, match=says) as e:
                asyncio.run(on_async(args))
            assert e.value.argument == argument, change
    with pytest.raises(rl.LimiterClosed):
        l.acquire_policies(prepared, "k")
