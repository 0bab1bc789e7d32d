"""A column of Avro bodies of one schema → one Arrow struct array, decoded natively.

Decoding value by value in Python (fastavro → dicts → Arrow) is what made typed tiering slow
(docs/lake-tables.md, "Cost"). Here the bodies are laid, unchanged, into one block of an
in-memory Avro container file and polars' Avro reader (Rust) decodes the block into Arrow
columns at once.

A block does not say where each value ends, so a body with bytes too many or too few could
shift its neighbours' values. Each decoded row is therefore checked: the size its value takes
in Avro's binary encoding must be the body's length. A decoder never reads past the block, and
a valid encoding of a value is never shorter than that size, so when every row's size equals
its body's length every row was decoded from exactly its own bytes. Rows that fail the check,
and whole blocks the reader refuses, are left to the per-value decoder (schemaformat/
typed_decode.py), which says what is wrong with them.

Only schemas made of what this check can size take this path: records, `boolean`, `int`,
`long`, `float`, `double`, `string`, `bytes`, enums, `timestamp-millis`/`-micros`, `date`,
arrays and unions of `null` with one of these. Other schemas (maps, other logical types,
wider unions, named-type references) keep the per-value decoder.
"""

from __future__ import annotations

import io
import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# A node of the size plan: ("fixed", n) | ("varint",) | ("bytes",) | ("enum", symbols)
# | ("record", [(name, node)]) | ("array", node) | ("nullable", node).
Node = tuple[Any, ...]
_FIXED = {"boolean": 1, "float": 4, "double": 8}
_LOGICAL_INTS = {("long", "timestamp-millis"), ("long", "timestamp-micros"), ("int", "date")}
_SYNC = b"tierlog-avro-blk"  # 16 bytes: the container's sync marker (any value will do)
_VARINT_STEPS = np.array([1 << (7 * k) for k in range(1, 10)], dtype=np.uint64)


