"""Consumer group lag over time for the Groups page's trend chart: a history source the
console's sampler runs every few seconds (GET /groups, then each group's describe: lag in
records and the age of its oldest unconsumed record), kept in the sampler's bounded rings.

With auth on, the sampler uses the console's own key (`tierlog console --api-key`); without
one, or when the ACLs refuse it, the charts fill only from the pages users open (every
describe a page makes is recorded too).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any
from urllib.parse import quote

from console.cluster_api import ClusterApi, ConsoleApiError
from console.history import History, Sampler, Source

log = logging.getLogger("tierlog.console.group_lag")

MAX_GROUPS = 50  # sampled per tick: a console must not hammer a cluster with many groups
# At most this often: each describe reads one record per lagging partition, and four points
# a minute draw an hour's trend well enough.
EVERY_S = 15.0
RECORDS, AGE_S = "records", "age_s"  # the chart's series, as /groups/{g}/lag.json names them


def series_name(group: str, what: str) -> str:
    return f"group:{group}:{what}"


def group_path(group: str) -> str:
    return "/groups/" + quote(group, safe="")


def record(history: History, group: str, described: dict[str, Any], at: float) -> None:
    """One point of the group's lag: records behind, and the oldest unconsumed record's age."""
    lag = described.get("lag")
    age_ms = described.get("lag_ms")
    history.add(series_name(group, RECORDS), at, float(lag or 0))
    if age_ms is not None:
        history.add(series_name(group, AGE_S), at, age_ms / 1000.0)


def lag_source(sampler: Sampler) -> Source:
    """The sampler's group-lag source, with the sampler's key."""
    last = [float("-inf")]

    async def sample(api: ClusterApi, history: History, at: float) -> None:
        if at - last[0] < max(EVERY_S, history.interval_s) - 0.001:
            return
        last[0] = at
        try:
            listed = await api.get("/groups", sampler.api_key)
        except ConsoleApiError as exc:
            if exc.status in (401, 403):
                return  # no key (or no right) to list groups: pages record what they show
            raise
        names = [g["name"] for g in listed.get("groups", [])][:MAX_GROUPS]

        async def one(name: str) -> None:
            try:
                record(history, name, await api.get(group_path(name), sampler.api_key), at)
            except ConsoleApiError as exc:  # deleted meanwhile, or not ours to see
                log.debug("group %s not sampled: %s", name, exc)

        await asyncio.gather(*(one(n) for n in names))

    return sample


def chart_data(history: History, group: str) -> dict[str, Any]:
    """What charts.js draws: {"window_s", "series": {"records": [...], "age_s": [...]}}."""
    return {
        "window_s": history.window_s,
        "interval_s": history.interval_s,
        "now": time.time(),
        "series": {what: history.series(series_name(group, what)) for what in (RECORDS, AGE_S)},
    }
