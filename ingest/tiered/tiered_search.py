"""A partition's hot log as a search reads it (cluster/search_run.py's HotSource): pages of
the leader's local log up to the high watermark, or as read_committed sees them (up to the
last stable offset, aborted records and markers left out: ingest/service/txn_log.py)."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from cluster.read_contract import FetchResult
from ingest.replication.partition import Partition
from ingest.tiered.fetch_reader import fetch
from logformat.errors import ErrorCode, TierlogError
from logformat.schema import CONSUMER_SCHEMA

_EMPTY = pa.RecordBatch.from_pylist([], schema=CONSUMER_SCHEMA)


# What an isolation level may see of a read from an offset (TxnView.apply), and its end.
Visible = tuple[Callable[[FetchResult, int], FetchResult], int]


class LocalHot:
    def __init__(self, state: Partition, visible: Visible | None = None) -> None:
        self.state = state
        self.visible = visible

    def bounds(self) -> tuple[int, int]:
        end = self.state.high_watermark if self.visible is None else self.visible[1]
        return self.state.log.log_start_offset, end

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
        if self.visible is not None:
            got = self.visible[0](got, offset)
        return got.batch, got.next_offset
