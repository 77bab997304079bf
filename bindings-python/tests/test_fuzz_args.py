"""Random arguments across the FFI (Hypothesis): keys of any bytes, text or size, limits, windows
and costs of any size or type, option names and values of any type, rule lists and policy text.
Every call returns a well-formed decision or raises rl.InvalidArgument (or its subclass
InvalidArgumentType) naming an argument: never a crash, never a NativePanicError, never another
exception. Decisions go to a real redis-server (the session's shared one)."""

from __future__ import annotations

import os
from typing import Any, Callable, Optional, TypeVar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rl

T = TypeVar("T")

EXAMPLES = int(os.environ.get("RL_FUZZ_EXAMPLES", "150"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)

ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=12),
    st.binary(max_size=12),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.just(object()),
)
EDGES = [0, 1, 2, rl.MAX_PERMITS, rl.MAX_PERMITS + 1, rl.MAX_WINDOW_MS, rl.MAX_WINDOW_MS + 1,
         2**53, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1, 2**64, -1, -(2**63) - 1, 10**40]
NUMBER = st.one_of(st.integers(1, 100), st.sampled_from(EDGES), st.integers(), ANY)
KEY = st.one_of(
    st.text(max_size=30),
    st.binary(max_size=30),
    st.sampled_from(["", "x" * rl.MAX_KEY_BYTES, "x" * (rl.MAX_KEY_BYTES + 1), "\ud800", "{}", "}{", "\x00"]),
    st.builds(lambda n: b"k" * n, st.sampled_from([rl.MAX_KEY_BYTES, rl.MAX_KEY_BYTES + 1, 1 << 20])),
    ANY,
)


OUTCOMES = {"ok": 0, "refused": 0}


def both_outcomes(run: Callable[[], None]) -> None:
    """Runs a Hypothesis property; both outcomes must occur (one that never admits tests little)."""
    OUTCOMES.update(ok=0, refused=0)
    run()
    assert OUTCOMES["ok"] > 0 and OUTCOMES["refused"] > 0, OUTCOMES


def typed(call: Callable[[], T]) -> Optional[T]:
    """The call's result, or None if it raised InvalidArgument naming an argument."""
    try:
        r = call()
        OUTCOMES["ok"] += 1
        return r
    except rl.InvalidArgument as e:
        OUTCOMES["refused"] += 1
        assert not isinstance(e, rl.NativePanicError)
        assert isinstance(e.argument, str) and e.argument, repr(e)
        assert str(e)
        return None


def well_formed(d: Any) -> None:
    assert isinstance(d, rl.Decision)
    assert isinstance(d.allowed, bool)
    assert d.used >= 0 and d.remaining >= 0 and d.retry_after_ms >= 0 and d.reset_after_ms >= 0
    assert d.mode in rl.MODES and d.now_ms > 0


@pytest.fixture(scope="module")
def limiter(redis_url: str) -> Any:
    with rl.Limiter(redis_url, local_fallback=False) as lim:
        yield lim


def test_random_acquire_peek_and_reset_arguments(limiter: rl.Limiter) -> None:
    @SETTINGS
    @given(key=KEY, limit=NUMBER, window=NUMBER, cost=NUMBER)
    def prop(key: Any, limit: Any, window: Any, cost: Any) -> None:
        d = typed(lambda: limiter.acquire(key, limit, window, cost))
        if d is not None:
            well_formed(d)
        p = typed(lambda: limiter.peek(key, limit, window))
        if p is not None:
            well_formed(p)
        typed(lambda: limiter.reset(key))
        typed(lambda: limiter.redis_key(key))

    both_outcomes(prop)


OPTION_NAME = st.one_of(st.sampled_from(rl.OPTIONS), st.text(max_size=12))
OPTION_VALUE = st.one_of(
    st.sampled_from([None, True, False, 0, 1, 5, 64, 65, 1000, 60_000, 60_001, -1, 2**64, 1.5, float("nan"),
                     "", "auto", "off", "on", "rl:", "a{b}", "\ud800", "x" * 1025]),
    ANY,
)


def test_random_options_open_or_raise_a_typed_error() -> None:
    @SETTINGS
    @given(options=st.dictionaries(OPTION_NAME, OPTION_VALUE, max_size=4))
    def prop(options: dict) -> None:
        lim = typed(lambda: rl.Limiter(None, **options))
        if lim is not None:
            well_formed(lim.acquire("k", 5, 1000))
            lim.close()

    both_outcomes(prop)


def test_random_non_url_values_are_refused_as_typed_errors() -> None:
    @SETTINGS
    @given(url=st.one_of(ANY, st.text(max_size=30).filter(lambda u: "://" not in u)))
    def prop(url: Any) -> None:
        # Only values that cannot name a host: a fuzzed host name would be looked up in DNS.
        lim = typed(lambda: rl.Limiter(url))
        if lim is not None:
            lim.close()

    both_outcomes(prop)


# In range, one cost: admitted or denied, unless the keys' slots differ without a group.
GOOD_RULE = st.builds(rl.Rule, st.sampled_from(["a", "b"]), st.integers(1, 100), st.integers(1, 100_000))
RULE = st.builds(lambda k, l, w, c: typed(lambda: rl.Rule(k, l, w, c)), KEY, NUMBER, NUMBER, NUMBER)


def test_random_rule_lists(limiter: rl.Limiter) -> None:
    @SETTINGS
    @given(
        rules=st.one_of(st.lists(RULE, max_size=18), st.lists(GOOD_RULE, min_size=1, max_size=4), ANY),
        group=st.one_of(st.none(), st.just("g"), KEY),
    )
    def prop(rules: Any, group: Any) -> None:
        if isinstance(rules, list):
            rules = [r if r is not None else rl.Rule("k", 1, 1000) for r in rules]
        c = typed(lambda: limiter.acquire_all(rules, group))
        if c is not None:
            assert isinstance(c, rl.CompositeDecision) and isinstance(c.allowed, bool)
            assert len(c.decisions) == len(rules)
            for d in c.decisions:
                well_formed(d)

    both_outcomes(prop)


POLICY_PIECES = ["1", "100", "0", "99999999999999999999", "/", " per ", "PER", "s", "ms", "m", "hour",
                 "d", "month", "year", ";", ",", "|", ":", "name", "\"", "\\", " ", "\u20ac", "a\u20ac",
                 "\U0001F600", "5 a\u20ac/s"]


def test_random_policy_text() -> None:
    @SETTINGS
    @given(
        text=st.one_of(
            st.text(max_size=30),
            st.lists(st.sampled_from(POLICY_PIECES), max_size=10).map("".join),
            st.tuples(st.integers(0, 2000), st.sampled_from(["/", " per "]), st.sampled_from(["s", "ms", "2m", "hour", "x", ""])).map(
                lambda t: f"{t[0]}{t[1]}{t[2]}"
            ),
            ANY,
        )
    )
    def prop(text: Any) -> None:
        ps = typed(lambda: rl.parse_policies(text))
        if ps is not None:
            assert ps and all(isinstance(p, rl.Policy) and 1 <= p.limit <= rl.MAX_PERMITS for p in ps)

    both_outcomes(prop)
