"""A replica's corrupt frame put back in place from a peer's whole copy (issue 26).

Frames are the same bytes on every replica, so a replica that finds a bad frame of its own
asks its peers for that one frame (`/internal/.../frames/{offset}`) and writes the first
copy that is the same frame over its bad bytes (ingest/log/frame_repair.py checks the CRC
and that offset, size and leader epoch are those of its own index and epoch history). The
leader is asked first, then the other in-sync replicas, then the replicas out of the ISR:
a copy is taken for what it is, not for who holds it, so a leader can take a committed
frame back from a follower that left the ISR. Nothing is elected and nothing is cut: the
frames around the bad one stay as they are.

Outcomes: REPAIRED (or the frame was whole again already); REFETCH, a follower whose leader
holds a whole frame there that is not the same bytes (the two copies were compacted apart)
— it truncates below it and fetches the rest again (corruption.repair); NO_COPY, no peer
reached holds a whole copy — the frame stays unserved and is tried again later.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from enum import StrEnum

import httpx

from ingest.log.frame_repair import FrameMismatch
from ingest.replication.partition import Partition, Role

log = logging.getLogger("tierlog.corruption")


class Outcome(StrEnum):
    REPAIRED = "repaired"
    REFETCH = "refetch"
    NO_COPY = "no_copy"


def peers(state: Partition) -> list[int]:
    """Whom to ask, in order: the leader, the rest of the ISR, the replicas out of it."""
    others = [r for r in state.replicas if r != state.me]
    lead = [r for r in others if r == state.leader_id]
    isr = [r for r in others if r in state.isr and r not in lead]
    return [*lead, *isr, *[r for r in others if r not in lead and r not in isr]]


async def _copy(client: httpx.AsyncClient, url: str, state: Partition, at: int) -> bytes | None:
    """The peer's whole copy of the frame at `at`, or None (it has none, or is away)."""
    path = f"{url}/internal/topics/{state.topic}/partitions/{state.partition}/frames/{at}"
    try:
        r = await client.get(path, params={"topic_id": state.topic_id})
    except httpx.HTTPError as exc:
        log.debug("peer unreachable for a frame", extra={"url": url, "error": str(exc)})
        return None
    return r.content if r.status_code == 200 else None


async def repair(
    state: Partition, at: int, urls: Callable[[int], str | None], client: httpx.AsyncClient
) -> tuple[Outcome, int | None]:
    """Put back the frame at `at` of `state`'s log from the first peer holding a whole copy
    of it: the outcome, and which broker's copy was taken."""
    refetch = False
    for peer in peers(state):
        url = urls(peer)
        if url is None:
            continue
        data = await _copy(client, url, state, at)
        if data is None:
            continue
        try:
            await asyncio.to_thread(state.log.replace_frame, at, data)
        except FrameMismatch as exc:
            # The leader's whole frame differs from ours: refetching from it repairs.
            refetch |= peer == state.leader_id and state.role is Role.FOLLOWER
            log.warning(
                "a peer's copy of a corrupt frame is not the same frame; not taken",
                extra=_fields(state, at, peer) | {"why": str(exc)},
            )
            continue
        return Outcome.REPAIRED, peer
    return (Outcome.REFETCH if refetch else Outcome.NO_COPY), None


def _fields(state: Partition, at: int, peer: int) -> dict[str, object]:
    return {"topic": state.topic, "partition": state.partition, "offset": at, "peer": peer}


def repaired_log(state: Partition, at: int, peer: int) -> None:
    state.metrics.corrupt_replaced.labels(state.topic, str(state.partition)).inc()
    log.warning(
        "corrupt frame repaired in place from a peer's whole copy",
        extra=_fields(state, at, peer)
        | {"partition_role": state.role.value, "peer_in_isr": peer in state.isr},
    )


def wanted(states: Sequence[Partition]) -> list[Partition]:
    """The partitions with a corrupt frame to put back (their log usable)."""
    return [
        s
        for s in states
        if s.repair_from is not None and s.log.failure is None and s.role is not Role.OFFLINE
    ]
