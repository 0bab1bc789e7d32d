"""The typed value columns in the `tierlog` source (docs/lake-tables.md): `value_typed` and
`value_error`, typed as the topic's Delta table has them now.

Cold files carry the columns (files written before the table had them, or before a schema
version added a field, read back with nulls). The hot tail (includeHot, streaming's live
records) is decoded in the task by tiering's own decoder (schemaformat/typed_decode.py), with
the topic's `lake.mode` and the schemas from the broker's Schema Registry, so a record reads
the same whether it was tiered yet or not (spark_tables/typed_hot.py).
"""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from coldstore.layout import table_uri
from schemaformat.arrow_merge import normalize
from schemaformat.typed_decode import TYPED_COLUMNS
from spark_tables.options import SourceOptions

TYPED, ERROR = TYPED_COLUMNS


def table_typed_fields(opts: SourceOptions) -> list[pa.Field]:
    """The table's typed columns as its latest schema has them; [] if it has none (yet)."""
    if opts.columns is not None and not set(opts.columns) & set(TYPED_COLUMNS):
        return []
    try:
        table = DeltaTable(
            table_uri(opts.store, opts.topic), storage_options=opts.store.storage_options()
        )
    except TableNotFoundError:
        return []
    schema = pa.schema(table.schema().to_arrow())
    return [
        pa.field(name, normalize(schema.field(name).type))
        for name in TYPED_COLUMNS
        if name in schema.names and (opts.columns is None or name in opts.columns)
    ]


def fit(batch: pa.RecordBatch, name: str, target: pa.DataType) -> pa.Array:
    """The batch's column `name` as `target` (a struct gains the fields its file lacked),
    or nulls when the batch has none."""
    if name not in batch.schema.names:
        return pa.nulls(batch.num_rows, target)
    column = batch.column(name)
    return column if column.type == target else column.cast(target)
