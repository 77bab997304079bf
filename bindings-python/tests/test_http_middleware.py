"""rl.starlette / rl.fastapi under a real uvicorn, and rl.flask under a real gunicorn, on free
loopback ports, against real redis-server (rl-harness); httpx as the client; the rate-limit
fields parsed with http-sfv. Each behaviour runs against both servers ("asgi", "wsgi")."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List

import httpx
import pytest

import rl
from conftest import Server
from http_apps import AppServer, max_in_window, ratelimit_fields

KINDS = ["asgi", "wsgi"]
Start = Callable[..., AppServer]


@pytest.fixture
def start(redis_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Start]:
    """Starts an app server; every one started is stopped (by pid) after the test."""
    started: List[AppServer] = []

    def go(kind: str, url: str = redis_url, workers: int = 1, **env: str) -> AppServer:
        e: Dict[str, str] = {"RL_URL": url, "RL_PREFIX": f"http:{time.time_ns()}:"}
        e.update(env)
        s = AppServer(kind, e, tmp_path, workers=workers)
        started.append(s)
        return s

    yield go
    for s in started:
        s.stop()


@pytest.mark.parametrize("kind", KINDS)
def test_headers_on_allowed_and_denied_responses(start: Start, kind: str) -> None:
    app = start(kind, RL_GLOBAL="burst: 3/s; daily: 1000/d")
    with httpx.Client(base_url=app.base) as c:
        for left in (2, 1, 0):
            r = c.get("/hello")
            assert r.status_code == 200
            policy, state = ratelimit_fields(r)
            assert policy == {"burst": {"q": 3, "w": 1}, "daily": {"q": 1000, "w": 86400}}
            assert state["burst"]["r"] == left and state["burst"]["t"] >= 1
            assert state["daily"]["r"] == 997 + left
            assert "Retry-After" not in r.headers
        r = c.get("/hello")
    assert r.status_code == 429
    assert r.headers["content-type"].startswith(rl.PROBLEM_CONTENT_TYPE)
    body = r.json()
    assert body["violated-policies"] == ["burst"] and body["status"] == 429
    policy, state = ratelimit_fields(r)
    assert state["burst"]["r"] == 0 and state["daily"]["r"] == 997
    assert int(r.headers["Retry-After"]) >= state["burst"]["t"] >= 1
    assert [p for p, _ in app.served()] == ["/hello"] * 3


@pytest.mark.parametrize("kind", KINDS)
def test_per_route_limit_is_its_own_window_beside_the_global_one(start: Start, kind: str) -> None:
    app = start(kind, RL_GLOBAL="100/s")
    paths = ["/route"] + (["/route-raw"] if kind == "asgi" else [])
    with httpx.Client(base_url=app.base) as c:
        for path in paths:
            name = "route" if path == "/route" else "raw"
            for left in (1, 0):
                r = c.get(path)
                assert r.status_code == 200, (path, r.text)
                policy, state = ratelimit_fields(r)
                # Both limits' members: the global policy and the route's own.
                assert policy == {"100/1s": {"q": 100, "w": 1}, name: {"q": 2, "w": 1}}, path
                assert state[name]["r"] == left
            r = c.get(path)
            assert r.status_code == 429
            assert r.json()["violated-policies"] == [name]
            assert int(r.headers["Retry-After"]) >= ratelimit_fields(r)[1][name]["t"]
        # The global window still has room: another route is served.
        assert c.get("/hello").status_code == 200


@pytest.mark.parametrize("kind", KINDS)
def test_trusted_proxy_header_is_honoured_only_when_configured(start: Start, kind: str) -> None:
    plain = start(kind, RL_GLOBAL="2/s")
    proxied = start(kind, RL_GLOBAL="2/s", RL_PROXY="X-Forwarded-For")
    with httpx.Client(base_url=plain.base) as c:
        codes = [c.get("/hello", headers={"X-Forwarded-For": f"10.0.0.{i}"}).status_code for i in range(3)]
    assert codes == [200, 200, 429], "an unconfigured X-Forwarded-For must not split the peer's limit"
    with httpx.Client(base_url=proxied.base) as c:
        codes = [c.get("/hello", headers={"X-Forwarded-For": f"10.0.0.{i}"}).status_code for i in range(3)]
        assert codes == [200, 200, 200], "each forwarded client has its own window"
        # The entry the trusted proxy appended (the rightmost) is the client; a spoofed left part is ignored.
        same = [c.get("/hello", headers={"X-Forwarded-For": f"6.6.6.{i}, 10.0.0.9"}).status_code for i in range(3)]
    assert same == [200, 200, 429]


@pytest.mark.parametrize("kind", KINDS)
def test_exempt_requests_are_neither_counted_nor_limited(start: Start, kind: str) -> None:
    app = start(kind, RL_GLOBAL="1/5s")
    with httpx.Client(base_url=app.base) as c:
        assert c.get("/hello").status_code == 200
        assert c.get("/hello").status_code == 429
        for _ in range(5):
            r = c.get("/free")
            assert r.status_code == 200 and r.json() == {"free": True}
            assert "RateLimit" not in r.headers and "RateLimit-Policy" not in r.headers


@pytest.mark.parametrize("kind", KINDS)
def test_denied_hook_sees_the_decision_and_may_replace_the_response(start: Start, kind: str) -> None:
    app = start(kind, RL_GLOBAL="limit: 1/5s")
    with httpx.Client(base_url=app.base) as c:
        assert c.get("/hooked").status_code == 200
        assert app.hooks() == []
        r = c.get("/hooked")
        assert r.status_code == 429 and r.json() == {"custom": True}
        # The core's fields are added to the hook's response too.
        assert ratelimit_fields(r)[1]["limit"]["r"] == 0
        assert int(r.headers["Retry-After"]) >= 1
        r = c.get("/hello")
        assert r.status_code == 429 and r.json()["violated-policies"] == ["limit"]
    hooks = app.hooks()
    assert [h["path"] for h in hooks] == ["/hooked", "/hello"]
    assert all(0 < h["retry_after_ms"] <= 5000 for h in hooks)


@pytest.mark.parametrize("kind", KINDS)
def test_exactness_under_concurrent_load(start: Start, kind: str) -> None:
    limit, window_ms = 10, 1000
    app = start(kind, workers=2, RL_GLOBAL=f"{limit}/s")
    stop = time.monotonic() + 3.0
    codes: List[int] = []

    def client() -> None:
        with httpx.Client(base_url=app.base) as c:
            while time.monotonic() < stop:
                codes.append(c.get("/hello").status_code)

    threads = [threading.Thread(target=client) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    times = [ms for path, ms in app.served() if path == "/hello"]
    assert codes.count(200) == len(times) > limit, "load must span several windows"
    assert codes.count(429) > len(times), "load must be above the limit"
    assert set(codes) <= {200, 429}
    # The handler's own record of what it served (the deciding times): never above the limit.
    assert max_in_window(times, window_ms) <= limit


def test_async_middleware_does_not_block_the_event_loop(start: Start, server: Server) -> None:
    # No local fallback: a limited request waits on Redis (up to the 3 s timeout, then fails open).
    app = start("asgi", url=server.url, RL_GLOBAL="100/s", RL_TIMEOUT_MS="3000", RL_OPTIONS='{"local_fallback": false}')
    with httpx.Client(base_url=app.base) as c:
        assert c.get("/hello").status_code == 200  # connected
    server.freeze()
    done: List[float] = []
    t0 = time.monotonic()

    def limited() -> None:
        with httpx.Client(base_url=app.base, timeout=30) as c:
            c.get("/hello")
            done.append(time.monotonic() - t0)

    threads = [threading.Thread(target=limited) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    with httpx.Client(base_url=app.base, timeout=5) as c:
        t1 = time.monotonic()
        r = c.get("/free")
        free_s = time.monotonic() - t1
    in_flight = 4 - len(done)
    server.thaw()
    for t in threads:
        t.join(30)
    assert r.status_code == 200
    assert in_flight == 4, f"limited requests finished while Redis was frozen: {done}"
    assert free_s < 1.0, f"an exempt request waited {free_s:.2f} s behind requests waiting on a frozen Redis"
    assert len(done) == 4

