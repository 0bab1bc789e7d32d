"""Bulk produce: many records at once, partitioned and framed column-wise into batches.

`send_batch` and `send_table` hand their records here as one Arrow table (value, and
optionally key, headers, timestamp, partition). Each record's partition is Kafka's choice
(explicit, else murmur2 of the key, else sticky runs per batch for null keys); the table is
then sorted by partition (a stable sort: records keep their order within a partition) and cut
into batches of at most `target_bytes`, each sent as it is through the producer's sender, with
the same idempotent sequences and retries as send()'s batches. Records that cannot go
(larger than max_request_size, a partition the topic lacks) fail on their own.
"""

from __future__ import annotations

import array
import itertools
import sys
import time
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from logformat.partitioner import murmur2_array
from logformat.schema import HEADERS
from tierlog.client.batch import RECORD_OVERHEAD, ProducerBatch
from tierlog.client.errors import ApiError
from tierlog.client.partitioner import Partitioner
from tierlog.client.types import TopicPartition

COLUMNS = ("key", "value", "headers", "timestamp", "partition")
TOO_LARGE, NO_PARTITION = -1, -2  # partition marks of records that fail on their own


def produce_table(table: pa.Table) -> pa.Table:
    """`table` with the produce columns' types, or a clear error for anything else."""
    unknown = [c for c in table.column_names if c not in COLUMNS]
    if unknown or "value" not in table.column_names:
        raise ValueError(
            "send_table wants a 'value' column and optionally key, headers, timestamp and "
            f"partition; got {table.column_names}"
        )
    n = table.num_rows
    cols = {
        "key": _binary(table, "key", n),
        "value": _binary(table, "value", n),
        "timestamp": _column(table, "timestamp", pa.int64(), n)
        or pa.repeat(pa.scalar(time.time_ns() // 1_000_000, pa.int64()), n),
    }
    headers = _column(table, "headers", HEADERS, n)
    if headers is not None:
        cols["headers"] = headers
    partition = _column(table, "partition", pa.int32(), n)
    if partition is not None:
        cols["partition"] = partition
    return pa.table(cols)


def _binary(table: pa.Table, name: str, n: int) -> pa.ChunkedArray:
    if name not in table.column_names:
        return pa.chunked_array([pa.nulls(n, pa.binary())])
    col = table.column(name)
    if col.type == pa.binary():
        return col
    if col.type in (pa.string(), pa.large_binary(), pa.large_string(), pa.null()):
        return col.cast(pa.binary())
    raise TypeError(f"column {name!r} must be binary or string, not {col.type}")


def _column(table: pa.Table, name: str, typ: pa.DataType, n: int) -> pa.ChunkedArray | None:
    if name not in table.column_names:
        return None
    col = table.column(name)
    try:
        return col if col.type == typ else col.cast(typ)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise TypeError(f"column {name!r} must be {typ}, not {col.type}") from exc


def binary_column(items: Sequence[Any]) -> pa.Array:
    """`items` (bytes, or None / str / other buffers) as an Arrow binary array. All bytes,
    the common case, go in two C-speed passes (one join, one running sum of lengths), about
    half what pa.array() costs; anything else takes pa.array()'s general path."""
    try:
        offsets = array.array("i", [0])
        offsets.extend(itertools.accumulate(map(len, items)))
        data = b"".join(items)
    except (TypeError, OverflowError):  # None, str, objects without len, over 2 GiB
        return pa.array(items, pa.binary())
    # A buffer whose len() is not its size in bytes; or int32 offsets not in Arrow's layout.
    if offsets[-1] != len(data) or offsets.itemsize != 4 or sys.byteorder != "little":
        return pa.array(items, pa.binary())
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    return pa.Array.from_buffers(pa.binary(), len(items), buffers)


def record_sizes(table: pa.Table) -> pa.Array:
    """Each record's size as the accumulator counts it (key + value + overhead)."""
    sizes = pc.add(
        pc.fill_null(pc.binary_length(table.column("value")), 0),
        pc.fill_null(pc.binary_length(table.column("key")), 0),
    )
    return pc.add(sizes, RECORD_OVERHEAD).combine_chunks().cast(pa.int64())


def assign_partitions(
    table: pa.Table,
    topic: str,
    partitions: int,
    partitioner: Partitioner,
    rows_per_batch: int,
) -> pa.Array:
    """Kafka's partition of each record (NO_PARTITION for an explicit one out of range),
    column-wise: murmur2 in Arrow kernels, no Python per record."""
    n = table.num_rows
    keys = table.column("key").combine_chunks()
    if keys.null_count < n:
        hashes = pc.bit_wise_and(murmur2_array(keys), pa.scalar(0x7FFFFFFF, pa.uint32()))
        quotient = pc.divide(hashes, pa.scalar(partitions, pa.uint32()))
        chosen = pc.subtract(hashes, pc.multiply(quotient, partitions)).cast(pa.int32())
    else:
        chosen = pa.repeat(pa.scalar(0, pa.int32()), n)
    unplaced = keys.is_null()
    if "partition" in table.column_names:
        explicit = table.column("partition").combine_chunks()
        given = explicit.is_valid()
        in_range = pc.and_(pc.greater_equal(explicit, 0), pc.less(explicit, partitions))
        explicit = pc.if_else(in_range, explicit, pa.scalar(NO_PARTITION, pa.int32()))
        chosen = pc.if_else(given, explicit, chosen)
        unplaced = pc.and_(unplaced, pc.invert(given))
    count = pc.sum(unplaced.cast(pa.int64())).as_py() or 0
    if count:
        chosen = pc.replace_with_mask(
            chosen, unplaced, _sticky_runs(count, topic, partitions, partitioner, rows_per_batch)
        )
    return chosen


def _sticky_runs(
    count: int, topic: str, partitions: int, partitioner: Partitioner, rows_per_batch: int
) -> pa.Array:
    """Null keys: one sticky partition per batch's worth of records, as send() would."""
    runs: list[pa.Array] = []
    for start in range(0, count, rows_per_batch):
        p = partitioner.sticky(topic, partitions)
        runs.append(pa.repeat(pa.scalar(p, pa.int32()), min(rows_per_batch, count - start)))
        partitioner.batch_closed(topic, p)
    return pa.concat_arrays(runs)


def plan_batches(
    table: pa.Table,
    parts: pa.Array,
    topic: str,
    target_bytes: int,
    max_record_bytes: int,
) -> tuple[list[ProducerBatch], list[int], pa.Array]:
    """The batches, the sorted position each starts at, and the permutation (input index of
    each sorted position). Rejected records come last, in batches failed already.

    One gather (the sort by partition) copies the records; every batch is then a zero-copy
    slice of it, with the sorted partition marks as its partition column."""
    sizes = record_sizes(table)
    too_large = pc.greater(sizes, max_record_bytes)
    part_array = pc.if_else(too_large, pa.scalar(TOO_LARGE, pa.int32()), parts)
    # Real partitions first, in order; the rejected (negative) marks after them.
    order_key = pc.if_else(pc.less(part_array, 0), pc.subtract(2**30, part_array), part_array)
    perm = pc.sort_indices(order_key)
    sorted_rows = _one_batch(table.select(_framed_columns(table)).take(perm))
    sorted_parts = part_array.take(perm)
    sorted_sizes = sizes.take(perm)
    runs = pc.run_end_encode(sorted_parts)
    batches: list[ProducerBatch] = []
    starts: list[int] = []
    begin = 0
    for end, p in zip(runs.run_ends.to_pylist(), runs.values.to_pylist(), strict=True):
        if p < 0:
            batches.append(
                _rejected(topic, p, sorted_rows.slice(begin, end - begin), max_record_bytes)
            )
            starts.append(begin)
        else:
            run_sizes = sorted_sizes.slice(begin, end - begin)
            for offset, length, size in _chunks(run_sizes, target_bytes):
                at = begin + offset
                batch = ProducerBatch(TopicPartition(topic, p), deadline=0.0)
                batch.arrow = _framed(sorted_rows.slice(at, length), sorted_parts.slice(at, length))
                batch.size = size
                batch.closed = True
                batches.append(batch)
                starts.append(at)
        begin = end
    return batches, starts, perm


def _framed_columns(table: pa.Table) -> list[str]:
    names = ["key", "value", "timestamp"]
    return [*names, "headers"] if "headers" in table.column_names else names


def _one_batch(table: pa.Table) -> pa.RecordBatch:
    """`table`'s rows as one record batch (no copy when it is one chunk, as take gives)."""
    if table.num_rows == 0:
        return pa.RecordBatch.from_pylist([], schema=table.schema)
    batches = table.to_batches()
    return batches[0] if len(batches) == 1 else table.combine_chunks().to_batches()[0]


def _chunks(sizes: pa.Array, target: int) -> list[tuple[int, int, int]]:
    """(offset, length, bytes) runs of at most `target` bytes (or one larger record)."""
    cum = pc.cumulative_sum(sizes)
    chunk_of = pc.divide(pc.subtract(cum, 1), target)  # by where each record ends
    out: list[tuple[int, int, int]] = []
    begin = 0
    for end in pc.run_end_encode(chunk_of).run_ends.to_pylist():
        before = cum[begin - 1].as_py() if begin else 0
        out.append((begin, end - begin, cum[end - 1].as_py() - before))
        begin = end
    return out


def _framed(rows: pa.RecordBatch, partitions: pa.Array) -> pa.RecordBatch:
    """The produce request's columns: key, value, timestamp, partition and maybe headers."""
    names = ["key", "value", "timestamp", "partition"]
    arrays = [rows.column(0), rows.column(1), rows.column(2), partitions]
    if rows.num_columns > 3:
        names.append("headers")
        arrays.append(rows.column(3))
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _rejected(topic: str, mark: int, rows: pa.RecordBatch, max_record_bytes: int) -> ProducerBatch:
    batch = ProducerBatch(TopicPartition(topic, -1), deadline=0.0)
    batch.arrow = _framed(rows, pa.repeat(pa.scalar(-1, pa.int32()), rows.num_rows))
    if mark == TOO_LARGE:
        error = ApiError(
            "MESSAGE_TOO_LARGE", f"the record exceeds max_request_size ({max_record_bytes} B)"
        )
    else:
        error = ApiError("UNKNOWN_TOPIC_OR_PARTITION", f"{topic!r} has no such partition")
    batch.fail(error)
    return batch
