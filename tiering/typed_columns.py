"""The typed value columns of a lake table (docs/lake-tables.md): `value_typed`, the value
decoded with its schema as one struct, and `value_error`, why a value has none.

Each file is written in one pass (its values decompressed once): the writer decodes each
batch of records beside the record columns (coldstore.parquet_writer.ExtraColumns). The
schema ids of the file's first batch plan its type: the batch's type (`BatchTypes`) merges
them into the table's, one file at a time, so every file of a batch writes a struct the
batch's final type contains. A later batch with an id the plan lacks starts the file again
with every id seen (`typed_parquet`); a segment rarely changes schema. Before the batch's
Delta commit, the table's schema gains what the batch's type adds
(coldstore.delta_table.DeltaTopicTable.merge_columns).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

import pyarrow as pa

from coldstore.parquet_writer import ParquetFile
from schemaformat.arrow_merge import merge, normalize
from schemaformat.typed_decode import ID_PREFIX, TYPED_COLUMNS, Plan, TypedDecoder
from schemaformat.wire import prefix_ids

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


class NewSchemaIds(Exception):  # a signal to write the file again, not an error
    """A batch of the file uses schema ids its columns were not planned with."""

    def __init__(self, ids: set[int]) -> None:
        super().__init__(f"schema ids {sorted(ids)}")
        self.ids = ids


class TypedColumns:
    """coldstore.parquet_writer.ExtraColumns for one file, planned with the schema ids of
    its first batch (or `ids`, when a first attempt found more later)."""

    def __init__(self, decoder: TypedDecoder, types: BatchTypes, ids: set[int] | None = None):
        self.decoder, self.types = decoder, types
        self.planned = ids
        self.plan = None if ids is None else types.plan(decoder, ids)
        self.reasons: Counter[str] = Counter()

    @property
    def fields(self) -> list[pa.Field]:
        assert self.plan is not None, "fields are known after the first batch"
        return _fields(self.plan.struct)

    def columns(self, values: pa.Array) -> list[pa.Array]:
        prefixed = prefix_ids(values) if self.decoder.mode == ID_PREFIX else None
        if self.plan is None or prefixed is not None:
            # LATEST: the subject's latest id, asked once per file
            ids = self.decoder.schema_ids(values, prefixed)
            if self.planned is None:
                self.planned, self.plan = ids, self.types.plan(self.decoder, ids)
            elif not ids <= self.planned:
                raise NewSchemaIds(self.planned | ids)
        assert self.plan is not None
        typed = self.decoder.decode(values, self.plan, prefixed)
        self.reasons.update(typed.reasons)
        return [typed.errors] if self.plan.struct is None else [typed.typed, typed.errors]


def typed_parquet(
    write: Callable[[TypedColumns], ParquetFile], decoder: TypedDecoder, types: BatchTypes
) -> tuple[ParquetFile, TypedColumns]:
    """The file `write` makes with the typed columns. Written in one pass: a file whose later
    records use schema ids its first batch did not is written again, planned with every id
    seen (the file's type is fixed when its writer opens)."""
    columns = TypedColumns(decoder, types)
    while True:
        try:
            return write(columns), columns
        except NewSchemaIds as more:
            columns = TypedColumns(decoder, types, more.ids)
