"""What the cold manifest says of a partition's tiers, for describe and for a 416 that points
at the cold tier. Each call makes one trip off the event loop."""

from __future__ import annotations

import asyncio
import logging
from typing import NamedTuple

from failures.logged import log_failure
from ingest.replication.partition import Partition
from ingest.tiered.seams import ColdManifestApi
from logformat.errors import ErrorCode, TierlogError
from metadata.types import TopicIdPartition

log = logging.getLogger("tierlog.remote_log")


class TierStatus(NamedTuple):
    cold: tuple[int, int] | None  # [start, end) of the committed cold range
    tiered_end: int | None
    log_start: int | None = None  # the cross-tier log start retention or DeleteRecords left
    cold_bytes: int = 0  # bytes of the committed cold files


class TierStatusReader:
    def __init__(self, manifest: ColdManifestApi) -> None:
        self._manifest = manifest

    async def of_partitions(self, topic_id: str, partitions: list[int]) -> dict[int, TierStatus]:
        """Cold range, tiered end, log start and cold bytes of each partition."""
        return await asyncio.to_thread(self._read, topic_id, partitions)

    def _read(self, topic_id: str, partitions: list[int]) -> dict[int, TierStatus]:
        out = {}
        for p in partitions:
            tp = TopicIdPartition(topic_id, p)
            cold = self._manifest.cold_range(tp)
            end = cold[1] if cold is not None else None
            nbytes = self._manifest.cold_bytes(tp) if cold is not None else 0
            starts = (self._manifest.log_start_offset(tp), self._manifest.deleted_before(tp))
            known = [s for s in starts if s is not None]
            out[p] = TierStatus(cold, end, max(known) if known else None, nbytes)
        return out

    async def out_of_range(self, state: Partition, offset: int) -> TierlogError | None:
        """An OFFSET_OUT_OF_RANGE naming the cold tier for an offset below the local log
        start, when the manifest has a cold range; None when it has none."""
        try:
            cold = await asyncio.to_thread(self._manifest.cold_range, state.tp)
        except Exception as exc:
            log_failure(log, "reading the cold manifest failed", exc)
            return None
        if cold is None:
            return None
        lso, leo = state.log.log_start_offset, state.log.log_end_offset
        inside = cold[0] <= offset < cold[1]
        where = "is in the cold tier" if inside else "is below the log start (cold tier"
        detail = f" [{cold[0]}, {cold[1]})" + ("" if inside else ")")
        return TierlogError(
            ErrorCode.OFFSET_OUT_OF_RANGE,
            f"offset {offset} of {state.topic}-{state.partition} {where}{detail}; this broker's "
            f"hot log holds [{lso}, {leo}] and fetches cannot read the cold tier yet",
            log_start_offset=lso,
            log_end_offset=leo,
            high_watermark=state.high_watermark,
            cold={"start": cold[0], "end": cold[1]},
        )
