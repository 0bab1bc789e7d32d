"""A column of Avro bodies of one schema → one Arrow struct array, decoded a field at a time.

Decoding value by value in Python (fastavro → dicts → Arrow) is what made typed tiering slow
(docs/lake-tables.md, "Cost"); so was handing the bodies to polars' Avro reader, whose
per-record work alone took most of the time typed tiering may cost. Here every body of the
column is read at once: one cursor per body (a numpy vector of positions in the bodies'
shared buffer, read in place) moves through the schema field by field, each field read for
all bodies by a few vectorized steps into numpy parts (schemaformat/avro_parts.py), and each
field's parts become one Arrow array of the table's type at the end (strings are gathered by
Arrow's `take` from the buffer itself). Every numpy pass over a run of values costs about as
much as the work in it, so the steps are few: that is typed tiering's speed.

A row is right only if its cursor never left its own body and ends exactly at the body's
end: then every value of the row was read from its own bytes, and nothing of a neighbour.
Rows that fail (truncated, bytes left over, a union branch or an enum index out of range, a
varint longer than 64 bits, an int out of 32-bit range, a date or time outside the years 1
to 9999, a string not UTF-8) are left to the per-value decoder (schemaformat/
typed_decode.py), which says what is wrong with them.

Only schemas made of what this path reads take it: records, `boolean`, `int`, `long`,
`float`, `double`, `string`, `bytes`, enums, `timestamp-millis`/`-micros`, `date`, arrays and
unions of `null` with one of these. Other schemas (maps, other logical types, wider unions,
named-type references) keep the per-value decoder.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from schemaformat.avro_parts import (
    List,
    Node,
    Nullable,
    Part,
    Record,
    Spans,
    Values,
    node_type,
    placed,
)

_FIXED = ("boolean", "float", "double")
_LOGICAL_INTS = {("long", "timestamp-millis"), ("long", "timestamp-micros"), ("int", "date")}
# What each kind holds: an int is 32 bits; dates and timestamps those of Python's datetime
# (years 1 to 9999), as the per-value decoder (fastavro) reads them.
_RANGES = {
    "int": (-(2**31), 2**31 - 1),
    "date": (-719_162, 2_932_896),
    "timestamp-millis": (-62_135_596_800_000, 253_402_300_799_999),
    "timestamp-micros": (-62_135_596_800_000_000, 253_402_300_799_999_999),
}
_PAD = 16  # a buffer shorter than this is padded (a float's read must fit in it)
_ONE_BYTE = np.array([(b >> 1) ^ -(b & 1) for b in range(128)], np.int64)  # zigzag, decoded


def _node(schema: Any, depth: int = 0) -> Node | None:
    """The read plan of an Avro schema (its JSON), or None if it is not one this path takes."""
    if depth > 32:
        return None
    if isinstance(schema, str):
        if schema in _FIXED:
            return ("fixed", schema)
        if schema in ("int", "long"):
            return ("varint", schema)
        return ("bytes", schema) if schema in ("string", "bytes") else None
    if isinstance(schema, list):
        branches = [s for s in schema if s != "null"]
        if len(schema) != 2 or len(branches) != 1:
            return None
        inner = _node(branches[0], depth + 1)
        return None if inner is None else ("nullable", inner, schema.index("null"))
    return _complex(schema, depth) if isinstance(schema, dict) else None


def _complex(schema: dict[str, Any], depth: int) -> Node | None:
    kind = schema.get("type")
    if "logicalType" in schema:  # those read as their encoded integer
        logical = schema["logicalType"]
        return ("varint", logical) if (kind, logical) in _LOGICAL_INTS else None
    if kind == "enum":
        return ("enum", list(schema["symbols"])) if schema.get("symbols") else None
    if kind == "record":
        fields = [(f["name"], _node(f["type"], depth + 1)) for f in schema["fields"]]
        if not fields or any(n is None for _, n in fields):
            return None
        struct = pa.struct([pa.field(name, node_type(n)) for name, n in fields])  # type: ignore[arg-type]
        return ("record", fields, struct)
    if kind == "array":
        items = _node(schema["items"], depth + 1)
        element = None if items is None else pa.field("element", node_type(items))
        return None if items is None else ("array", items, pa.list_(element))
    return _node(kind, depth + 1) if isinstance(kind, str) and kind != "record" else None


class _Cursors:
    """The bodies' bytes, and which bodies went wrong. A set of cursors is read with `lim`,
    the end of each cursor's body, and `rows`, each cursor's body."""

    def __init__(self, data: pa.Buffer, starts: np.ndarray) -> None:
        self.buffer, self.starts = data, starts  # the buffer, where each body starts in it
        # Read in place, not copied: a read past a body's end (a row that fails) may go past
        # the buffer's end, and `at` clips it to the buffer.
        raw = np.frombuffer(data, np.uint8)
        self.bytes = raw if len(raw) >= _PAD else np.concatenate([raw, np.zeros(_PAD, np.uint8)])
        self.bad = np.zeros(len(starts), dtype=bool)

    def at(self, pos: np.ndarray) -> np.ndarray:
        """The bytes at `pos`."""
        return np.take(self.bytes, pos, mode="clip")

    def fail(self, which: np.ndarray, rows: np.ndarray) -> None:
        if which.any():
            self.bad[rows[which]] = True

    def bound(self, pos: np.ndarray, lim: np.ndarray, rows: np.ndarray) -> None:
        """A cursor past its body's end fails its row and stays at that end."""
        over = pos > lim
        if over.any():
            self.bad[rows[over]] = True
            pos[over] = lim[over]

    def varint(self, pos: np.ndarray, lim: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Zigzag varints (Avro's int and long) at `pos`, which moves past them."""
        b = self.at(pos)
        pos += 1
        going = b >= 0x80
        if not going.any():  # one byte each: the common case of lengths, counts, flags
            self.bound(pos, lim, rows)
            one: np.ndarray = _ONE_BYTE.take(b)
            return one
        # Byte by byte over the whole set (cheaper than following the longer ones alone).
        value = (b & 0x7F).astype(np.uint64)
        for shift in range(7, 64, 7):
            more = self.at(pos)
            if shift == 63:  # the tenth byte holds the 64th bit alone
                self.fail(going & (more > 1), rows)
            bits = more & 0x7F
            bits *= going  # the bytes after a varint's end are not its own
            value |= bits.astype(np.uint64) << np.uint64(shift)
            pos += going
            going &= more >= 0x80
            if not going.any():
                break
        self.fail(going, rows)  # longer than ten bytes: no long
        self.bound(pos, lim, rows)
        decoded: np.ndarray = (value >> np.uint64(1)) ^ (np.uint64(0) - (value & np.uint64(1)))
        return decoded.view(np.int64)

    def floats(self, pos: np.ndarray, dtype: str) -> np.ndarray:
        """The little-endian floats that start at `pos` (any alignment)."""
        size = np.dtype(dtype).itemsize
        every = np.ndarray((len(self.bytes) - size + 1,), dtype, self.bytes, strides=(1,))
        # Clipped like `at` (np.take would copy the strided view whole).
        got: np.ndarray = every[np.minimum(pos, len(every) - 1)]
        return got


def _read(node: Node, pos: np.ndarray, lim: np.ndarray, rows: np.ndarray, c: _Cursors) -> Part:
    """The values at `pos` (one per cursor, in buffer order); moves `pos`."""
    kind = node[0]
    if kind == "varint":
        return Values(node, _varint(node[1], pos, lim, rows, c))
    if kind == "fixed":
        return Values(node, _fixed(node[1], pos, lim, rows, c))
    if kind == "bytes":
        return _bytes(node[1], pos, lim, rows, c)
    if kind == "enum":
        index = c.varint(pos, lim, rows)
        wrong = (index < 0) | (index >= len(node[1]))
        c.fail(wrong, rows)
        return Values(node, np.where(wrong, 0, index))
    if kind == "record":
        return Record(node, [_read(child, pos, lim, rows, c) for _, child in node[1]])
    if kind == "nullable":
        return _nullable(node, pos, lim, rows, c)
    return _array(node, pos, lim, rows, c)


def _varint(
    kind: str, pos: np.ndarray, lim: np.ndarray, rows: np.ndarray, c: _Cursors
) -> np.ndarray:
    values = c.varint(pos, lim, rows)
    if kind in _RANGES:
        low, high = _RANGES[kind]
        wide = (values < low) | (values > high)
        if wide.any():
            c.fail(wide, rows)
            values = np.where(wide, 0, values)
    return values


def _fixed(
    kind: str, pos: np.ndarray, lim: np.ndarray, rows: np.ndarray, c: _Cursors
) -> np.ndarray:
    if kind == "boolean":
        b = c.at(pos)
        c.fail(b > 1, rows)
        pos += 1
        c.bound(pos, lim, rows)
        flags: np.ndarray = b == 1
        return flags
    values = c.floats(pos, "<f4" if kind == "float" else "<f8")
    pos += values.itemsize
    c.bound(pos, lim, rows)
    return values


def _bytes(kind: str, pos: np.ndarray, lim: np.ndarray, rows: np.ndarray, c: _Cursors) -> Spans:
    """Length-prefixed bytes: their spans (gathered when the column is built)."""
    length = c.varint(pos, lim, rows)
    wrong = (length < 0) | (length > lim - pos)
    if wrong.any():
        c.fail(wrong, rows)
        length = np.where(wrong, 0, length)
    starts = pos.copy()
    pos += length
    return Spans(kind, starts, pos.copy())


def _nullable(node: Node, pos: np.ndarray, lim: np.ndarray, rows: np.ndarray, c: _Cursors) -> Part:
    branch = c.varint(pos, lim, rows)
    c.fail((branch != 0) & (branch != 1), rows)
    present = branch == 1 - node[2]
    if present.all():
        return Nullable(present, _read(node[1], pos, lim, rows, c))
    which = np.flatnonzero(present)
    sub = pos[which]
    values = _read(node[1], sub, lim[which], rows[which], c)
    pos[which] = sub
    return Nullable(present, values)


def _array(node: Node, pos: np.ndarray, lim: np.ndarray, rows: np.ndarray, c: _Cursors) -> Part:
    """Blocks of items: per block, its count, then one item of every array still in its
    block per step (an item's place depends on the one before it). Every item takes a byte
    at least, which bounds a count, hence the steps."""
    items = node[1]
    counts = np.zeros(len(pos), dtype=np.int64)
    chunks: list[Part] = []
    places: list[tuple[np.ndarray, np.ndarray | int]] = []  # (the items' arrays, places)
    todo = np.arange(len(pos))  # arrays whose next block count is to be read
    every = True  # todo is every array: their cursors are read in place, not gathered
    while len(todo):
        at, end, who = (pos, lim, rows) if every else (pos[todo], lim[todo], rows[todo])
        count = _block_count(at, end, who, c)
        first_block = not chunks
        for k in range(int(count.max())):
            step = np.flatnonzero(count > k)
            if len(step) == len(count):  # every array of the set has a k-th item
                chunks.append(_read(items, at, end, who, c))
                owners = todo
            else:
                here = at[step]
                chunks.append(_read(items, here, end[step], who[step], c))
                at[step] = here
                owners = todo[step]
            places.append((owners, k if first_block else counts[owners] + k))
        if not every:
            pos[todo] = at
        counts[todo] += count
        more = count > 0
        every = every and bool(more.all())
        todo = todo if every else todo[more]
    if not chunks:
        none = np.zeros(0, np.int64)
        return List(node, counts, _read(items, none, none.copy(), none.copy(), c))
    if len(chunks) == 1:
        return List(node, counts, chunks[0])
    firsts = np.cumsum(counts) - counts  # items in order of their arrays, then places
    wheres = [firsts[owners] + place for owners, place in places]
    return List(node, counts, placed(chunks, wheres))


def _block_count(at: np.ndarray, end: np.ndarray, who: np.ndarray, c: _Cursors) -> np.ndarray:
    """The item counts of the blocks at `at` (0: the array's end); moves `at` to the items."""
    if not c.at(at).any():  # every array ends here: the common case after a first block
        at += 1
        c.bound(at, end, who)
        return np.zeros(len(at), dtype=np.int64)
    count = c.varint(at, end, who)
    sized = np.flatnonzero(count < 0)  # a negative count: the block's byte size follows
    if len(sized):
        skip = at[sized]
        c.varint(skip, end[sized], who[sized])
        at[sized] = skip
        count = np.abs(count)
    wrong = (count < 0) | (count > end - at)  # abs(-2**63) stays negative
    if wrong.any():
        c.fail(wrong, who)
        count = np.where(wrong, 0, count)
    return count


class AvroColumnDecoder:
    """Decodes bodies (no wire-format prefix) of one Avro record schema into `struct`."""

    def __init__(self, node: Node) -> None:
        self._node = node

    @classmethod
    def for_schema(cls, schema: Any) -> AvroColumnDecoder | None:
        """A decoder for the schema (its JSON), or None if it must be decoded value by value."""
        node = _node(schema)
        return None if node is None or node[0] != "record" else cls(node)

    def decode(
        self, values: pa.Array, rows: np.ndarray, skip: int, struct: pa.StructType
    ) -> tuple[pa.Array, np.ndarray] | None:
        """The bodies of `values`' `rows` (ascending, none null), each after its first `skip`
        bytes (the wire-format prefix), as (`struct` rows, which rows are right); None if a
        right row's value does not fit `struct` (the per-value decoder then says which)."""
        _, offsets, data = values.buffers()
        width = np.int64 if pa.types.is_large_binary(values.type) else np.int32
        bounds = np.frombuffer(offsets, width)[values.offset : values.offset + len(values) + 1]
        if len(rows) == len(values):  # every row (rows ascend): no gathers
            starts, ends = np.add(bounds[:-1], skip, dtype=np.int64), bounds[1:].astype(np.int64)
        else:
            starts = np.add(bounds[rows], skip, dtype=np.int64)
            ends = bounds[rows + 1].astype(np.int64)
        if data is None or not len(rows):  # every value empty
            data = pa.py_buffer(b"")
        c = _Cursors(data, starts)
        pos = starts.copy()
        try:
            # Built in the schema's table type; a table's type with more (evolution) casts.
            decoded = _read(self._node, pos, ends, np.arange(len(rows)), c).arrow(c)
            right = ~c.bad & (pos == ends)
            same = decoded.type.equals(struct, check_metadata=True)
            return (decoded if same else decoded.cast(struct)), right
        except (pa.ArrowException, ValueError):  # not expected: the per-value decoder then
            return None
