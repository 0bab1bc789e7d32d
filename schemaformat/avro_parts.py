"""Columns read by the Avro column decoder (schemaformat/avro_arrow.py), before they are Arrow.

An array's items are read a step at a time (the k-th item of every array at step k), so they
must be put in order of their arrays before they are one Arrow array. Reordering numpy
vectors of numbers and of string positions costs a fraction of building an Arrow array per
step and reordering those with `take`; so every value is read into a `Part` (numpy vectors),
parts are reordered as numpy, and each column becomes Arrow once, in its table type.

Strings and bytes are kept as the spans of their bytes in the bodies' buffer, and gathered by
Arrow's `take` from the buffer itself when the column is built: through a binary array whose
even elements are the values and odd ones the bytes between them. A built column's spans
are in buffer order (a body's values follow one another, bodies follow one another), which
is what makes that array's offsets ascend.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import pyarrow as pa

# A node of the read plan: ("varint", kind) | ("fixed", kind) | ("bytes", kind)
# | ("enum", symbols) | ("record", [(name, node)], type) | ("array", node, type)
# | ("nullable", node, the branch index of null).
Node = tuple[Any, ...]
_INT32_END = 2**31  # spans ending before this byte are addressed with 32-bit offsets
_MILLIS = {"timestamp-millis"}


class Buffer(Protocol):
    """The bodies' buffer, where each body starts in it, and the rows found wrong."""

    buffer: pa.Buffer
    starts: np.ndarray
    bad: np.ndarray


class Part(Protocol):
    def take(self, index: np.ndarray) -> Part:
        """The values at `index` (numpy positions)."""
        ...

    def concat(self, parts: list[Any]) -> Part:
        """The parts (this one's kind, of one node) as one, in the order given."""
        ...

    def arrow(self, c: Buffer) -> pa.Array:
        """The values as one Arrow array of the node's table type."""
        ...


def concat(parts: list[Part]) -> Part:
    """One part of the parts of one node, in the order given."""
    return parts[0].concat(parts)


def placed(parts: list[Part], wheres: list[np.ndarray]) -> Part:
    """One part of the parts of one node, each part's values at its `wheres` (together
    every place once): numbers and spans are written to their places, others reordered."""
    total = sum(len(w) for w in wheres)
    first = parts[0]
    if isinstance(first, Values):
        out = np.empty(total, dtype=first.values.dtype)
        for part, where in zip(parts, wheres, strict=True):
            out[where] = part.values  # type: ignore[attr-defined]
        return Values(first.node, out)
    if isinstance(first, Spans):
        starts, ends = np.empty(total, dtype=np.int64), np.empty(total, dtype=np.int64)
        for part, where in zip(parts, wheres, strict=True):
            assert isinstance(part, Spans)
            starts[where], ends[where] = part.starts, part.ends
        return Spans(first.kind, starts, ends)
    if isinstance(first, Record):
        columns = zip(*(p.children for p in parts), strict=True)  # type: ignore[attr-defined]
        return Record(first.node, [placed(list(column), wheres) for column in columns])
    order = np.empty(total, dtype=np.int64)
    order[np.concatenate(wheres)] = np.arange(total)
    return concat(parts).take(order)


def node_type(node: Node) -> pa.DataType:
    """The table type of a node's values (schemaformat/arrow_types.py's mapping)."""
    kind = node[0]
    if kind in ("record", "array"):
        t: pa.DataType = node[2]
        return t
    if kind == "nullable":
        return node_type(node[1])
    if kind == "enum":
        return pa.string()
    return _LEAF_TYPES[node[1]]


_LEAF_TYPES = {
    "int": pa.int64(),
    "long": pa.int64(),
    "timestamp-millis": pa.timestamp("us", tz="UTC"),
    "timestamp-micros": pa.timestamp("us", tz="UTC"),
    "date": pa.date32(),
    "boolean": pa.bool_(),
    "float": pa.float64(),
    "double": pa.float64(),
    "string": pa.string(),
    "bytes": pa.binary(),
}


class Values:
    """Numbers, flags or enum indexes: one numpy vector."""

    def __init__(self, node: Node, values: np.ndarray) -> None:
        self.node, self.values = node, values

    def take(self, index: np.ndarray) -> Values:
        return Values(self.node, self.values[index])

    def concat(self, parts: list[Values]) -> Values:
        return Values(self.node, np.concatenate([p.values for p in parts]))

    def arrow(self, c: Buffer) -> pa.Array:
        kind, what = self.node
        if kind == "enum":
            return pa.array(what, pa.string()).take(pa.array(self.values))
        if what == "date":
            return pa.array(self.values.astype(np.int32)).view(pa.date32())
        values = self.values * 1000 if what in _MILLIS else self.values  # in range: no overflow
        if what == "float":
            values = values.astype(np.float64)
        array = pa.array(values)
        target = _LEAF_TYPES[what]
        return array if array.type == target else array.view(target)


