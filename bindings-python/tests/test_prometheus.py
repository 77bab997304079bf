"""rl.prometheus: a real limiter on real Redis, its collector served by prometheus_client's own
HTTP server, scraped with a real HTTP client and read back with prometheus_client's text parser
(not ours)."""

from __future__ import annotations

import urllib.request
from typing import Dict, Iterator, Tuple

import pytest
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.parser import text_string_to_metric_families

import rl
from rl._metrics import METRICS
from rl.prometheus import RlCollector

from conftest import run_script

Series = Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float]


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def scrape(registry: CollectorRegistry) -> Iterator[object]:
    """Serves `registry` on a free loopback port; calling the fixture's value scrapes it over HTTP
    and returns (family names, every sample by (name, sorted labels))."""
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    port = server.server_address[1]

    def get() -> Tuple[Dict[str, str], Series]:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            assert r.status == 200
            text = r.read().decode()
        kinds: Dict[str, str] = {}
        series: Series = {}
        for fam in text_string_to_metric_families(text):
            kinds[fam.name] = fam.type
            for s in fam.samples:
                series[(s.name, tuple(sorted(s.labels.items())))] = s.value
        return kinds, series

    try:
        yield get
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def expected(stats: rl.Stats, extra: Tuple[Tuple[str, str], ...] = ()) -> Series:
    """What the table says each sample must be, computed here from stats() independently of the
    collector's code path (the parser gives floats)."""
    d = stats.as_dict()
    out: Series = {}
    for name, _kind, _help, label, samples in METRICS:
        for label_value, field, scale, mode in samples:
            labels = extra + (((label, label_value),) if label is not None and label_value is not None else ())
            value = float(d["mode"] == mode) if mode is not None else float(d[field or ""]) * scale  # type: ignore[operator]
            out[(name, tuple(sorted(labels)))] = value
    return out


def test_http_scrape_equals_stats_and_the_decisions_made(redis_url: str, key: str, registry: CollectorRegistry, scrape) -> None:  # type: ignore[no-untyped-def]
    # Every call goes to Redis (no cached denials), which stays "normal" however slow this
    # machine is: the counts are then exactly the calls made.
    with rl.Limiter(redis_url, denial_cache=False, degrade_rtt_ms=60_000) as lim:
        registry.register(RlCollector(lim))
        decisions = [lim.acquire(key, 4, 60_000) for _ in range(7)]
        denied = sum(not d.allowed for d in decisions)
        assert denied == 3
        before = lim.stats()
        kinds, series = scrape()
        after = lim.stats()

    # Every family of the generated table is present, with its kind (the parser drops _total).
    for name, kind, _help, _label, _samples in METRICS:
        family = name[: -len("_total")] if kind == "counter" else name
        assert kinds.get(family) == kind, (name, kinds.get(family))

    assert series[("rl_decisions_total", (("mode", "normal"),))] == 7
    assert series[("rl_denials_total", (("mode", "normal"),))] == 3
    assert series[("rl_mode", (("mode", "normal"),))] == 1
    assert series[("rl_mode", (("mode", "local"),))] == 0
    assert series[("rl_redis_rtt_seconds", (("quantile", "1"),))] > 0

    # Every sample equals stats(); the state's age only grows between the two snapshots.
    want = expected(before)
    age = ("rl_state_seconds", ())
    # Bounds scaled as the collector scales (by the table's factor): x * 0.001 and x / 1e3 differ
    # in the last bit for some x, which failed this whenever both snapshots had the same age.
    (scale,) = [s[2] for name, *_, samples in METRICS if name == "rl_state_seconds" for s in samples]
    assert before.state_ms * scale <= series[age] <= after.state_ms * scale
    got = {k: v for k, v in series.items() if k[0] != "rl_state_seconds" and not k[0].endswith("_created")}
    del want[age]
    # The fleet's size is learned by heartbeat, in the background: it may change between the two
    # snapshots, and the scrape shows one of them.
    fleet = ("rl_instances", ())
    if fleet in want and before.instances != after.instances:
        assert got.pop(fleet) in (before.instances, after.instances)
        del want[fleet]
    assert got == want


def test_several_limiters_in_one_collector_by_limiter_label(redis_url: str, key: str, registry: CollectorRegistry, scrape) -> None:  # type: ignore[no-untyped-def]
    api = rl.Limiter(redis_url, degrade_rtt_ms=60_000)
    login = rl.Limiter()  # the memory backend
    closed = rl.Limiter()
    closed.close()
    try:
        registry.register(RlCollector({"api": api, "login": login, "gone": closed}, const_labels={"service": "shop"}))
        for _ in range(4):
            api.acquire(key, 2, 60_000)
        for _ in range(5):
            login.acquire(key, 1, 60_000)
        _, series = scrape()
        sv = (("service", "shop"),)
        # With the denial cache (the default), the 4th call's denial is replayed without Redis.
        assert series[("rl_decisions_total", (("limiter", "api"), ("mode", "normal")) + sv)] == 3
        assert series[("rl_denials_total", (("limiter", "api"), ("mode", "normal")) + sv)] == 1
        assert series[("rl_denials_cached_total", (("limiter", "api"),) + sv)] == 1
        assert series[("rl_decisions_total", (("limiter", "login"), ("mode", "memory")) + sv)] == 5
        assert series[("rl_denials_total", (("limiter", "login"), ("mode", "memory")) + sv)] == 4
        assert series[("rl_mode", (("limiter", "login"), ("mode", "memory")) + sv)] == 1
        # Every sample carries the limiter's name and the constant label; the closed one exports
        # nothing; label values are bounded: the names given, and the table's own values.
        limiters = {dict(labels).get("limiter") for (_, labels) in series}
        assert limiters == {"api", "login"}
        assert all(dict(labels).get("service") == "shop" for (_, labels) in series)
        table_values = {v for f in METRICS for (v, *_rest) in f[4]}
        for _, labels in series:
            for k, v in labels:
                assert k in ("limiter", "service") or v in table_values, (k, v)
    finally:
        api.close()
        login.close()


def test_const_labels_cannot_shadow_rl_labels() -> None:
    lim = rl.Limiter()
    with pytest.raises(ValueError, match="mode"):
        RlCollector(lim, const_labels={"mode": "x"})
    with pytest.raises(ValueError, match="limiter"):
        RlCollector({"a": lim}, const_labels={"limiter": "x"})
    # One limiter has no limiter label of its own, so a constant one is the user's to set.
    RlCollector(lim, const_labels={"limiter": "api"})
    lim.close()


def test_registry_refuses_a_second_collector_of_the_same_families(registry: CollectorRegistry) -> None:
    # describe() names the families, so a second collector (the mistake the limiter label
    # avoids) fails at register(), not with a broken exposition at scrape time.
    a, b = rl.Limiter(), rl.Limiter()
    registry.register(RlCollector(a))
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        registry.register(RlCollector(b))
    a.close()
    b.close()


def test_core_package_does_not_import_prometheus_client() -> None:
    r = run_script("import sys, rl; rl.Limiter().acquire('k', 1, 1000); print('prometheus_client' in sys.modules)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"
