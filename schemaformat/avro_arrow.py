"""A column of Avro bodies of one schema → one Arrow struct array, decoded a field at a time.

Decoding value by value in Python (fastavro → dicts → Arrow) is what made typed tiering slow
(docs/lake-tables.md, "Cost"); so was handing the bodies to polars' Avro reader, whose
per-record work alone took most of the time typed tiering may cost. Here every body of the
column is read at once: one cursor per body (a numpy vector of positions in the bodies'
shared buffer) moves through the schema field by field, each field read for all bodies by a
few vectorized steps, and a field's values become one Arrow array (strings are gathered by
Arrow's `take` from the buffer itself).

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

# A node of the read plan: ("fixed", type) | ("varint", kind) | ("bytes", type)
# | ("enum", symbols) | ("record", [(name, node)]) | ("array", node)
# | ("nullable", node, the branch index of null).
Node = tuple[Any, ...]
_FIXED = {"boolean": pa.bool_(), "float": pa.float32(), "double": pa.float64()}
_VARINT_TYPES = {
    "int": pa.int64(),
    "long": pa.int64(),
    "timestamp-millis": pa.timestamp("ms", tz="UTC"),
    "timestamp-micros": pa.timestamp("us", tz="UTC"),
    "date": pa.date32(),
}
_LOGICAL_INTS = {("long", "timestamp-millis"), ("long", "timestamp-micros"), ("int", "date")}
# What each kind holds: an int is 32 bits; dates and timestamps those of Python's datetime
# (years 1 to 9999), as the per-value decoder (fastavro) reads them.
_RANGES = {
    "int": (-(2**31), 2**31 - 1),
    "date": (-719_162, 2_932_896),
    "timestamp-millis": (-62_135_596_800_000, 253_402_300_799_999),
    "timestamp-micros": (-62_135_596_800_000_000, 253_402_300_799_999_999),
}
_PAD = 16  # zero bytes after the buffer: a varint read from a body's last byte stays inside
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
        return ("record", fields)
    if kind == "array":
        items = _node(schema["items"], depth + 1)
        return None if items is None else ("array", items)
    return _node(kind, depth + 1) if isinstance(kind, str) and kind != "record" else None


class _Cursors:
    """The bodies' bytes, and which bodies went wrong. A set of cursors is read with `lim`,
    the end of each cursor's body, and `rows`, each cursor's body."""

    def __init__(self, data: pa.Buffer, first: int, last: int, rows: int) -> None:
        self.buffer = data
        used = np.frombuffer(data, np.uint8)[first:last]
        self.bytes = np.zeros(last + _PAD, np.uint8)  # the bytes before `first` stay unread
        self.bytes[first:last] = used
        self.bad = np.zeros(rows, dtype=bool)
        self.strings: list[tuple[pa.Array, np.ndarray]] = []  # (values, their rows)

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
        b = self.bytes[pos]
        pos += 1
        going = (b & 0x80) != 0
        if not going.any():  # one byte each: the common case of lengths, counts, flags
            self.bound(pos, lim, rows)
            one: np.ndarray = _ONE_BYTE[b]
            return one
        # Byte by byte over the whole set (cheaper than following the longer ones alone).
        value = (b & 0x7F).astype(np.uint64)
        for shift in range(7, 64, 7):
            more = self.bytes[pos]
            if shift == 63:  # the tenth byte holds the 64th bit alone
                self.fail(going & (more > 1), rows)
            value |= np.where(going, more & 0x7F, 0).astype(np.uint64) << np.uint64(shift)
            pos += going
            going &= (more & 0x80) != 0
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
        got: np.ndarray = every[pos]
        return got


def _read(node: Node, pos: np.ndarray, lim: np.ndarray, rows: np.ndarray, c: _Cursors) -> pa.Array:
    """The values at `pos` (one per cursor, in buffer order) as one array; moves `pos`."""
    kind = node[0]
    if kind == "varint":
        return _varint(node[1], pos, lim, rows, c)
    if kind == "fixed":
        return _fixed(node[1], pos, lim, rows, c)
    if kind == "bytes":
        return _bytes(node[1], pos, lim, rows, c)
    if kind == "enum":
        index = c.varint(pos, lim, rows)
        wrong = (index < 0) | (index >= len(node[1]))
        c.fail(wrong, rows)
        return pa.array(node[1], pa.string()).take(pa.array(np.where(wrong, 0, index)))
    if kind == "record":
        children = [_read(child, pos, lim, rows, c) for _, child in node[1]]
        return pa.StructArray.from_arrays(children, names=[name for name, _ in node[1]])
    if kind == "nullable":
        return _nullable(node, pos, lim, rows, c)
    return _array(node[1], pos, lim, rows, c)


def _varint(kind: str, pos: np.ndarray, lim: np.ndarray, rows: np.ndarray, c: _Cursors) -> pa.Array:
    values = c.varint(pos, lim, rows)
    if kind in _RANGES:
        low, high = _RANGES[kind]
        wide = (values < low) | (values > high)
        if wide.any():
            c.fail(wide, rows)
            values = np.where(wide, 0, values)
    if kind == "date":
        return pa.array(values.astype(np.int32)).view(pa.date32())
    return pa.array(values).view(_VARINT_TYPES[kind])


def _fixed(kind: str, pos: np.ndarray, lim: np.ndarray, rows: np.ndarray, c: _Cursors) -> pa.Array:
    if kind == "boolean":
        b = c.bytes[pos]
        c.fail(b > 1, rows)
        pos += 1
        c.bound(pos, lim, rows)
        return pa.array(b == 1)
    dtype = "<f4" if kind == "float" else "<f8"
    values = c.floats(pos, dtype)
    pos += values.itemsize
    c.bound(pos, lim, rows)
    return pa.array(values)


def _bytes(kind: str, pos: np.ndarray, lim: np.ndarray, rows: np.ndarray, c: _Cursors) -> pa.Array:
    """Length-prefixed bytes: gathered by Arrow from the buffer itself, through an array
    whose even elements are the values and odd ones the bytes between them."""
    length = c.varint(pos, lim, rows)
    wrong = (length < 0) | (length > lim - pos)
    if wrong.any():
        c.fail(wrong, rows)
        length = np.where(wrong, 0, length)
    if not len(pos):
        return pa.array([], pa.string() if kind == "string" else pa.binary())
    bounds = np.empty(2 * len(pos), dtype=np.int64)
    bounds[0::2] = pos
    pos += length
    bounds[1::2] = pos
    spans = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), len(bounds) - 1, [None, pa.py_buffer(bounds), c.buffer]
    )
    values = spans.take(pa.array(np.arange(0, len(bounds), 2)))
    if kind == "bytes":
        return values
    c.strings.append((values, rows))  # checked for UTF-8 at the end (_check_utf8)
    return values.view(pa.large_string())


def _check_utf8(c: _Cursors) -> None:
    """A string that is not UTF-8 fails its row alone (a mangled body must not cost its
    neighbours the column): Arrow checks each column at once, Python finds the culprits."""
    for values, rows in c.strings:
        try:
            values.view(pa.large_string()).validate(full=True)
        except pa.ArrowInvalid:
            for i, value in enumerate(values.to_pylist()):
                try:
                    value.decode("utf-8")
                except UnicodeDecodeError:
                    c.bad[rows[i]] = True


def _nullable(
    node: Node, pos: np.ndarray, lim: np.ndarray, rows: np.ndarray, c: _Cursors
) -> pa.Array:
    branch = c.varint(pos, lim, rows)
    c.fail((branch != 0) & (branch != 1), rows)
    present = np.flatnonzero(branch == 1 - node[2])
    sub = pos[present]
    values = _read(node[1], sub, lim[present], rows[present], c)
    pos[present] = sub
    if len(present) == len(pos):
        return values
    index = np.full(len(pos), -1, dtype=np.int64)
    index[present] = np.arange(len(present))
    return values.take(pa.array(index, mask=index < 0))


def _array(
    items: Node, pos: np.ndarray, lim: np.ndarray, rows: np.ndarray, c: _Cursors
) -> pa.Array:
    """Blocks of items: per block, its count, then one item of every array still in its
    block per step (an item's place depends on the one before it). Every item takes a byte
    at least, which bounds a count, hence the steps."""
    counts = np.zeros(len(pos), dtype=np.int64)
    chunks: list[pa.Array] = []
    owners: list[np.ndarray] = []
    places: list[np.ndarray] = []
    todo = np.arange(len(pos))  # arrays whose next block count is to be read
    while len(todo):
        at, end, who = pos[todo], lim[todo], rows[todo]
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
        for k in range(int(count.max())):
            step = np.flatnonzero(count > k)
            here = at[step]
            chunks.append(_read(items, here, end[step], who[step], c))
            at[step] = here
            owners.append(todo[step])
            places.append(counts[todo[step]] + k)  # the item's place in its array
        pos[todo] = at
        counts[todo] += count
        todo = todo[count > 0]
    offsets = np.concatenate(([0], np.cumsum(counts)))
    if not chunks:
        none = np.zeros(0, np.int64)
        values = _read(items, none, none.copy(), none.copy(), c)
    elif len(chunks) == 1:
        values = chunks[0]
    else:  # items in order of their arrays, then of their places
        order = np.empty(int(offsets[-1]), dtype=np.int64)
        order[offsets[np.concatenate(owners)] + np.concatenate(places)] = np.arange(len(order))
        values = pa.concat_arrays(chunks).take(pa.array(order))
    return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), values)


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
        starts, ends = bounds[rows].astype(np.int64) + skip, bounds[rows + 1].astype(np.int64)
        if data is None or not len(rows):  # every value empty
            data = pa.py_buffer(b"")
        first, last = (int(starts[0]), int(ends[-1])) if len(rows) else (0, 0)
        c = _Cursors(data, first, last, len(rows))
        pos = starts.copy()
        decoded = _read(self._node, pos, ends, np.arange(len(rows)), c)
        _check_utf8(c)
        right = ~c.bad & (pos == ends)
        try:
            return decoded.cast(struct), right
        except (pa.ArrowException, ValueError):  # not expected: the per-value decoder then
            return None
