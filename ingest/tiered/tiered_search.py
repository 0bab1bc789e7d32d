"""A partition's hot log as a search reads it (cluster/search_run.py's HotSource): pages of
the leader's local log up to the high watermark."""

from __future__ import annotations

import pyarrow as pa

from ingest.replication.partition import Partition
from ingest.tiered.fetch_reader import fetch
from logformat.errors import ErrorCode, TierlogError
from logformat.schema import CONSUMER_SCHEMA

_EMPTY = pa.RecordBatch.from_pylist([], schema=CONSUMER_SCHEMA)


class LocalHot:
    def __init__(self, state: Partition) -> None:
        self.state = state

    def bounds(self) -> tuple[int, int]:
        return self.state.log.log_start_offset, self.state.high_watermark

    async def read(
        self, offset: int, max_records: int, max_bytes: int
    ) -> tuple[pa.RecordBatch, int]:
        try:
            got = await fetch(self.state, offset, max_records, max_bytes, 0)
        except TierlogError as exc:
            start = self.state.log.log_start_offset
            if exc.code is ErrorCode.OFFSET_OUT_OF_RANGE and offset < start:
                return _EMPTY, start  # local retention deleted it meanwhile (it was tiered)
            raise
        return got.batch, got.next_offset
