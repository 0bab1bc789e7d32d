"""The console's own metric history: a sampler in the console process scrapes every live
broker's Prometheus /metrics every few seconds into bounded rings (the last hour), so the
charts need no storage service. Other pages add sources of their own (group lag) with
`Sampler.add_source`."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from prometheus_client.parser import text_string_to_metric_families

from console.cluster_api import ClusterApi, ConsoleApiError

log = logging.getLogger("tierlog.console.history")

# Counters charted as rates (per second, summed over brokers): series name → sample name.
RATES = {
    "produce_records_per_s": "tierlog_produce_records_total",
    "produce_bytes_per_s": "tierlog_produce_bytes_total",
    "fetch_records_per_s": "tierlog_fetch_records_total",
}
# Gauges a partition's leader alone reports: summed over brokers.
LEADER_GAUGES = {
    "tiering_lag_records": "tierlog_partition_tiering_lag_records",
    "under_replicated": "tierlog_under_replicated_partitions",
    "offline_replicas": "tierlog_offline_replicas",
}
# Gauges every replica reports for itself: the largest per partition, then summed...
REPLICA_GAUGES = {"tiering_lag_bytes": "tierlog_remote_copy_lag_bytes"}
# ... or the largest of all (the oldest segment still waiting anywhere).
REPLICA_MAX_GAUGES = {"tiering_lag_seconds": "tierlog_remote_copy_lag_seconds"}
LEADERSHIPS = "tierlog_partitions_led"


class History:
    """Named series of (unix seconds, value), each a ring of `window_s / interval_s` points."""

    def __init__(self, window_s: float = 3600.0, interval_s: float = 5.0) -> None:
        self.window_s = window_s
        self.interval_s = interval_s
        self._points = max(2, int(window_s / interval_s) + 1)
        self._series: dict[str, deque[tuple[float, float]]] = {}
        self.last_error: str | None = None
        self.last_sample: float | None = None

    def add(self, name: str, at: float, value: float) -> None:
        ring = self._series.get(name)
        if ring is None:
            ring = self._series[name] = deque(maxlen=self._points)
        ring.append((at, value))

    def series(self, name: str) -> list[tuple[float, float]]:
        cutoff = time.time() - self.window_s
        return [p for p in self._series.get(name, ()) if p[0] >= cutoff]

    def names(self) -> list[str]:
        return sorted(self._series)


@dataclass
class BrokerSample:
    """What one scrape of one broker gave: counter totals and gauges by labels."""

    counters: dict[str, float] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)
    per_partition: dict[str, dict[tuple[str, str], float]] = field(default_factory=dict)


def parse_metrics(text: str) -> BrokerSample:
    wanted_sum = set(RATES.values()) | set(LEADER_GAUGES.values()) | {LEADERSHIPS}
    wanted_partition = set(REPLICA_GAUGES.values()) | set(REPLICA_MAX_GAUGES.values())
    out = BrokerSample()
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name in wanted_sum:
                target = out.counters if s.name.endswith("_total") else out.gauges
                target[s.name] = target.get(s.name, 0.0) + float(s.value)
            elif s.name in wanted_partition:
                key = (s.labels.get("topic", ""), s.labels.get("partition", ""))
                out.per_partition.setdefault(s.name, {})[key] = float(s.value)
    return out


Source = Callable[[ClusterApi, History, float], Awaitable[None]]


class Sampler:
    """Scrapes the brokers every `history.interval_s` seconds while the console runs."""

    def __init__(self, api: ClusterApi, history: History, api_key: str | None) -> None:
        self.api = api
        self.history = history
        self.api_key = api_key
        self._previous: dict[str, tuple[float, dict[str, float]]] = {}
        self._sources: list[Source] = []
        self.leaderships: dict[str, float] = {}  # broker URL → partitions it leads, last scrape

    def add_source(self, source: Source) -> None:
        self._sources.append(source)

    async def _broker_urls(self) -> list[str]:
        try:
            doc = await self.api.get("/brokers", self.api_key)
        except ConsoleApiError as exc:
            if exc.status not in (401, 403):
                raise
            return [self.api.base_url]  # no key for /brokers: the one broker we know
        return [b["url"] for b in doc.get("brokers", []) if b.get("alive")]

    async def _scrape(self, url: str) -> BrokerSample | None:
        try:
            return parse_metrics(await self.api.text_of(url, "/metrics", self.api_key))
        except (ConsoleApiError, ValueError) as exc:
            log.info("scraping %s failed: %s", url, exc)
            return None

    def _rate(self, url: str, at: float, counters: dict[str, float]) -> dict[str, float]:
        previous = self._previous.get(url)
        self._previous[url] = (at, counters)
        if previous is None or at <= previous[0]:
            return {}
        dt = at - previous[0]
        rates = {}
        for name, value in counters.items():
            before = previous[1].get(name, 0.0)
            # A restarted broker's counters start again from zero.
            rates[name] = (value - before if value >= before else value) / dt
        return rates

    def _record(self, at: float, samples: dict[str, BrokerSample]) -> None:
        rates = [self._rate(url, at, s.counters) for url, s in samples.items()]
        if any(rates):
            for series, metric in RATES.items():
                self.history.add(series, at, sum(r.get(metric, 0.0) for r in rates))
        for series, metric in LEADER_GAUGES.items():
            self.history.add(series, at, sum(s.gauges.get(metric, 0.0) for s in samples.values()))
        for series, metric in REPLICA_GAUGES.items():
            largest: dict[tuple[str, str], float] = {}
            for s in samples.values():
                for key, value in s.per_partition.get(metric, {}).items():
                    largest[key] = max(largest.get(key, 0.0), value)
            self.history.add(series, at, sum(largest.values()))
        for series, metric in REPLICA_MAX_GAUGES.items():
            values = [v for s in samples.values() for v in s.per_partition.get(metric, {}).values()]
            self.history.add(series, at, max(values, default=0.0))
        self.leaderships = {url: s.gauges.get(LEADERSHIPS, 0.0) for url, s in samples.items()}

    async def sample_once(self) -> None:
        at = time.time()
        urls = await self._broker_urls()
        scraped = await asyncio.gather(*(self._scrape(u) for u in urls))
        samples = {u: s for u, s in zip(urls, scraped, strict=True) if s is not None}
        self._previous = {u: p for u, p in self._previous.items() if u in samples}
        self._record(at, samples)
        for source in self._sources:
            await source(self.api, self.history, at)
        self.history.last_sample = at

    async def run(self) -> None:
        while True:
            try:
                await self.sample_once()
                self.history.last_error = None
            except ConsoleApiError as exc:
                self.history.last_error = f"{exc.name}: {exc.message}"
            except Exception as exc:  # a broken scrape must not stop the history
                log.exception("sampling failed")
                self.history.last_error = f"UNKNOWN_SERVER_ERROR: {exc}"
            await asyncio.sleep(self.history.interval_s)


def latest(history: History, names: Iterable[str]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name in names:
        points = history.series(name)
        out[name] = points[-1][1] if points else None
    return out
