"""The broker's event-loop lag: how late a timer set for now + INTERVAL_S fires.

Everything the broker serves (HTTP, the Kafka listener, replication, the lease heartbeat)
shares one event loop, so a request that holds it delays every other one and, past the
lease, costs the broker its registration (issue 24). The histogram
tierlog_event_loop_lag_seconds shows it: a healthy loop stays in the lowest buckets."""

from __future__ import annotations

import asyncio
import logging

from ingest.metrics import EVENT_LOOP_LAG

log = logging.getLogger("tierlog.broker")

INTERVAL_S = 0.1
WARN_S = 0.2  # a lag past this is logged: something held the loop (or the host starved it)


async def watch_loop_lag() -> None:
    """Until cancelled: sleep INTERVAL_S, record how much later than that it woke."""
    loop = asyncio.get_running_loop()
    while True:
        started = loop.time()
        await asyncio.sleep(INTERVAL_S)
        lag = max(0.0, loop.time() - started - INTERVAL_S)
        EVENT_LOOP_LAG.observe(lag)
        if lag > WARN_S:
            log.warning("event loop lagged", extra={"lag_s": round(lag, 3)})
