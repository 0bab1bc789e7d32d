"""The periodic expiry sweep: members whose session lapsed are removed even when nobody
touches their group, so the group's target, state and describe stay true."""

from __future__ import annotations

import asyncio
import logging

from failures.logged import log_failure
from groups.coordinator import GroupCoordinator
from groups.deps import Blocking

log = logging.getLogger("tierlog.groups.sweeper")


async def sweep_once(coordinator: GroupCoordinator, run: Blocking) -> int:
    """Expire lapsed members in every group that has some; how many were removed."""
    removed = 0
    for name in await run(coordinator.repo.lapsed):
        removed += len(await run(coordinator.expire, name))
    return removed


async def sweep_forever(coordinator: GroupCoordinator, run: Blocking, every_s: float) -> None:
    # Every node sweeps: the group lock makes concurrent sweeps of one group harmless (the
    # second finds nothing left to expire), and no node has to be elected for it.
    while True:
        await asyncio.sleep(every_s)
        try:
            removed = await sweep_once(coordinator, run)
        except Exception as exc:
            log_failure(log, "group expiry sweep failed", exc)
            continue
        if removed:
            log.info("expired group members", extra={"members": removed})
