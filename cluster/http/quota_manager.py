"""Per-principal byte-rate quotas on this node (Kafka's ClientQuotaManager).

Quotas come from Postgres (metadata/quotas.py), reloaded in the background every few seconds;
until the first load every principal is unlimited. Each (kind, principal) with a quota gets a
RateWindow; a principal over its rate is told how long to wait. Like Kafka's, quotas are per
node: a principal spreading load over N brokers may reach N times its rate in the cluster.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from enum import Enum

from cluster import metrics
from cluster.http.rate_window import RateWindow
from metadata.quotas import QuotaTable

log = logging.getLogger("tierlog.quotas")

CLUSTER_PRINCIPAL = "cluster"  # internal traffic: never throttled
ANONYMOUS = "User:ANONYMOUS"
REFRESH_S = 3.0


class QuotaKind(str, Enum):  # noqa: UP042 (the value is a metric label)
    PRODUCE = "produce"
    FETCH = "fetch"

    @property
    def key(self) -> str:
        return "producer_byte_rate" if self is QuotaKind.PRODUCE else "consumer_byte_rate"


class QuotaManager:
    def __init__(
        self,
        load: Callable[[], QuotaTable] | None,
        refresh_s: float = REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._load = load  # None: no quota store (every principal is unlimited)
        self.refresh_s = refresh_s
        self.clock = clock
        self.table = QuotaTable()
        self._loaded_at = -float("inf")
        self._refreshing: asyncio.Task[None] | None = None
        self._windows: dict[tuple[QuotaKind, str], RateWindow] = {}

    def quota(self, kind: QuotaKind, principal: str) -> int | None:
        if principal == CLUSTER_PRINCIPAL:
            return None
        self._maybe_refresh()
        return self.table.rate(principal, kind.key)

    def throttle_ms(self, kind: QuotaKind, principal: str) -> int:
        """How long `principal` must wait before more `kind` bytes (0: go ahead)."""
        quota = self.quota(kind, principal)
        window = self._windows.get((kind, principal))
        if quota is None or window is None:
            return 0
        throttle = window.throttle_s(quota, self.clock())
        return max(1, round(throttle * 1000)) if throttle > 0 else 0

    def record(self, kind: QuotaKind, principal: str, nbytes: int) -> None:
        """Count bytes against a principal that has a quota (others are not tracked)."""
        if nbytes <= 0 or self.quota(kind, principal) is None:
            return
        window = self._windows.get((kind, principal))
        if window is None:
            window = self._windows[(kind, principal)] = RateWindow()
        window.record(nbytes, self.clock())

    # -- the cached quota table ---------------------------------------------------------------

    def _maybe_refresh(self) -> None:
        """Start a background reload when the table is stale; answers use the old one."""
        if self._load is None or self.clock() - self._loaded_at < self.refresh_s:
            return
        if self._refreshing is not None and not self._refreshing.done():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._loaded_at = self.clock()  # failed loads retry after refresh_s, not per request
        self._refreshing = loop.create_task(self._refresh(self._load), name="quota-refresh")

    async def _refresh(self, load: Callable[[], QuotaTable]) -> None:
        try:
            self.table = await asyncio.to_thread(load)
        except Exception:
            log.warning("could not load client quotas; keeping the previous ones", exc_info=True)
            return
        now = self.clock()
        # Windows of principals gone quiet are dropped: the map stays as small as the traffic.
        for key in [k for k, w in self._windows.items() if w.idle(now)]:
            del self._windows[key]
        metrics.QUOTA_ENTITIES.set(len(self.table.entries))
