"""What a read returns, and the cold-read seam: the contract between the nodes that read
partitions (brokers, fetch nodes) and the cold tier's reader (fetch/cold/cold_tier.py).

A broker reads its own log at or above its local log start; below it, a `ColdReader` handed
in by the composition root (tierlog/cli) serves the records from the topic's Parquet files in
S3. This module imports nothing of the broker, so the fetch node can implement and use the
contract without loading it.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

import pyarrow as pa


class FrameCrc(NamedTuple):
    """A frame a hot read served from, with the CRC-32C the read checked it against."""

    base_offset: int
    last_offset: int
    crc: int


class FetchResult(NamedTuple):
    batch: pa.RecordBatch  # CONSUMER_SCHEMA
    next_offset: int
    high_watermark: int
    log_start_offset: int
    frames: tuple[FrameCrc, ...] = ()  # hot reads only: cold files carry no frames


class ColdRange(NamedTuple):
    start: int  # first offset in the cold tier
    end: int  # exclusive


class ColdRead(NamedTuple):
    batch: pa.RecordBatch  # CONSUMER_SCHEMA, offsets ascending, all in [offset, end)
    next_offset: int  # last returned + 1 (or `end` when nothing is left below it)


class ColdReader(Protocol):
    """Reads the cold tier of a partition. Every method is async and never blocks the loop."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    async def cold_range(
        self, topic_id: str, partition: int, fresh: bool = False
    ) -> ColdRange | None:
        """The committed cold range (cached briefly unless `fresh`); None when nothing is."""
        ...

    def known_range(self, topic_id: str, partition: int) -> tuple[ColdRange | None] | None:
        """The last cold range read, wrapped, at once, however old (None: never read yet);
        refreshes it in the background. For hot reads, which must not wait on Postgres."""
        ...

    async def read(
        self,
        topic: str,
        topic_id: str,
        partition: int,
        offset: int,
        end: int,
        max_records: int,
        max_bytes: int,
    ) -> ColdRead:
        """Records with offsets in [offset, end), at least one if any, within the limits."""
        ...

    async def offset_for_timestamp(
        self, topic: str, topic_id: str, partition: int, timestamp: int
    ) -> int | None:
        """The earliest cold offset whose timestamp is >= `timestamp`, None if none is."""
        ...
