"""Records as poll() hands them out: views of a fetch answer's Arrow columns, not copies.

A fetch answer stays one Arrow table (RecordRows); a ConsumerRecord is that table and a row
number. A column becomes Python values only when some record of the answer asks for that
field, and then for the whole answer at once (one C loop, not one Arrow call per record), so
records whose keys or headers nobody reads never build those objects. The same rows serve
poll_arrow(), which hands out the columns themselves.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from itertools import repeat
from typing import Any, Protocol

import pyarrow as pa

from logformat.schema import CONSUMER_SCHEMA
from tierlog.client.types import Header

# What poll_arrow() and poll_batch() hand out: CONSUMER_SCHEMA with the partition named.
ARROW_RECORDS_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string(), nullable=False),
        pa.field("partition", pa.int32(), nullable=False),
        *CONSUMER_SCHEMA,
    ]
)
_FIELDS = ("topic", "partition", "offset", "timestamp", "key", "value", "headers")


class Columns(Protocol):
    """Per-field Python values of some rows, looked up by row number."""

    topic: str
    partition: int
    offsets: list[int]
    timestamps: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[list[Header]]


def _headers(raw: list[Any]) -> list[list[Header]]:
    # A list per record even when empty: records never share a mutable list.
    return [[(h["key"], h["value"]) for h in hs] if hs else [] for hs in raw]


class RecordRows:
    """One partition's rows of one fetch answer (CONSUMER_SCHEMA), in offset order."""

    offsets: list[int]
    timestamps: list[int]
    keys: list[bytes | None]
    values: list[bytes | None]
    headers: list[list[Header]]

    def __init__(self, topic: str, partition: int, table: pa.Table) -> None:
        self.topic = topic
        self.partition = partition
        self.table = table
        self.num_rows: int = table.num_rows

    def __getattr__(self, name: str) -> Any:
        # Only reached while a column has no Python values yet: convert it once, keep it.
        column = self.table.column
        if name == "offsets":
            out: Any = column("offset").to_pylist()
        elif name == "timestamps":
            out = column("timestamp").cast(pa.int64()).to_pylist()
        elif name in ("keys", "values"):
            out = column(name[:-1]).to_pylist()
        elif name == "headers":
            hs = column("headers")
            n = self.num_rows
            out = [[] for _ in range(n)] if hs.null_count == n else _headers(hs.to_pylist())
        else:
            raise AttributeError(name)
        setattr(self, name, out)
        return out

    def records(self, start: int, end: int) -> Iterator[ConsumerRecord]:
        return map(_RowRecord, repeat(self), range(start, end))

    def batch(self, start: int, end: int) -> pa.RecordBatch:
        """Rows [start, end) with topic and partition columns (ARROW_RECORDS_SCHEMA)."""
        part = self.table.slice(start, end - start).combine_chunks()
        n = part.num_rows
        names = pa.repeat(pa.scalar(self.topic, pa.string()), n)
        partitions = pa.repeat(pa.scalar(self.partition, pa.int32()), n)
        columns = [names, partitions] + [c.combine_chunks() for c in part.columns]
        return pa.RecordBatch.from_arrays(columns, schema=ARROW_RECORDS_SCHEMA)


class _OneRecord:
    """The columns of a record built from Python values (ConsumerRecord(...))."""

    __slots__ = ("headers", "keys", "offsets", "partition", "timestamps", "topic", "values")

    def __init__(self, *fields: Any) -> None:
        topic, partition, offset, timestamp, key, value, headers = fields
        self.topic, self.partition = topic, partition
        self.offsets, self.timestamps = [offset], [timestamp]
        self.keys, self.values, self.headers = [key], [value], [headers]


@functools.total_ordering
class ConsumerRecord:
    """A record read from a partition: (topic, partition, offset, timestamp, key, value,
    headers), with Kafka's names. Behaves as the named tuple it was: fields by name, index
    or unpacking, ==, ordering, hash, _asdict() and _replace()."""

    __slots__ = ("_i", "_rows")
    _fields = _FIELDS
    _rows: Columns
    _i: int

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[Header],
    ) -> None:
        self._rows = _OneRecord(topic, partition, offset, timestamp, key, value, headers)
        self._i = 0

    @property
    def topic(self) -> str:
        return self._rows.topic

    @property
    def partition(self) -> int:
        return self._rows.partition

    @property
    def offset(self) -> int:
        return self._rows.offsets[self._i]

    @property
    def timestamp(self) -> int:
        """ms since the epoch."""
        return self._rows.timestamps[self._i]

    @property
    def key(self) -> bytes | None:
        return self._rows.keys[self._i]

    @property
    def value(self) -> bytes | None:
        """None is a tombstone."""
        return self._rows.values[self._i]

    @property
    def headers(self) -> list[Header]:
        return self._rows.headers[self._i]

    def _tuple(self) -> tuple[Any, ...]:
        return tuple(getattr(self, f) for f in _FIELDS)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._tuple())

    def __len__(self) -> int:
        return len(_FIELDS)

    def __getitem__(self, index: int | slice) -> Any:
        return self._tuple()[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ConsumerRecord | tuple):
            return self._tuple() == tuple(other)
        return NotImplemented

    def __lt__(self, other: object) -> bool:
        if isinstance(other, ConsumerRecord | tuple):
            return self._tuple() < tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._tuple())

    def __repr__(self) -> str:
        inner = ", ".join(f"{f}={v!r}" for f, v in zip(_FIELDS, self._tuple(), strict=True))
        return f"ConsumerRecord({inner})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (ConsumerRecord, self._tuple())  # the values, not the whole fetch answer

    def _asdict(self) -> dict[str, Any]:
        return dict(zip(_FIELDS, self._tuple(), strict=True))

    def _replace(self, **changes: Any) -> ConsumerRecord:
        return ConsumerRecord(**{**self._asdict(), **changes})


class _RowRecord(ConsumerRecord):
    """Row `i` of fetched rows: built by map() in C, fields read from the rows when asked."""

    __slots__ = ()

    def __init__(self, rows: RecordRows, i: int) -> None:
        self._rows = rows
        self._i = i


def empty_rows(tp: tuple[str, int]) -> RecordRows:
    return RecordRows(tp[0], tp[1], CONSUMER_SCHEMA.empty_table())