class Spans:
    """Strings or bytes: where each value's bytes are in the buffer."""

    def __init__(self, kind: str, starts: np.ndarray, ends: np.ndarray) -> None:
        self.kind, self.starts, self.ends = kind, starts, ends

    def take(self, index: np.ndarray) -> Spans:
        return Spans(self.kind, self.starts[index], self.ends[index])

    def concat(self, parts: list[Spans]) -> Spans:
        starts = np.concatenate([p.starts for p in parts])
        return Spans(self.kind, starts, np.concatenate([p.ends for p in parts]))

    def arrow(self, c: Buffer) -> pa.Array:
        n = len(self.starts)
        target = _LEAF_TYPES[self.kind]
        if not n:
            return pa.array([], target)
        small = int(self.ends[-1]) < _INT32_END
        bounds = np.empty(2 * n, dtype=np.int32 if small else np.int64)
        bounds[0::2] = self.starts
        bounds[1::2] = self.ends
        spans_type = pa.binary() if small else pa.large_binary()
        spans = pa.Array.from_buffers(spans_type, 2 * n - 1, [None, pa.py_buffer(bounds), c.buffer])
        values = spans.take(pa.array(np.arange(0, 2 * n, 2)))
        if self.kind == "string":
            _check_utf8(values, self.starts, c)
            values = values.view(pa.string() if small else pa.large_string())
        return values if small else values.cast(target)


def _check_utf8(values: pa.Array, starts: np.ndarray, c: Buffer) -> None:
    """A string that is not UTF-8 fails its row alone (a mangled body must not cost its
    neighbours the column): Arrow checks the column at once, Python finds the culprits,
    and a culprit's row is the body its bytes are in."""
    data = values.buffers()[2]
    if data is None or np.frombuffer(data, np.uint8).max(initial=0) < 0x80:
        return  # ASCII (the common case): UTF-8
    text = pa.string() if values.type == pa.binary() else pa.large_string()
    try:
        values.view(text).validate(full=True)
    except pa.ArrowInvalid:
        for i, value in enumerate(values.to_pylist()):
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                c.bad[np.searchsorted(c.starts, starts[i], side="right") - 1] = True


class Record:
    def __init__(self, node: Node, children: list[Part]) -> None:
        self.node, self.children = node, children

    def take(self, index: np.ndarray) -> Record:
        return Record(self.node, [child.take(index) for child in self.children])

    def concat(self, parts: list[Record]) -> Record:
        columns = zip(*(p.children for p in parts), strict=True)
        return Record(self.node, [concat(list(column)) for column in columns])

    def arrow(self, c: Buffer) -> pa.Array:
        children = [child.arrow(c) for child in self.children]
        return pa.StructArray.from_arrays(children, fields=list(self.node[2]))


class Nullable:
    """Values some of which are null: which are present, and the present ones."""

    def __init__(self, present: np.ndarray, inner: Part) -> None:
        self.present, self.inner = present, inner

    def take(self, index: np.ndarray) -> Nullable:
        rank = np.cumsum(self.present) - 1  # a present value's place among the present
        present = self.present[index]
        return Nullable(present, self.inner.take(rank[index][present]))

    def concat(self, parts: list[Nullable]) -> Nullable:
        present = np.concatenate([p.present for p in parts])
        return Nullable(present, concat([p.inner for p in parts]))

    def arrow(self, c: Buffer) -> pa.Array:
        values = self.inner.arrow(c)
        if self.present.all():
            return values
        index = np.full(len(self.present), -1, dtype=np.int64)
        index[self.present] = np.arange(len(values))
        return values.take(pa.array(index, mask=index < 0))


class List:
    """Arrays: each one's item count, and the items in order of their arrays."""

    def __init__(self, node: Node, counts: np.ndarray, items: Part) -> None:
        self.node, self.counts, self.items = node, counts, items

    def take(self, index: np.ndarray) -> List:
        counts = self.counts[index]
        firsts = (np.cumsum(self.counts) - self.counts)[index]
        return List(self.node, counts, self.items.take(ranges(firsts, counts)))

    def concat(self, parts: list[List]) -> List:
        counts = np.concatenate([p.counts for p in parts])
        return List(self.node, counts, concat([p.items for p in parts]))

    def arrow(self, c: Buffer) -> pa.Array:
        offsets = np.zeros(len(self.counts) + 1, dtype=np.int32)
        np.cumsum(self.counts, out=offsets[1:])
        items = self.items.arrow(c)
        return pa.ListArray.from_arrays(pa.array(offsets), items, type=self.node[2])


def ranges(firsts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The positions firsts[i], firsts[i] + 1, …, counts[i] of them, for every i in turn."""
    total = int(counts.sum())
    if not total:
        return np.zeros(0, dtype=np.int64)
    ends = np.cumsum(counts)
    return np.repeat(firsts - (ends - counts), counts) + np.arange(total)
