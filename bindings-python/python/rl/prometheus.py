"""rl's metrics for ``prometheus_client`` (``pip install 'rl-limiter[prometheus]'``).

    >>> from prometheus_client import REGISTRY
    >>> from rl.prometheus import RlCollector
    >>> REGISTRY.register(RlCollector(limiter))
    >>> REGISTRY.register(RlCollector({"api": api_limiter, "login": login_limiter}))

A custom collector: each scrape reads ``limiter.stats()`` (no I/O, no lock held across calls)
and turns it into the families of ``rl._metrics.METRICS``, the table rl-gen generates from the
core, so this module holds no metric list of its own.

Several limiters go in ONE collector, as a mapping from a name you choose to the limiter: each
sample gets ``limiter="<name>"``. One collector per registry keeps each family's HELP/TYPE
lines once (two collectors exporting the same family names would be rejected by the registry
or, unchecked, produce an exposition Prometheus refuses). The names are fixed when the collector
is built, so the label stays bounded; never name a limiter after a key. A closed limiter
exports nothing.
"""

from __future__ import annotations

import typing as t

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ._errors import LimiterClosed
from ._metrics import METRICS
from ._rl import Stats

__all__ = ["RlCollector", "LIMITER_LABEL"]

#: The label that names the limiter when a collector exports several.
LIMITER_LABEL = "limiter"


class _HasStats(t.Protocol):
    def stats(self) -> Stats: ...


class RlCollector(Collector):
    """Exports one limiter (``RlCollector(limiter)``) or several, each under the label
    ``limiter`` (``RlCollector({"api": a, "login": b})``). ``const_labels`` are added to every
    sample (e.g. ``{"service": "checkout"}``); keep their values bounded too."""

    def __init__(
        self,
        limiters: t.Union[_HasStats, t.Mapping[str, _HasStats]],
        *,
        const_labels: t.Optional[t.Mapping[str, str]] = None,
    ) -> None:
        if isinstance(limiters, t.Mapping):
            self._limiters: t.List[t.Tuple[t.Tuple[str, ...], _HasStats]] = [((name,), lim) for name, lim in limiters.items()]
            self._names: t.Tuple[str, ...] = (LIMITER_LABEL,)
        else:
            self._limiters = [((), limiters)]
            self._names = ()
        consts = dict(const_labels or {})
        clash = set(consts) & (set(self._names) | {f[3] for f in METRICS if f[3] is not None})
        if clash:
            raise ValueError(f"const_labels must not use rl's own label names: {sorted(clash)}")
        self._const_names = tuple(consts)
        self._const_values = tuple(consts.values())

    def collect(self) -> t.Iterator[Metric]:
        snapshots: t.List[t.Tuple[t.Tuple[str, ...], t.Dict[str, t.Union[str, int]]]] = []
        for values, lim in self._limiters:
            try:
                snapshots.append((values, lim.stats().as_dict()))
            except LimiterClosed:
                continue
        for name, kind, help_text, label, samples in METRICS:
            family = self._family(name, kind, help_text, label)
            for values, stats in snapshots:
                for label_value, field, scale, mode in samples:
                    if mode is not None:
                        value = 1.0 if stats["mode"] == mode else 0.0
                    else:
                        assert field is not None
                        raw = stats[field]
                        assert isinstance(raw, int)
                        value = raw * scale
                    own = (label_value,) if label_value is not None else ()
                    family.add_metric(list(self._const_values + values + own), value)
            yield family

    def describe(self) -> t.Iterator[Metric]:
        """The families without samples, so a registry checks for duplicate names at
        ``register()`` without reading any stats."""
        for name, kind, help_text, label, _ in METRICS:
            yield self._family(name, kind, help_text, label)

    def _family(self, name: str, kind: str, help_text: str, label: t.Optional[str]) -> t.Union[CounterMetricFamily, GaugeMetricFamily]:
        labels = list(self._const_names + self._names) + ([label] if label is not None else [])
        if kind == "counter":
            # prometheus_client drops _total from the family name and puts it back on the sample.
            return CounterMetricFamily(name, help_text, labels=labels)
        return GaugeMetricFamily(name, help_text, labels=labels)
