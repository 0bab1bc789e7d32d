"""A dead broker found in well under a lease: failover without waiting for the lapse.

A follower whose replication connection to its leader drops (refused, or reset or closed by
the peer; never a timeout) names the leader as a suspect to every broker, through a
Postgres NOTIFY. The controller re-checks at once, with a connection of its own to the
suspect's advertised URL (when the suspect is the controller itself, every broker that
hears of it does; the controller lease fences their writes, so one of them wins):

- any HTTP answer, or a timeout, proves nothing: a paused broker still holds its port, a
  partitioned one drops packets. The broker lease decides, as before (the safety net);
- a refused connection means no process listens there; and if the Postgres session the
  broker holds while its process lives (named by metadata.brokers.session_name) is gone
  too, the process is: the suspect's registration (that incarnation only, so a broker that
  came back is never hit) ends now, and the controller elects in the same breath.

Fencing stays exact: both proofs hold only for a process that is gone. A broker shutting
down has closed its port but holds its session until it has handed its partitions over and
deregistered; a paused one keeps both. A refusal is the kernel's word that nothing listens;
a firewall that forges refusals (REJECT rules) between live brokers, while Postgres also
lost the broker's session, would void it: not a supported network (docs/design.md).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import httpx

from cluster.internal_http import PeerLink, internal_async_client, internal_transport
from cluster.notify_hub import NotifyHub
from ingest.replication.controller import Controller
from metadata.brokers import SUSPECT_CHANNEL, BrokerRepo
from metadata.controller_lease import ControllerLease

log = logging.getLogger("tierlog.death_signal")

REPORT_EVERY_S = 0.5  # per suspect: a fetcher retrying a refused leader reports it once
SESSION_GRACE_S = 0.5  # how long a refused suspect's session may take to go
PROBE_TIMEOUT = httpx.Timeout(2.0, connect=1.0)


def dropped(exc: httpx.HTTPError) -> bool:
    """The peer's end of the connection is gone (refused, reset, closed), not just slow."""
    return isinstance(exc, (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError))


class DeathSignal:
    def __init__(
        self,
        me: int,
        brokers: BrokerRepo,
        controller: Controller,
        notices: NotifyHub,
        tick: Callable[[], Awaitable[None]],
        token: Callable[[], str],
        *,
        link: PeerLink = internal_transport,
    ) -> None:
        self.me, self.brokers, self.controller = me, brokers, controller
        self._lease = ControllerLease(brokers.engine)
        self._tick = tick
        self._client = internal_async_client(token, PROBE_TIMEOUT, link)
        # `notices` connects as this process's named session (metadata.brokers.session_url):
        # has_session() looks for it, so this subscription is the last one a broker stops.
        self._listener = notices.subscribe(SUSPECT_CHANNEL, _nothing, self._heard)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reported: dict[int, float] = {}
        self._checking: set[int] = set()
        self._tasks: set[asyncio.Task[Any]] = set()

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._listener.start()

    async def stop(self) -> None:
        self._listener.stop()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=5)
        await self._client.aclose()

    # -- the follower's side -------------------------------------------------------------------

    def connection_dropped(self, peer: int) -> None:
        """A replica fetcher's connection to `peer` dropped (called on the loop)."""
        now = asyncio.get_running_loop().time()  # real time: this paces load, not a protocol
        if now - self._reported.get(peer, -math.inf) < REPORT_EVERY_S:
            return
        self._reported[peer] = now
        self._spawn(asyncio.to_thread(self.brokers.report_suspect, peer))

    # -- the controller's side ----------------------------------------------------------------

    def _heard(self, payload: str) -> None:
        """A NOTIFY on the listener's thread: re-check on the loop."""
        if self._loop is not None and payload.isdigit():
            self._loop.call_soon_threadsafe(self._recheck_soon, int(payload))

    def _recheck_soon(self, suspect: int) -> None:
        if suspect != self.me and suspect not in self._checking:
            self._spawn(self.recheck(suspect))

    async def recheck(self, suspect: int) -> bool:
        """True when `suspect` was found dead and its lease ended (then the controller ticked)."""
        self._checking.add(suspect)
        try:
            reg = await asyncio.to_thread(self.brokers.get, suspect)
            if reg is None or not reg.alive or not await self._mine_to_check(suspect):
                return False
            if not await self._refused(reg.url):
                return False
            if not await self._session_gone(suspect):
                return False  # alive (shutting down, say): its lease decides
            ended = await asyncio.to_thread(self.brokers.end_lease, suspect, reg.incarnation)
            if ended:
                log.warning(
                    "broker refuses connections: its lease ended now, its leaderships move",
                    extra={"broker_id": self.me, "dead_broker": suspect, "url": reg.url},
                )
                await self._tick()
            return ended
        finally:
            self._checking.discard(suspect)

    async def _mine_to_check(self, suspect: int) -> bool:
        """The controller re-checks; every broker does when the suspect is the controller, or
        when no broker holds the lease now (the next controller must not miss the news)."""
        if self.controller.epoch is not None:
            return True
        holder, _ = await asyncio.to_thread(self._lease.holder)
        return holder is None or holder == suspect

    async def _session_gone(self, suspect: int) -> bool:
        """Postgres drops a killed process's session within moments of its connections'
        reset (which may be what we heard first); a live process's stays."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SESSION_GRACE_S
        while await asyncio.to_thread(self.brokers.has_session, suspect):
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    async def _refused(self, url: str) -> bool:
        try:
            await self._client.get(f"{url}/healthz")
        except httpx.ConnectError:
            return True  # nothing listens there
        except httpx.HTTPError:
            return False  # slow, paused or cut off: the lease decides
        return False

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coro, name="death-signal")
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            # Postgres away or the like: the lease still ends in time, so just say so.
            log.info(
                "re-checking a suspect broker failed; its lease decides",
                extra={"broker_id": self.me, "error": repr(task.exception())},
            )


def _nothing() -> None:
    """The suspect channel's NOTIFYs carry their news in the payload."""
