"""What the signed-in key may see of the console's own data (the sampler's history).

Pages that call the cluster's API get the cluster's own answer for the user's key. The
history the sampler keeps is the console's (scraped with the console's key), so before it
is shown the console asks the cluster what this key may see, as the key itself:
- cluster-wide series (throughput, tiering lag, replication health) come from the brokers'
  /metrics: shown to a key the cluster lets read /metrics (DESCRIBE on the cluster when auth
  is on);
- a consumer group's series: shown to a key that may describe the group (the cluster's
  GET /groups lists exactly those).
A missing, expired or refused key is a ConsoleApiError with status 401 (sign in first).
Answers are remembered per key for a few seconds: charts poll every few seconds each."""

from __future__ import annotations

import asyncio
import hashlib
import time
from dataclasses import dataclass

from starlette.requests import Request

from console import auth
from console.cluster_api import ClusterApi, ConsoleApiError

TTL_S = 5.0
MAX_CACHED = 10_000
GROUP_PREFIX = "group:"


@dataclass(frozen=True)
class Rights:
    cluster: bool  # may see cluster-wide metrics
    groups: frozenset[str]  # the consumer groups it may describe

    def may_see(self, series: str) -> bool:
        """A history series (console/history.py, console/group_lag.py names)."""
        if series.startswith(GROUP_PREFIX):
            group = series[len(GROUP_PREFIX) :].rpartition(":")[0]
            return group in self.groups
        return self.cluster


class RightsCache:
    def __init__(self, ttl_s: float = TTL_S) -> None:
        self.ttl_s = ttl_s
        self._cache: dict[str, tuple[float, Rights]] = {}

    async def of(self, api: ClusterApi, key: str | None, fresh: bool = False) -> Rights:
        """`fresh`: ask the cluster again even within the TTL (a group that appeared since)."""
        digest = hashlib.sha256((key or "").encode()).hexdigest()
        now = time.monotonic()
        hit = self._cache.get(digest)
        if hit is not None and hit[0] > now and not fresh:
            return hit[1]
        rights = await _ask(api, key)
        if len(self._cache) >= MAX_CACHED:
            self._cache.clear()
        self._cache[digest] = (now + self.ttl_s, rights)
        return rights


async def _ask(api: ClusterApi, key: str | None) -> Rights:
    listed, cluster = await asyncio.gather(api.get("/groups", key), _may_read_metrics(api, key))
    return Rights(cluster, frozenset(g["name"] for g in listed.get("groups", [])))


async def _may_read_metrics(api: ClusterApi, key: str | None) -> bool:
    try:
        await api.request("HEAD", "/metrics", key)
    except ConsoleApiError as exc:
        if exc.status == 403:
            return False
        raise
    return True


async def rights(request: Request, fresh: bool = False) -> Rights:
    """The signed-in key's rights (ConsoleApiError 401 when it must sign in)."""
    cache: RightsCache = request.app.state.rights
    return await cache.of(request.app.state.api, auth.api_key(request), fresh)
