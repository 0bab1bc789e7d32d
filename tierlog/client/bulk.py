"""Bulk produce: many records at once, partitioned and framed column-wise into batches.

`send_batch` and `send_table` hand their records here as one Arrow table (value, and
optionally key, headers, timestamp, partition). Each record's partition is Kafka's choice
(explicit, else murmur2 of the key, else sticky runs per batch for null keys); the table is
then sorted by partition (a stable sort: records keep their order within a partition) and cut
into batches of about `target_bytes`, each sent as it is through the producer's sender, with
the same idempotent sequences and retries as send()'s batches. Records that cannot go
(larger than max_request_size, a partition the topic lacks) fail on their own.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from itertools import repeat

import pyarrow as pa
import pyarrow.compute as pc

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
) -> list[int]:
    """Kafka's partition of each record (NO_PARTITION for an explicit one out of range)."""
    n = table.num_rows
    keys = table.column("key")
    if keys.null_count == n and "partition" not in table.column_names:
        out = [0] * n
        _sticky_runs(out, range(n), topic, partitions, partitioner, rows_per_batch)
        return out
    key_list = keys.to_pylist() if keys.null_count < n else repeat(None, n)
    explicit = (
        table.column("partition").to_pylist()
        if "partition" in table.column_names
        else repeat(None, n)
    )
    out = [0] * n
    null_rows: list[int] = []
    for_key = partitioner.for_key
    for i, (key, p) in enumerate(zip(key_list, explicit, strict=True)):
        if p is not None:
            out[i] = p if 0 <= p < partitions else NO_PARTITION
        elif key is None:
            null_rows.append(i)
        else:
            out[i] = for_key(key, partitions)
    _sticky_runs(out, null_rows, topic, partitions, partitioner, rows_per_batch)
    return out


def _sticky_runs(
    out: list[int],
    rows: Sequence[int],
    topic: str,
    partitions: int,
    partitioner: Partitioner,
    rows_per_batch: int,
) -> None:
    """Null keys: one sticky partition per batch's worth of records, as send() would."""
    for start in range(0, len(rows), rows_per_batch):
        p = partitioner.sticky(topic, partitions)
        for i in rows[start : start + rows_per_batch]:
            out[i] = p
        partitioner.batch_closed(topic, p)


def plan_batches(
    table: pa.Table,
    parts: Sequence[int],
    topic: str,
    target_bytes: int,
    max_record_bytes: int,
) -> tuple[list[ProducerBatch], list[int], pa.Array]:
    """The batches, the sorted position each starts at, and the permutation (input index of
    each sorted position). Rejected records come last, in batches failed already."""
    sizes = record_sizes(table)
    part_array = pa.array(parts, pa.int32())
    too_large = pc.greater(sizes, max_record_bytes)
    part_array = pc.if_else(too_large, pa.scalar(TOO_LARGE, pa.int32()), part_array)
    # Real partitions first, in order; the rejected (negative) marks after them.
    order_key = pc.if_else(pc.less(part_array, 0), pc.subtract(2**30, part_array), part_array)
    perm = pc.sort_indices(order_key)
    sorted_table = table.take(perm)
    sorted_parts = part_array.take(perm)
    sorted_sizes = sizes.take(perm)
    runs = pc.run_end_encode(sorted_parts)
    batches: list[ProducerBatch] = []
    starts: list[int] = []
    begin = 0
    for end, p in zip(runs.run_ends.to_pylist(), runs.values.to_pylist(), strict=True):
        rows = sorted_table.slice(begin, end - begin)
        if p < 0:
            batches.append(_rejected(topic, p, rows, max_record_bytes))
            starts.append(begin)
        else:
            run_sizes = sorted_sizes.slice(begin, end - begin)
            for offset, length, size in _chunks(run_sizes, target_bytes):
                batch = ProducerBatch(TopicPartition(topic, p), deadline=0.0)
                batch.arrow = _framed(rows.slice(offset, length), p)
                batch.size = size
                batch.closed = True
                batches.append(batch)
                starts.append(begin + offset)
        begin = end
    return batches, starts, perm


def _chunks(sizes: pa.Array, target: int) -> list[tuple[int, int, int]]:
    """(offset, length, bytes) runs of about `target` bytes (a run ends past its target by
    at most one record)."""
    cum = pc.cumulative_sum(sizes)
    chunk_of = pc.divide(pc.subtract(cum, sizes), target)  # by where each record starts
    runs = pc.run_end_encode(chunk_of)
    out: list[tuple[int, int, int]] = []
    begin, cum_list = 0, cum
    for end in runs.run_ends.to_pylist():
        before = cum_list[begin - 1].as_py() if begin else 0
        out.append((begin, end - begin, cum_list[end - 1].as_py() - before))
        begin = end
    return out


def _framed(rows: pa.Table, partition: int) -> pa.RecordBatch:
    n = rows.num_rows
    cols: dict[str, pa.Array] = {
        "key": rows.column("key").combine_chunks(),
        "value": rows.column("value").combine_chunks(),
        "timestamp": rows.column("timestamp").combine_chunks(),
        "partition": pa.repeat(pa.scalar(partition, pa.int32()), n),
    }
    if "headers" in rows.column_names:
        cols["headers"] = rows.column("headers").combine_chunks()
    return pa.RecordBatch.from_pydict(cols)


def _rejected(topic: str, mark: int, rows: pa.Table, max_record_bytes: int) -> ProducerBatch:
    batch = ProducerBatch(TopicPartition(topic, -1), deadline=0.0)
    batch.arrow = _framed(rows, -1)
    if mark == TOO_LARGE:
        error = ApiError(
            "MESSAGE_TOO_LARGE", f"the record exceeds max_request_size ({max_record_bytes} B)"
        )
    else:
        error = ApiError("UNKNOWN_TOPIC_OR_PARTITION", f"{topic!r} has no such partition")
    batch.fail(error)
    return batch
