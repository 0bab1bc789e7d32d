"""Keeps a node's metadata cache current: the one refresh loop brokers and fetch nodes share.

A refresh runs when Postgres NOTIFYs a change (the node's NotifyHub), every `interval_ms` as a
fallback (a lost notification, or broker leases that change without a version bump), and on
demand (`refresh_now`, `wake`). A failed refresh is logged and retried on the next turn.
`on_refresh` runs on the event loop after each refresh: the broker reconciles its replicas.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from cluster.duty import FailurePolicy
from cluster.metadata_cache import MetadataCache
from cluster.notify_hub import NotifyHub
from metadata.db import NOTIFY_CHANNEL

log = logging.getLogger("tierlog.metadata_follower")

RETRY_PAUSE_S = 0.5  # after a failed refresh, so an outage is not hammered


class MetadataFollower:
    def __init__(
        self,
        cache: MetadataCache,
        notices: NotifyHub,
        interval_ms: int,
        force: bool = False,
        on_refresh: Callable[[], None] = lambda: None,
    ) -> None:
        """`notices`: the node's LISTEN connection. `force`: reload even when the metadata
        version did not move (a fetch node routes by broker liveness, which leases change
        without a version bump)."""
        self.cache = cache
        self._interval_s = interval_ms / 1000
        self._force, self._on_refresh = force, on_refresh
        self._wanted = asyncio.Event()
        self._listener = notices.subscribe(NOTIFY_CHANNEL, self._notified)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    async def load(self) -> None:
        """The first, complete load (before the node serves anything)."""
        await asyncio.to_thread(self.cache.refresh, True)
        self._on_refresh()

    def start(self) -> None:
        """Follow changes from now on: LISTEN, and the loop that refreshes on each wake-up."""
        self._loop = asyncio.get_running_loop()
        self._listener.start()
        self._task = asyncio.create_task(self._run(), name="metadata-refresh")

    async def stop(self) -> None:
        self._stopping = True
        self._listener.stop()
        if self._task is not None:
            self._task.cancel()
            # Bounded: on 3.11 a cancel racing a completed wait can be swallowed; the loop
            # also watches _stopping, so it ends on its next turn either way.
            await asyncio.wait([self._task], timeout=5)

    def wake(self) -> None:
        """Refresh soon, without waiting for it (from the event loop)."""
        self._wanted.set()

    async def refresh_now(self) -> None:
        await asyncio.to_thread(self.cache.refresh, self._force)
        self._on_refresh()

    def _notified(self) -> None:  # the listener's thread
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._wanted.set)

    async def _run(self) -> None:
        # Postgres away: one line per failure; a bug: its traceback, counted (cluster/duty.py).
        policy = FailurePolicy("metadata-refresh", RETRY_PAUSE_S)
        while not self._stopping:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._interval_s):
                    await self._wanted.wait()
            self._wanted.clear()
            try:
                await self.refresh_now()
            except Exception as exc:  # the policy tells an outage from a bug
                policy.failed(exc)
                await asyncio.sleep(RETRY_PAUSE_S)  # prompt: a refresh is wanted once it works
            else:
                policy.succeeded()
