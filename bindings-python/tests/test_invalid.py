"""Bad inputs give the documented exceptions, name the argument and the value, and send nothing
to Redis (checked on a private server: no key, no script call, not even a connection)."""

from __future__ import annotations

import asyncio
from typing import Any, Callable, List, Tuple

import pytest

import rl

GOOD = ("k", 10, 1000, 1)

# (position, value, exception, text expected in the message)
CASES: List[Tuple[int, Any, type, str]] = [
    (0, None, rl.InvalidArgumentType, "`key`: is None"),
    (0, "", rl.InvalidArgument, "`key`: must not be empty"),
    (0, b"", rl.InvalidArgument, "`key`: must not be empty"),
    (0, 5, rl.InvalidArgumentType, "`key`: is 5 (int)"),
    (0, 1.5, rl.InvalidArgumentType, "`key`: is 1.5 (float)"),
    (0, bytearray(b"k"), rl.InvalidArgumentType, "must be str or bytes"),
    (0, "x" * (rl.MAX_KEY_BYTES + 1), rl.InvalidArgument, "65537 bytes"),
    (0, "\ud800", rl.InvalidArgument, "UTF-8"),
]
for pos, name in ((1, "limit"), (2, "window_ms"), (3, "cost")):
    CASES += [
        (pos, None, rl.InvalidArgumentType, f"`{name}`: is None; must be an int"),
        (pos, -1, rl.InvalidArgument, f"`{name}`: is -1; must not be negative"),
        (pos, 0, rl.InvalidArgument, f"`{name}`: is 0"),
        (pos, float("nan"), rl.InvalidArgumentType, f"`{name}`: is nan, a float"),
        (pos, float("inf"), rl.InvalidArgumentType, f"`{name}`: is inf, a float"),
        (pos, 2**70, rl.InvalidArgument, f"`{name}`: is {2**70}, which does not fit in 64 bits"),
        (pos, 1.5, rl.InvalidArgumentType, f"`{name}`: is 1.5, a float"),
        (pos, 10.0, rl.InvalidArgumentType, f"`{name}`: is 10.0, a float"),
        (pos, True, rl.InvalidArgumentType, f"`{name}`: is True, a bool"),
        (pos, "10", rl.InvalidArgumentType, f"`{name}`: is '10' (str)"),
        (pos, [1], rl.InvalidArgumentType, f"`{name}`: is [1] (list)"),
    ]
CASES += [
    (1, 10**15 + 1, rl.InvalidArgument, "`limit`: is 1000000000000001; must be between 1 and 1000000000000000"),
    (2, rl.MAX_WINDOW_MS + 1, rl.InvalidArgument, "`window_ms`: is 2592000001; must be between 1 and 2592000000"),
    (3, 11, rl.InvalidArgument, "`cost`: is 11, above the limit 10"),
]


def ids(case: Tuple[int, Any, type, str]) -> str:
    pos, value, _, _ = case
    v = repr(value)
    return f"{['key', 'limit', 'window_ms', 'cost'][pos]}={v[:20]}"


def args_with(pos: int, value: Any) -> List[Any]:
    a = list(GOOD)
    a[pos] = value
    return a


@pytest.fixture(scope="module")
def private(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    from conftest import Server

    s = Server()
    request.addfinalizer(s.stop)
    return s


def assert_untouched(server: Any) -> None:
    assert server.call("DBSIZE") == 0
    stats = server.call("INFO", "commandstats").decode()
    assert "cmdstat_eval" not in stats and "cmdstat_del" not in stats, stats
    clients = server.call("INFO", "clients").decode()
    assert "connected_clients:1\r" in clients, "the limiter must not even connect"


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_sync_bad_inputs(private: Any, case: Tuple[int, Any, type, str]) -> None:
    pos, value, exc, text = case
    lim = rl.Limiter(private.url)
    call: Callable[..., Any] = lim.acquire
    with pytest.raises(exc) as info:
        call(*args_with(pos, value))
    assert text in str(info.value), str(info.value)
    assert info.value.argument == ["key", "limit", "window_ms", "cost"][pos]
    # The hierarchy: every one is an rl error and a ValueError; type errors are also TypeErrors.
    assert isinstance(info.value, rl.RateLimitError) and isinstance(info.value, ValueError)
    assert isinstance(info.value, TypeError) == (exc is rl.InvalidArgumentType)
    if pos < 3:
        with pytest.raises(exc):
            lim.peek(*args_with(pos, value)[:3])
    if pos == 0:
        with pytest.raises(exc):
            lim.reset(value)
    lim.close()
    assert_untouched(private)


@pytest.mark.parametrize("case", CASES, ids=ids)
def test_async_bad_inputs(private: Any, case: Tuple[int, Any, type, str]) -> None:
    pos, value, exc, text = case

    async def main() -> None:
        lim = rl.AsyncLimiter(private.url)
        with pytest.raises(exc) as info:
            await lim.acquire(*args_with(pos, value))
        assert text in str(info.value), str(info.value)
        if pos < 3:
            with pytest.raises(exc):
                await lim.peek(*args_with(pos, value)[:3])
        if pos == 0:
            with pytest.raises(exc):
                await lim.reset(value)

    asyncio.run(main())
    assert_untouched(private)


def test_memory_backend_rejects_the_same_inputs() -> None:
    lim = rl.Limiter()
    for pos, value, exc, text in CASES:
        with pytest.raises(exc, match=None) as info:
            lim.acquire(*args_with(pos, value))
        assert text in str(info.value)


def test_index_types_are_ints_but_bool_is_not() -> None:
    class Idx:
        def __index__(self) -> int:
            return 7

    lim = rl.Limiter()
    assert lim.acquire("k", Idx(), 1000).used == 1  # type: ignore[arg-type]
    class MyInt(int):
        pass

    assert lim.acquire("k", MyInt(7), 1000).used == 2
    with pytest.raises(rl.InvalidArgumentType, match="`limit`: is False, a bool"):
        lim.acquire("k", False, 1000)


def test_exceptions_pickle_with_their_argument() -> None:
    import pickle

    with pytest.raises(rl.InvalidArgument) as info:
        rl.Limiter().acquire("k", -1, 1000)
    e = info.value
    again = pickle.loads(pickle.dumps(e))
    assert type(again) is rl.InvalidArgument and again.argument == "limit" and str(again) == str(e)
