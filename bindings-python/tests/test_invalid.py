"""Bad inputs, from the shared table tests/conformance/invalid.json (format in its README): each
row the Python API can express raises the documented exception naming the argument, through the
sync and async limiters, and sends nothing to Redis (checked on a private server: no key, no
script call, not even a connection). Below the table, the Python-only contracts."""

from __future__ import annotations

import asyncio
import json
import pathlib
from collections import Counter
from typing import Any, Dict, List, Optional, Tuple

import pytest

import rl

TABLE = json.loads((pathlib.Path(__file__).resolve().parents[2] / "tests/conformance/invalid.json").read_text())
ROWS: List[Dict[str, Any]] = TABLE["rows"]
FIELDS = {"id", "call", "args", "error", "argument", "needs", "shows", "message_lacks"}

# Every tag of the table: None if Python expresses it, else why not. An unknown tag fails.
NEEDS: Dict[str, Optional[str]] = {
    "dynamic_types": None,
    "compound_values": None,
    "null_key": None,
    "distinct_float": None,
    "float_numbers": "Python floats are a type of their own (the distinct_float rows)",
    "negative": None,
    "beyond_i64": None,
    "beyond_u64": None,
    "inexact_double": None,
    "unknown_option": None,
    "byte_strings": "Python URLs and prefixes are str, always Unicode",
    "lone_surrogate": None,
    "zero_option": None,
}


def value(v: Any) -> Any:
    """A table value as the Python value it stands for."""
    if isinstance(v, list):
        return [value(x) for x in v]
    if not isinstance(v, dict):
        return v
    ((tag, x),) = v.items()
    if tag == "int":
        return int(x)
    if tag == "float":
        return float(x)
    if tag == "bytes_hex":
        return bytes.fromhex(x)
    if tag == "utf16":
        return "".join(chr(int(x[i : i + 4], 16)) for i in range(0, len(x), 4))
    if tag == "repeat":
        return value(x[0]) * x[1]
    if tag == "object":
        return {k: value(y) for k, y in x.items()}
    raise AssertionError(f"unknown value tag {tag!r}")


def skip_reason(row: Dict[str, Any]) -> Optional[str]:
    assert set(row) <= FIELDS, f"{row['id']}: unknown fields {set(row) - FIELDS}"
    assert row["call"] in ("open", "acquire", "peek", "reset", "parse_policies", "acquire_all"), row["call"]
    assert row["error"] in ("invalid_argument", "invalid_type"), row["error"]
    for tag in row.get("needs", []):
        assert tag in NEEDS, f"{row['id']}: unknown need {tag!r}"
        if NEEDS[tag] is not None:
            return f"{tag}: {NEEDS[tag]}"
    return None


EXPRESSIBLE = [r for r in ROWS if skip_reason(r) is None]
SKIPPED = Counter(skip_reason(r) for r in ROWS if skip_reason(r) is not None)


def call_args(row: Dict[str, Any]) -> List[Any]:
    a = dict(TABLE["calls"][row["call"]]["defaults"])
    a.update(row["args"])
    return [value(a[p]) for p in TABLE["calls"][row["call"]]["params"] if p in a]


def composite_args(row: Dict[str, Any]) -> Tuple[List[rl.Rule], Dict[str, Any]]:
    """An acquire_all row's rules (absent fields: acquire's defaults) and keyword arguments."""
    defaults = TABLE["calls"]["acquire"]["defaults"]
    rules = []
    for r in row["args"].get("rules", [{}]):
        f = {**defaults, **r}
        assert set(f) <= {"key", "limit", "window_ms", "cost"}, f
        rules.append(rl.Rule(**{k: value(v) for k, v in f.items()}))
    kw = {"group": value(row["args"]["group"])} if "group" in row["args"] else {}
    return rules, kw


def check(row: Dict[str, Any], e: BaseException) -> None:
    want = rl.InvalidArgumentType if row["error"] == "invalid_type" else rl.InvalidArgument
    assert isinstance(e, want), f"{type(e).__name__}: {e}"
    assert isinstance(e, rl.RateLimitError) and isinstance(e, ValueError)
    assert isinstance(e, TypeError) == (want is rl.InvalidArgumentType), type(e)
    assert getattr(e, "argument", None) == row["argument"], str(e)
    if "shows" in row:
        assert row["shows"] in str(e), str(e)
    if "message_lacks" in row:
        assert row["message_lacks"] not in str(e), str(e)


