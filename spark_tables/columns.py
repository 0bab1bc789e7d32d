"""The DataFrame's columns (docs/design.md §6): topic, partition, offset, timestamp, key, value,
headers; key/value as binary or text, and JSON values parsed into a struct.

    topic STRING NOT NULL, partition INT NOT NULL, offset BIGINT NOT NULL,
    timestamp TIMESTAMP NOT NULL, key BINARY|STRING, value BINARY|STRING|STRUCT<...>,
    headers ARRAY<STRUCT<key: STRING, value: BINARY>>

A parsed JSON value is a struct column, `value`, rather than top-level columns: JSON fields
named like the record's own columns ("timestamp", "key", ...) would otherwise collide.
`SELECT value.*` flattens it. Values that are not JSON objects of that shape give null
(Spark's from_json PERMISSIVE behaviour), never a failed query.

Conversion runs on Arrow arrays, O(1) Python operations per batch on the common paths
(binary, valid UTF-8, well-formed JSON); only malformed values take a per-row path.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pajson
from pyspark.sql.pandas.types import from_arrow_type, to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from schemaformat.typed_decode import TYPED_COLUMNS
from spark_tables.options import OptionError, SourceOptions
from spark_tables.typed import fit

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)
_BASE_DDL = [
    ("topic", "topic STRING NOT NULL"),
    ("partition", "partition INT NOT NULL"),
    ("offset", "offset BIGINT NOT NULL"),
    ("timestamp", "timestamp TIMESTAMP NOT NULL"),
]


def spark_schema(opts: SourceOptions, value_type: DataType | None = None) -> StructType:
    """The source's schema; `value_type` is the parsed JSON struct for valueFormat=json."""
    text: DataType = StringType()
    if opts.value_format == "json":
        if value_type is None:
            raise OptionError("valueFormat=json needs valueSchema or a value type")
        value: DataType = value_type
    else:
        value = text if opts.value_format == "string" else BinaryType()
    fields = [
        StructField("topic", StringType(), False),
        StructField("partition", IntegerType(), False),
        StructField("offset", LongType(), False),
        StructField("timestamp", TimestampType(), False),
        StructField("key", text if opts.key_format == "string" else BinaryType()),
        StructField("value", value),
        StructField("headers", HEADERS_TYPE),
    ]
    return StructType([f for f in fields if opts.columns is None or f.name in opts.columns])


def with_typed(schema: StructType, typed: list[pa.Field]) -> StructType:
    """The schema with a typed table's value columns after the record's own."""
    fields = [StructField(f.name, from_arrow_type(f.type)) for f in typed]
    return StructType([*schema.fields, *fields])


def ddl_schema(opts: SourceOptions, typed: Sequence[pa.Field] = ()) -> str:
    """The schema as DDL, for valueSchema (Spark parses DDL itself; the Python side that
    plans has no JVM to parse it with)."""
    assert opts.value_schema is not None
    inner = opts.value_schema.strip()
    if inner.lower().startswith("struct<") and inner.endswith(">"):
        inner = inner[len("struct<") : -1]
    key = "STRING" if opts.key_format == "string" else "BINARY"
    columns = [
        *_BASE_DDL,
        ("key", f"key {key}"),
        ("value", f"value STRUCT<{inner}>"),
        ("headers", "headers ARRAY<STRUCT<key: STRING, value: BINARY>>"),
    ]
    wanted = [ddl for name, ddl in columns if opts.columns is None or name in opts.columns]
    wanted += [f"{f.name} {from_arrow_type(f.type).simpleString()}" for f in typed]
    return ", ".join(wanted)


def infer_value_type(values: Sequence[bytes]) -> StructType:
    """A struct type for JSON object values, inferred from a sample (pyarrow's JSON reader:
    ints widen to doubles, ISO-8601 text becomes timestamps; null-only fields are strings)."""
    lines = [v for v in values if v and v.lstrip()[:1] == b"{" and b"\n" not in v]
    if not lines:
        raise OptionError(
            "valueFormat=json: no JSON object values to infer a schema from; give valueSchema"
        )
    try:
        table = pajson.read_json(io.BytesIO(b"\n".join(lines)))
    except pa.ArrowInvalid as exc:
        raise OptionError(
            f"valueFormat=json: could not infer a schema from the values ({exc}); give valueSchema"
        ) from None
    struct = pa.struct([pa.field(f.name, _no_nulls(f.type)) for f in table.schema])
    inferred = from_arrow_type(struct)
    assert isinstance(inferred, StructType)
    return inferred


def _no_nulls(t: pa.DataType) -> pa.DataType:
    if pa.types.is_null(t):
        return pa.string()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _no_nulls(f.type)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(_no_nulls(t.value_type))
    return t


class OutputConverter:
    """CONSUMER_SCHEMA batches of one partition (with a typed table's value columns, when
    it has them) → batches of exactly the Arrow schema Spark expects for the source's schema
    (Spark compares the two)."""

    def __init__(self, schema: StructType, topic: str) -> None:
        self.topic = topic
        self.target = to_arrow_schema(schema, timezone="UTC")
        self._constants: dict[tuple[str, int], pa.Array] = {}

    def _constant(self, name: str, partition: int, value: pa.Scalar, n: int) -> pa.Array:
        """`value` n times: a slice of one array built per column and partition, not a new
        array per batch."""
        arr = self._constants.get((name, partition))
        if arr is None or len(arr) < n:
            arr = self._constants[(name, partition)] = pa.repeat(value, n)
        return arr.slice(0, n)

    def convert(self, batch: pa.RecordBatch, partition: int) -> pa.RecordBatch:
        """`batch` holds (at least) the record columns the target has, by name."""
        arrays = [self._column(f, batch, partition) for f in self.target]
        return pa.RecordBatch.from_arrays(arrays, schema=self.target)

    def _column(self, f: pa.Field, batch: pa.RecordBatch, partition: int) -> pa.Array:
        if f.name == "topic":
            return self._constant("topic", 0, pa.scalar(self.topic, pa.string()), batch.num_rows)
        if f.name == "partition":
            value = pa.scalar(partition, pa.int32())
            return self._constant("partition", partition, value, batch.num_rows)
        if f.name in TYPED_COLUMNS:
            return fit(batch, f.name, f.type)
        col = batch.column(f.name)
        if f.name in ("key", "value"):
            return _bytes_as(col, f.type)
        return col if col.type == f.type else col.cast(f.type)


