"""When this broker runs the controller's tick (ingest/replication/controller.py).

Three occasions: the periodic duty (`controller_tick_ms`, 500 ms by default: the holder's look,
the others' lease attempts when `Controller.due` says so), a metadata version not seen before
(a lease released, a broker re-registered, a partition changed: the duty is woken at once, so
the periodic look can be slow), and a peer's dropped connections (the death signal calls
`tick`). Never while this broker's own lease is in doubt or it has left the cluster."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from cluster.duty import Duty
from ingest.replication.controller import Controller


class ControllerRunner:
    def __init__(
        self, controller: Controller, version: Callable[[], int], may_act: Callable[[], bool]
    ) -> None:
        self.controller = controller
        self._version, self._may_act = version, may_act
        self._duty: Duty | None = None
        self._woken_for = -1  # the metadata version the duty was last woken for

    async def tick(self) -> None:
        if self._may_act():
            await asyncio.to_thread(self.controller.tick)

    async def tick_if_due(self) -> None:
        if self.controller.due(self._version()):  # not the controller: seldom
            await self.tick()

    def run(self, duty: Duty) -> asyncio.Task[None]:
        """Start `duty` (whose turn is `tick_if_due`); `refreshed` wakes it from now on."""
        self._duty = duty
        return duty.start()

    def refreshed(self) -> None:
        """After a metadata refresh: a version not seen before wakes the duty."""
        version = self._version()
        if version != self._woken_for and self._duty is not None:
            self._woken_for = version
            self._duty.wake()

    async def stop(self) -> None:
        if self._duty is not None:  # its woken turn too
            await self._duty.stop()
