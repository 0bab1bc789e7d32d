"""Typed columns in the fetch node's Arrow answers (`?columns=value_typed,value_error`,
docs/lake-tables.md "Readers"): the same columns a typed lake table holds, beside the record
columns, which stay byte for byte what an answer without `columns` carries.

Cold records get them from their Parquet files (only those columns' chunks are read:
fetch/cold/typed_read.py); hot records, which a replica serves, are decoded here with
tiering's own decoder (schemaformat/typed_decode.py), the topic's `lake.mode` and the
schemas in the registry's store, so a record reads the same whether it was tiered yet or not.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
import pyarrow as pa
from sqlalchemy.engine import Engine
from starlette.requests import Request
from starlette.responses import Response

from cluster.http.fetch_response import ARROW_STREAM, wants_arrow
from cluster.schema_lookup import StoreLookup
from logformat.errors import ErrorCode, TierlogError
from logformat.schema import CONSUMER_SCHEMA
from metadata.registry_store import RegistryStore
from schemaformat.typed_decode import TYPED_COLUMNS, TYPED_MODES, TypedDecoder

if TYPE_CHECKING:
    from cluster.metadata_cache import TopicView

TYPED, ERROR = TYPED_COLUMNS


@runtime_checkable
class TypedColdReader(Protocol):
    async def read_columns(
        self, topic_id: str, partition: int, first: int, last: int, columns: tuple[str, ...]
    ) -> pa.Table: ...


def columns_param(request: Request) -> tuple[str, ...]:
    """The typed columns asked for, in table order; () without `columns`. The record columns
    may be named too (they are always in the answer); any other name is a 400."""
    raw = request.query_params.get("columns")
    if raw is None:
        return ()
    names = [n.strip() for n in raw.split(",") if n.strip()]
    unknown = [n for n in names if n not in CONSUMER_SCHEMA.names and n not in TYPED_COLUMNS]
    if unknown:
        raise TierlogError(
            ErrorCode.INVALID_REQUEST,
            f"unknown column(s) {', '.join(map(repr, unknown))}: columns takes value_typed and "
            "value_error (offset, timestamp, key, value and headers are always in the answer)",
        )
    typed = tuple(n for n in TYPED_COLUMNS if n in names)
    if typed and not wants_arrow(request):
        raise TierlogError(
            ErrorCode.INVALID_REQUEST,
            f"columns adds typed columns to Arrow answers only: send Accept: {ARROW_STREAM}",
        )
    return typed


def require_typed(view: TopicView) -> None:
    mode = view.config.lake_mode
    if mode not in TYPED_MODES:
        raise TierlogError(
            ErrorCode.INVALID_REQUEST,
            f"topic {view.info.name!r} has no typed columns: its lake.mode is {mode!r} "
            f"(one of {', '.join(TYPED_MODES)} has them)",
        )


def _widened(batch: pa.RecordBatch, extra: dict[str, pa.Array]) -> pa.RecordBatch:
    """The batch with `extra` columns after its own (its schema metadata, frames, kept)."""
    fields = [*batch.schema, *(pa.field(n, a.type) for n, a in extra.items())]
    schema = pa.schema(fields, metadata=batch.schema.metadata)
    return pa.RecordBatch.from_arrays([*batch.columns, *extra.values()], schema=schema)


async def with_cold_columns(
    cold: object, view: TopicView, partition: int, batch: pa.RecordBatch, columns: tuple[str, ...]
) -> pa.RecordBatch:
    """A cold read's batch with the typed columns of the same rows."""
    if not isinstance(cold, TypedColdReader):
        raise TierlogError(
            ErrorCode.KAFKA_STORAGE_ERROR, "this node's cold reader cannot read typed columns"
        )
    if batch.num_rows == 0:
        return _widened(batch, {n: pa.nulls(0, _empty_type(n)) for n in columns})
    offsets = batch.column(0).to_numpy()
    first, last = int(offsets[0]), int(offsets[-1])
    table = await cold.read_columns(view.info.id, partition, first, last, columns)
    found = table.column("offset").to_numpy()
    at = np.searchsorted(found, offsets)
    same = len(found) > 0 and np.array_equal(found[np.minimum(at, len(found) - 1)], offsets)
    if not same:
        raise TierlogError(  # compaction replaced a file between the two reads
            ErrorCode.KAFKA_STORAGE_ERROR,
            f"the cold files of {view.info.name}-{partition} changed during the read; retry",
        )
    rows = pa.array(at)
    return _widened(batch, {n: table.column(n).combine_chunks().take(rows) for n in columns})


def _empty_type(name: str) -> pa.DataType:
    return pa.string() if name == ERROR else pa.null()


class HotTyping:
    """Decodes the values of hot answers a replica sent, as tiering decodes them."""

    def __init__(self, engine: Engine) -> None:
        self._store = RegistryStore(engine)

    async def answer(
        self, view: TopicView, response: Response, columns: tuple[str, ...]
    ) -> Response:
        """The replica's Arrow answer with the typed columns added; any other answer (an
        error document) as it came."""
        if response.status_code != 200 or ARROW_STREAM not in response.headers.get(
            "content-type", ""
        ):
            return response
        body = await asyncio.to_thread(self._typed, view, bytes(response.body), columns)
        headers = {k: v for k, v in response.headers.items() if k.lower() != "content-length"}
        return Response(body, media_type=ARROW_STREAM, headers=headers)

    def _typed(self, view: TopicView, body: bytes, columns: tuple[str, ...]) -> bytes:
        out = self.read(view, body, columns)
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, out.schema) as writer:
            if out.num_rows:
                writer.write_batch(out)
        return bytes(sink.getvalue())

    def read(self, view: TopicView, body: bytes, columns: tuple[str, ...]) -> pa.RecordBatch:
        """A replica's Arrow answer as one batch, with the typed `columns` (CPU: a thread)."""
        table = pa.ipc.open_stream(body).read_all()
        batches = table.combine_chunks().to_batches()
        batch = batches[0] if batches else pa.RecordBatch.from_pylist([], schema=table.schema)
        return _widened(batch, self._decode(view, batch, columns))

    def _decode(
        self, view: TopicView, batch: pa.RecordBatch, columns: tuple[str, ...]
    ) -> dict[str, pa.Array]:
        """A decoder per answer (it caches lookups, failed ones too): a schema id registered
        after a lookup failed is found by the next answer."""
        decoder = TypedDecoder(view.config.lake_mode, StoreLookup(self._store, view.info.name))
        values = batch.column("value")
        plan = decoder.plan(None, decoder.schema_ids(values))
        typed = decoder.decode(values, plan)
        got = {TYPED: typed.typed, ERROR: typed.errors}
        if plan.struct is None:
            got[TYPED] = pa.nulls(batch.num_rows, pa.null())
        return {n: got[n] for n in columns}
