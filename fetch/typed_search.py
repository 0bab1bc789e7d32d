"""A fetch node's search by a typed field (`typed_path` + `typed_value`, docs/lake-tables.md):
cold files are matched on their `value_typed` column (fetch/cold/cold_search.py prunes row
groups by the field's statistics); the hot log above the cold end, which a leader's search
cannot match (its records carry no typed column), is read here a page at a time from a
replica and decoded as tiering decodes (fetch/typed_answers.py) before it is matched."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import orjson
import pyarrow as pa

from logformat.errors import ErrorCode, TierlogError
from logformat.schema import CONSUMER_SCHEMA

if TYPE_CHECKING:
    from cluster.metadata_cache import TopicView
    from fetch.node import FetchNode


class ReplicaHot:
    """cluster.search_run.HotSource over a partition's replicas, typed."""

    def __init__(
        self, node: FetchNode, view: TopicView, partition: int, start: int, end: int
    ) -> None:
        self._node, self._view, self._partition = node, view, partition
        self._start, self._end = start, end

    def bounds(self) -> tuple[int, int]:
        return self._start, self._end

    async def read(
        self, offset: int, max_records: int, max_bytes: int
    ) -> tuple[pa.RecordBatch, int]:
        params = {"offset": str(offset), "max_records": str(max_records)}
        params["max_bytes"] = str(max_bytes)
        response = await self._node.router.fetch_arrow(self._view, self._partition, params)
        if response.status_code == 416:  # local retention deleted it meanwhile (it was tiered)
            hot = await self._node.router.hot_offsets(self._view, self._partition)
            start = hot["log_start_offset"] if hot else offset
            if start > offset:
                return _empty(), start
        if response.status_code != 200:
            raise _error(bytes(response.body))
        batch = await asyncio.to_thread(
            self._node.typing.read, self._view, bytes(response.body), ("value_typed",)
        )
        return batch, int(response.headers["x-tierlog-next-offset"])


def _empty() -> pa.RecordBatch:
    schema = CONSUMER_SCHEMA.append(pa.field("value_typed", pa.null()))
    return pa.RecordBatch.from_pylist([], schema=schema)


def _error(body: bytes) -> TierlogError:
    """The replica's error document as the error it names."""
    try:
        doc = orjson.loads(body)
        return TierlogError(ErrorCode(doc["error_code"]), str(doc["message"]))
    except (orjson.JSONDecodeError, KeyError, ValueError, TypeError):
        return TierlogError(ErrorCode.KAFKA_STORAGE_ERROR, f"a replica answered {body[:200]!r}")