def _zigzag(n: int) -> bytes:
    """Avro's long encoding (zigzag, then base-128 varint)."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z & ~0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _node(schema: Any, depth: int = 0) -> Node | None:
    """The size plan of an Avro schema (its JSON), or None if it is not one this path takes."""
    if depth > 32:
        return None
    if isinstance(schema, str):
        if schema in _FIXED:
            return ("fixed", _FIXED[schema])
        if schema in ("int", "long"):
            return ("varint",)
        return ("bytes",) if schema in ("string", "bytes") else None
    if isinstance(schema, list):
        branches = [s for s in schema if s != "null"]
        if len(schema) != 2 or len(branches) != 1:
            return None
        inner = _node(branches[0], depth + 1)
        return None if inner is None else ("nullable", inner)
    return _complex(schema, depth) if isinstance(schema, dict) else None


def _complex(schema: dict[str, Any], depth: int) -> Node | None:
    kind = schema.get("type")
    if "logicalType" in schema:  # those the reader gives as their encoded integer's type
        return ("varint",) if (kind, schema["logicalType"]) in _LOGICAL_INTS else None
    if kind == "enum":
        return ("enum", list(schema["symbols"]))
    if kind == "record":
        fields = [(f["name"], _node(f["type"], depth + 1)) for f in schema["fields"]]
        if not fields or any(n is None for _, n in fields):
            return None
        return ("record", fields)
    if kind == "array":
        items = _node(schema["items"], depth + 1)
        return None if items is None else ("array", items)
    return _node(kind, depth + 1) if isinstance(kind, str) and kind != "record" else None


def _varint_sizes(values: np.ndarray) -> np.ndarray:
    z = ((values.astype(np.int64) << 1) ^ (values.astype(np.int64) >> 63)).view(np.uint64)
    # 1 byte below 2**7, 2 below 2**14, ...: how many of the steps z reaches, plus one.
    sizes: np.ndarray = np.searchsorted(_VARINT_STEPS, z, side="right") + 1
    return sizes


def _ints(array: pa.Array) -> np.ndarray:
    if pa.types.is_timestamp(array.type) or pa.types.is_date32(array.type):
        array = array.view(pa.int64() if pa.types.is_timestamp(array.type) else pa.int32())
    return np.asarray(pc.fill_null(array, 0).to_numpy(zero_copy_only=False), dtype=np.int64)


def _sizes(node: Node, array: pa.Array) -> np.ndarray:
    """Bytes each row's value takes in Avro's binary encoding (null rows: ignored)."""
    kind = node[0]
    if kind == "fixed":
        return np.full(len(array), node[1], dtype=np.int64)
    if kind == "varint":
        return _varint_sizes(_ints(array))
    if kind == "bytes":
        lengths = _ints(pc.binary_length(array))
        sized: np.ndarray = _varint_sizes(lengths) + lengths
        return sized
    if kind == "enum":  # the symbol's index; the reader's dictionary is in order of first use
        if not pa.types.is_dictionary(array.type):
            array = pc.dictionary_encode(array)
        index = {symbol: i for i, symbol in enumerate(node[1])}
        symbols = np.array([index[s] for s in array.dictionary.to_pylist()] or [0], np.int64)
        return _varint_sizes(symbols[_ints(array.indices)])
    if kind == "nullable":  # the branch index (one byte), then the value if there is one
        valid = np.asarray(array.is_valid().to_numpy(zero_copy_only=False))
        return 1 + np.where(valid, _sizes(node[1], array), 0)
    if kind == "record":
        total = np.zeros(len(array), dtype=np.int64)
        for name, child in node[1]:
            total += _sizes(child, array.field(name))
        return total
    # array: one block (count, items) then the 0 that ends it; an empty array is the 0 alone
    offsets = np.asarray(array.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    items = _sizes(node[1], array.values)
    summed = np.concatenate(([0], np.cumsum(items)))
    counts = offsets[1:] - offsets[:-1]
    inside = summed[offsets[1:]] - summed[offsets[:-1]]
    return np.where(counts > 0, _varint_sizes(counts) + inside + 1, 1)


class AvroColumnDecoder:
    """Decodes bodies (no wire-format prefix) of one Avro record schema into `struct`."""

    def __init__(self, schema: dict[str, Any], node: Node) -> None:
        self._node = node
        meta = {b"avro.schema": json.dumps(schema).encode(), b"avro.codec": b"null"}
        header = bytearray(b"Obj\x01" + _zigzag(len(meta)))
        for key, value in meta.items():
            header += _zigzag(len(key)) + key + _zigzag(len(value)) + value
        self._header = bytes(header + _zigzag(0) + _SYNC)

    @classmethod
    def for_schema(cls, schema: Any) -> AvroColumnDecoder | None:
        """A decoder for the schema (its JSON), or None if it must be decoded value by value."""
        node = _node(schema)
        return None if node is None or node[0] != "record" else cls(schema, node)

    def decode(self, bodies: pa.Array, struct: pa.StructType) -> tuple[pa.Array, np.ndarray] | None:
        """(the rows as `struct`, which rows are right); None if the reader refused the block.
        `bodies` holds no nulls."""
        import polars as pl
        from polars.exceptions import PanicException

        lengths = _ints(pc.binary_length(bodies))
        # Without nulls, the bodies lie back to back in the array's data buffer.
        _, offsets, data = bodies.buffers()
        start, end = np.frombuffer(offsets, np.int32)[[bodies.offset, bodies.offset + len(bodies)]]
        block = memoryview(data)[start:end]  # the bodies, back to back: copied once, here
        payload = b"".join(
            (self._header, _zigzag(len(bodies)), _zigzag(int(end - start)), block, _SYNC)
        )
        try:
            table = pl.read_avro(io.BytesIO(payload)).to_arrow()
        except (Exception, PanicException):  # PolarsError, OSError, a Rust panic
            # A body the reader cannot decode; whatever it raises, the per-value decoder then
            # decodes each row and says which body is wrong and why.
            return None
        if table.num_rows != len(bodies):
            return None
        decoded = pa.StructArray.from_arrays(
            [c.combine_chunks() for c in table.columns], names=table.column_names
        )
        try:
            right = _sizes(self._node, decoded) == lengths
        except (KeyError, pa.ArrowException):  # e.g. a symbol the schema lacks: not ours
            return None
        return decoded.cast(struct), right