def raised(call: Any) -> BaseException:
    with pytest.raises(Exception) as info:
        call()
    return info.value


@pytest.fixture(scope="module")
def private(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    from conftest import Server

    s = Server()
    request.addfinalizer(s.stop)
    return s


@pytest.fixture(scope="module")
def limiters(private: Any, request: pytest.FixtureRequest) -> Tuple[rl.Limiter, rl.Limiter, rl.AsyncLimiter]:
    on_redis, memory, on_redis_async = rl.Limiter(private.url), rl.Limiter(), rl.AsyncLimiter(private.url)
    request.addfinalizer(on_redis.close)
    request.addfinalizer(memory.close)
    return on_redis, memory, on_redis_async


def test_the_table_has_rows_for_python() -> None:
    print(f"\npython: {len(EXPRESSIBLE)} rows asserted, {sum(SKIPPED.values())} skipped")
    for why, n in sorted(SKIPPED.items()):
        print(f"  skipped {n} needing {why}")
    assert len(EXPRESSIBLE) + sum(SKIPPED.values()) == len(ROWS) and len(EXPRESSIBLE) > 100


@pytest.mark.parametrize("row", EXPRESSIBLE, ids=[r["id"] for r in EXPRESSIBLE])
def test_row(row: Dict[str, Any], private: Any, limiters: Tuple[rl.Limiter, rl.Limiter, rl.AsyncLimiter]) -> None:
    on_redis, memory, on_redis_async = limiters
    if row["call"] == "open":
        args = row["args"]
        url = [value(args["url"])] if "url" in args else []
        options = {k: value(v) for k, v in args.get("options", {}).items()}
        check(row, raised(lambda: rl.Limiter(*url, **options)))
        check(row, raised(lambda: rl.AsyncLimiter(*url, **options)))
        return
    if row["call"] == "acquire_all":
        rules, kw = composite_args(row)
        options = {k: value(v) for k, v in row["args"].get("options", {}).items()}
        if options:
            # Options rows run on Redis only (tests/conformance/README.md).
            sync, aio = rl.Limiter(private.url, **options), rl.AsyncLimiter(private.url, **options)
            targets: List[Any] = [sync]
        else:
            sync, aio, targets = None, on_redis_async, [on_redis, memory]
        try:
            for lim in targets:
                check(row, raised(lambda: lim.acquire_all(rules, **kw)))

            async def composite() -> BaseException:
                with pytest.raises(Exception) as info:
                    await aio.acquire_all(rules, **kw)
                return info.value

            check(row, asyncio.run(composite()))
        finally:
            if sync is not None:
                sync.close()
                aio.close()
        return
    a = call_args(row)
    if row["call"] == "parse_policies":
        check(row, raised(lambda: rl.parse_policies(*a)))
        return
    for lim in (on_redis, memory):
        check(row, raised(lambda: getattr(lim, row["call"])(*a)))

    async def main() -> BaseException:
        with pytest.raises(Exception) as info:
            await getattr(on_redis_async, row["call"])(*a)
        return info.value

    check(row, asyncio.run(main()))


def test_nothing_reached_redis(private: Any, limiters: Any) -> None:
    """Runs after the rows (pytest keeps file order): the private server saw no call at all."""
    assert private.call("DBSIZE") == 0
    stats = private.call("INFO", "commandstats").decode()
    assert all(f"cmdstat_{c}:" not in stats for c in ("eval", "evalsha", "fcall", "del")), stats
    clients = private.call("INFO", "clients").decode()
    assert "connected_clients:1\r" in clients, "the limiter must not even connect"


# ---- Python-only contracts (no other host has these values) ----------------------------------


def test_bytearray_keys_are_refused_as_a_type() -> None:
    with pytest.raises(rl.InvalidArgumentType, match="must be str or bytes"):
        rl.Limiter().acquire(bytearray(b"k"), 10, 1000)  # type: ignore[arg-type]


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
