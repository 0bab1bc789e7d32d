"""Record search across both tiers (issue 20): the query, and the seam between the nodes that
serve a search (brokers) and the cold tier's searcher (fetch/cold/cold_search.py), handed in by
the composition root as the ColdReader is (cluster/read_contract.py).

A search reads a partition's cold files, pruned by the manifest's offset/timestamp ranges and
the row groups' statistics, reading only the columns the predicate needs and then the other
columns of the row groups that matched; and then the hot log above the cold end.
"""

from __future__ import annotations

from typing import NamedTuple, Protocol, runtime_checkable

import pyarrow as pa

from cluster.read_contract import ColdRange
from metadata.types import ColdFile

MAX_OFFSET = 2**63 - 1


class SearchQuery(NamedTuple):
    """What a record must match: every given condition (AND). Bounds are [start, end)."""

    key: bytes | None = None  # exact key
    value_contains: str | None = None  # a substring of the value (as UTF-8 text)
    json_path: tuple[str | int, ...] | None = None  # a field of a JSON value...
    json_value: object = None  # ...equal to this JSON value
    start_offset: int = 0
    end_offset: int = MAX_OFFSET
    start_timestamp: int | None = None  # ms
    end_timestamp: int | None = None
    typed_path: tuple[str, ...] | None = None  # a field of a typed lake table's value_typed...
    typed_value: object = None  # ...equal to this (fetch nodes: fetch/typed_search.py)

    def predicate_columns(self) -> list[str]:
        """The columns a record's match depends on, in file order (the others are read only
        for the rows that match)."""
        cols = []
        if self.start_offset > 0 or self.end_offset < MAX_OFFSET:
            cols.append("offset")
        if self.start_timestamp is not None or self.end_timestamp is not None:
            cols.append("timestamp")
        if self.key is not None:
            cols.append("key")
        if self.value_contains is not None or self.json_path is not None:
            cols.append("value")
        if self.typed_path is not None:  # the struct's one field: a nested column path
            cols.append(".".join(("value_typed", *self.typed_path)))
        return cols


class ColdSearchPlan(NamedTuple):
    """A partition's cold files a search must scan (offset order), after the manifest's
    offset and timestamp ranges pruned the others."""

    cold: ColdRange | None  # the committed cold range (None: nothing tiered)
    files: tuple[ColdFile, ...]
    table_files: int  # every committed file of the partition
    table_bytes: int


class FileHits(NamedTuple):
    """What scanning one cold file found: matching rows (CONSUMER_SCHEMA, offset order, at
    most the cap asked for) and what it cost."""

    batch: pa.RecordBatch
    bytes_read: int  # bytes fetched from S3 for this file (footer, column chunks)
    row_groups: int
    row_groups_read: int  # those the statistics could not prune


@runtime_checkable
class ColdSearcher(Protocol):
    """Searches a partition's cold tier. Every method is async and never blocks the loop;
    cancelling the caller stops the scan. fetch's cold reader is one: a node handed a
    ColdReader that is also a ColdSearcher serves searches of the cold tier too."""

    async def search_plan(
        self, topic_id: str, partition: int, query: SearchQuery
    ) -> ColdSearchPlan: ...

    async def search_file(self, file: ColdFile, query: SearchQuery, max_hits: int) -> FileHits:
        """The first `max_hits` matching records of one file."""
        ...
