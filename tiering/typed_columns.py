"""The typed value columns of a lake table (docs/lake-tables.md): `value_typed`, the value
decoded with its schema as one struct, and `value_error`, why a value has none.

For each file: a first pass over the segment's values alone (tiering/segment_values.py)
collects the schema ids they use (no value decoded); the batch's type (`BatchTypes`) merges
their types into the table's, one file at a time, so every file of a batch writes a struct
the batch's final type contains; the writer then decodes each batch of records beside the
record columns (coldstore.parquet_writer.ExtraColumns). Before the batch's Delta commit, the
table's schema gains what the batch's type adds
(coldstore.delta_table.DeltaTopicTable.merge_columns).
"""

from __future__ import annotations

import threading
from collections import Counter

import pyarrow as pa

from coldstore.parquet_writer import EXTRA_BATCH_ROWS, Source
from schemaformat.arrow_merge import merge, normalize
from schemaformat.typed_decode import LATEST, TYPED_COLUMNS, Plan, TypedDecoder
from tiering.segment_values import segment_values

TYPED, ERROR = TYPED_COLUMNS


class BatchTypes:
    """The typed column's type across one batch's files, starting from the table's."""

    def __init__(self, table: pa.DataType | None) -> None:
        self.struct = normalize(table) if table is not None and pa.types.is_struct(table) else None
        self._lock = threading.Lock()

    def plan(self, decoder: TypedDecoder, ids: set[int]) -> Plan:
        with self._lock:  # encoder threads: files are planned one at a time
            plan = decoder.plan(self.struct, ids)
            if plan.struct is not None:
                self.struct = (
                    plan.struct if self.struct is None else merge(self.struct, plan.struct)
                )
            return plan

    def fields(self) -> list[pa.Field]:
        return _fields(self.struct)


def _fields(struct: pa.StructType | None) -> list[pa.Field]:
    error = pa.field(ERROR, pa.string())
    return [error] if struct is None else [pa.field(TYPED, struct), error]


class TypedColumns:
    """coldstore.parquet_writer.ExtraColumns for one file."""

    def __init__(self, decoder: TypedDecoder, plan: Plan) -> None:
        self.decoder, self.plan = decoder, plan
        self.reasons: Counter[str] = Counter()

    @property
    def fields(self) -> list[pa.Field]:
        return _fields(self.plan.struct)

    def columns(self, batch: pa.RecordBatch) -> list[pa.Array]:
        typed = self.decoder.decode(batch.column("value"), self.plan)
        self.reasons.update(typed.reasons)
        return [typed.errors] if self.plan.struct is None else [typed.typed, typed.errors]


def typed_columns(
    decoder: TypedDecoder,
    types: BatchTypes,
    segment: Source,
    from_offset: int,
    to_offset: int,
) -> TypedColumns:
    """The columns of one file: its schema ids found, its type planned into the batch's."""
    if decoder.mode == LATEST:  # every value is decoded with the subject's latest schema
        return TypedColumns(decoder, types.plan(decoder, decoder.schema_ids(pa.array([]))))
    ids: set[int] = set()
    run: list[pa.Array] = []  # frames' values, looked at together (per-call costs)
    for values in segment_values(segment, from_offset, to_offset):
        run.append(values)
        if sum(len(v) for v in run) >= EXTRA_BATCH_ROWS:
            ids |= decoder.schema_ids(pa.concat_arrays(run))
            run = []
    if run:
        ids |= decoder.schema_ids(pa.concat_arrays(run))
    return TypedColumns(decoder, types.plan(decoder, ids))