def _bytes_as(arr: pa.Array, target: pa.DataType) -> pa.Array:
    if pa.types.is_binary(target):
        return arr
    if pa.types.is_string(target):
        return utf8(arr)
    if pa.types.is_struct(target):
        return parse_json(arr, target)
    raise TypeError(f"no conversion of bytes to {target}")


def utf8(arr: pa.Array) -> pa.Array:
    """Bytes → text; invalid UTF-8 is decoded with U+FFFD (as the fetch API's string mode)."""
    try:
        return arr.cast(pa.string())
    except pa.ArrowInvalid:
        return pa.array(
            [None if v is None else v.decode("utf-8", "replace") for v in arr.to_pylist()],
            pa.string(),
        )


def parse_json(arr: pa.Array, target: pa.StructType) -> pa.Array:
    """JSON object bytes → a struct array of `target`; null for anything else. Dates and
    timestamps are read from ISO-8601 text."""
    fast = _parse_lines(arr, target)
    if fast is not None:
        return fast
    values = arr.to_pylist()  # some value is not a one-line JSON object: row by row
    rows = []
    for v in values:
        try:
            doc = orjson.loads(v) if v is not None else None
        except orjson.JSONDecodeError:
            doc = None
        rows.append(doc if isinstance(doc, dict) else None)
    loose = _as_text(target, timestamps=True)  # pa.array takes no ISO text for temporals
    try:
        return pa.array(rows, type=loose).cast(target)
    except _BAD_VALUE:
        return pa.concat_arrays([_one(r, loose, target) for r in rows]) if rows else arr[:0]


_BAD_VALUE = (
    pa.ArrowInvalid,
    pa.ArrowTypeError,
    pa.ArrowNotImplementedError,
    TypeError,
    ValueError,
    OverflowError,
)


def _one(row: dict[str, object] | None, loose: pa.DataType, target: pa.DataType) -> pa.Array:
    try:
        return pa.array([row], type=loose).cast(target)
    except _BAD_VALUE:
        return pa.array([None], type=target)


def _as_text(t: pa.DataType, *, timestamps: bool) -> pa.DataType:
    """`t` with dates (and timestamps) read as text, to be cast afterwards: pyarrow's JSON
    reader parses ISO timestamps but not dates, and pa.array parses neither."""
    if pa.types.is_date(t) or (timestamps and pa.types.is_timestamp(t)):
        return pa.string()
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(_as_text(f.type, timestamps=timestamps)) for f in t])
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_as_text(t.value_type, timestamps=timestamps)))
    if pa.types.is_map(t):
        return pa.map_(t.key_type, _as_text(t.item_type, timestamps=timestamps))
    return t


def _parse_lines(arr: pa.Array, target: pa.StructType) -> pa.Array | None:
    """All values well-formed one-line JSON objects (or null): pyarrow's C++ reader over the
    values joined by newlines, built with Arrow kernels (no per-value Python). None when a
    value is not: the caller parses row by row."""
    if len(arr) == 0:
        return pa.array([], type=target)
    lines = _as_lines(arr)
    if lines is None:
        return None
    read_type = _as_text(target, timestamps=False)
    schema = pa.schema(list(read_type))
    try:
        table = pajson.read_json(
            pa.BufferReader(lines),
            parse_options=pajson.ParseOptions(
                explicit_schema=schema, unexpected_field_behavior="ignore"
            ),
        )
        # With no line break inside a value, each value is one line, so as many rows as
        # values means each line gave one object (a blank line gives none; a non-object fails).
        if table.num_rows != len(arr):
            return None
        table = table.select(schema.names).combine_chunks()
        cols = [c.chunk(0) if c.num_chunks else pa.array([], c.type) for c in table.columns]
        mask = arr.is_null()
        return pa.StructArray.from_arrays(cols, fields=list(read_type), mask=mask).cast(target)
    except _BAD_VALUE:
        return None


def _as_lines(arr: pa.Array) -> pa.Buffer | None:
    """The values, nulls as {}, each followed by a newline; None if a value holds a line break."""
    filled = pc.fill_null(arr, b"{}") if arr.null_count else arr
    data = np.frombuffer(_value_bytes(filled), dtype=np.uint8)
    if (data == ord("\n")).any() or (data == ord("\r")).any():
        return None
    joined = pc.binary_join_element_wise(filled, pa.scalar(b""), pa.scalar(b"\n"))
    return _value_bytes(joined)


def _value_bytes(arr: pa.Array) -> pa.Buffer:
    """The bytes of a (non-large) binary array's values, end to end."""
    if pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type):
        arr = arr.cast(pa.binary())
    _, offsets, data = arr.buffers()
    ends = np.frombuffer(offsets, dtype=np.int32)
    lo, hi = int(ends[arr.offset]), int(ends[arr.offset + len(arr)])
    return data.slice(lo, hi - lo) if data is not None else pa.py_buffer(b"")
