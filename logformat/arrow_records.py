"""Arrow produce (the fast path): a user's Arrow data → RECORD_SCHEMA batches (docs/design.md §5).

Accepted columns are documented in logformat.records. Everything here is vectorized with
pyarrow.compute: O(1) Python operations per batch (per partition when splitting), never
per record, except murmur2 for keyed records that carry no explicit partition.
"""

from __future__ import annotations

from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from logformat.errors import ErrorCode, TierlogError
from logformat.partitioner import StickyPartitioner, assign_partitions
from logformat.schema import HEADERS, RECORD_SCHEMA, TIMESTAMP

# 9999-12-31T23:59:59.999Z: beyond it dates break in Spark, Parquet readers and datetime.
MAX_TIMESTAMP_MS = 253_402_300_799_999
MAX_PARTITION = 0x7FFFFFFF


_DELTAS: list[pa.Array] = [pa.array(range(4096), type=pa.int32())]


def offset_deltas(n: int) -> pa.Array:
    """int32 0..n-1, the offset_delta column of a fresh batch.

    A zero-copy slice of a cached 0..N array: building it per batch from a Python range
    cost more than everything else on the Arrow produce path.
    """
    cached = _DELTAS[0]
    if n > len(cached):
        size = max(n, 2 * len(cached))
        cached = _DELTAS[0] = pa.array(range(size), type=pa.int32())
    return cached.slice(0, n)


_ARROW_COLUMNS = ("key", "value", "headers", "timestamp", "partition")
_SCALE_TO_MS = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}


class NormalizedArrow(NamedTuple):
    batch: pa.RecordBatch  # RECORD_SCHEMA, offset_delta 0..n-1
    partitions: pa.Array | None  # int32 with nulls = unassigned; None when no column given


def _bad_column(name: str, typ: pa.DataType, want: str) -> TierlogError:
    return TierlogError(ErrorCode.INVALID_RECORD, f"column {name!r} has type {typ}; want {want}")


def _binary_column(name: str, arr: pa.Array | None, n: int) -> pa.Array:
    if arr is None or pa.types.is_null(arr.type):
        return pa.nulls(n, pa.binary())
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if not (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_string_view(t)
        or pa.types.is_fixed_size_binary(t)
    ):
        raise _bad_column(name, t, "binary, large_binary, string, large_string or null")
    return arr if t == pa.binary() else _cast(name, arr, pa.binary())


def _cast(name: str, arr: pa.Array, to: pa.DataType) -> pa.Array:
    try:
        return arr.cast(to)
    except (pa.ArrowException, ValueError, TypeError) as exc:
        raise TierlogError(ErrorCode.INVALID_RECORD, f"column {name!r}: {exc}") from None


def _headers_column(arr: pa.Array | None, n: int) -> pa.Array:
    if arr is None or pa.types.is_null(arr.type):
        return pa.nulls(n, HEADERS)
    t = arr.type
    want = "list<struct<key string, value binary|string>> or map<string, binary|string>"
    if pa.types.is_map(t):
        kt, vt = t.key_type, t.item_type
    elif (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_struct(t.value_type):
        st = t.value_type
        if st.num_fields != 2 or {st.field(0).name, st.field(1).name} != {"key", "value"}:
            raise _bad_column("headers", t, want)
        kt, vt = st.field("key").type, st.field("value").type
    else:
        raise _bad_column("headers", t, want)
    ok_key = pa.types.is_string(kt) or pa.types.is_large_string(kt)
    ok_value = any(
        f(vt)
        for f in (
            pa.types.is_binary,
            pa.types.is_large_binary,
            pa.types.is_string,
            pa.types.is_large_string,
            pa.types.is_null,
        )
    )
    if not (ok_key and ok_value):
        raise _bad_column("headers", t, want)
    return arr if t == HEADERS else _cast("headers", arr, HEADERS)  # rejects null names


def _timestamp_column(arr: pa.Array | None, n: int, now_ms: int) -> pa.Array:
    if arr is None or pa.types.is_null(arr.type):
        return pa.repeat(pa.scalar(now_ms, TIMESTAMP), n)
    t = arr.type
    if pa.types.is_timestamp(t):
        mul, div = _SCALE_TO_MS[t.unit]
    elif pa.types.is_integer(t):
        mul, div = 1, 1
    else:
        raise _bad_column("timestamp", t, "a timestamp or integer milliseconds")
    ms = _cast("timestamp", arr, pa.int64())
    if ms.null_count < len(ms):
        # Bounds on the raw values (Python ints), so that scaling below cannot overflow.
        lo, hi = (s.as_py() for s in pc.min_max(ms).values())
        if lo < 0 or hi * mul // div > MAX_TIMESTAMP_MS:
            raise TierlogError(
                ErrorCode.INVALID_RECORD,
                f"column 'timestamp' has values outside [0, {MAX_TIMESTAMP_MS}] ms",
            )
        if mul != 1:
            ms = pc.multiply(ms, mul)
        if div != 1:
            ms = pc.divide(ms, div)  # integer division: floors non-negative values to the ms
    if ms.null_count:
        ms = pc.fill_null(ms, now_ms)
    return ms.cast(TIMESTAMP)


def _partition_column(arr: pa.Array | None) -> pa.Array | None:
    if arr is None or pa.types.is_null(arr.type):
        return None
    if not pa.types.is_integer(arr.type):
        raise _bad_column("partition", arr.type, "an integer type")
    out = _cast("partition", arr, pa.int32())
    if out.null_count < len(out) and pc.min(out).as_py() < 0:
        raise TierlogError(ErrorCode.INVALID_RECORD, "column 'partition' has negative values")
    return out


def normalize_arrow(data: pa.Table | pa.RecordBatch, now_ms: int) -> NormalizedArrow:
    """A user's Arrow records as a RECORD_SCHEMA batch plus their partition column."""
    names = data.schema.names
    extra = [c for c in names if c not in _ARROW_COLUMNS]
    if extra:
        raise TierlogError(
            ErrorCode.INVALID_RECORD, f"unknown columns {extra}; allowed {list(_ARROW_COLUMNS)}"
        )
    if len(set(names)) != len(names):
        raise TierlogError(ErrorCode.INVALID_RECORD, f"duplicate columns in {names}")
    n = data.num_rows
    cols: dict[str, pa.Array] = {}
    for name in names:
        col = data.column(name)
        cols[name] = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    batch = pa.RecordBatch.from_arrays(
        [
            offset_deltas(n),
            _timestamp_column(cols.get("timestamp"), n, now_ms),
            _binary_column("key", cols.get("key"), n),
            _binary_column("value", cols.get("value"), n),
            _headers_column(cols.get("headers"), n),
        ],
        schema=RECORD_SCHEMA,
    )
    return NormalizedArrow(batch, _partition_column(cols.get("partition")))


def resolve_partitions(
    partitions: pa.Array | None,
    keys: pa.Array,
    num_partitions: int,
    sticky: StickyPartitioner | None = None,
) -> pa.Array:
    """int32 partition per record: explicit wins, else murmur2(key), else sticky (Kafka's rule).

    Explicit values are range-checked later, by split_by_partition. Keyed records without
    an explicit partition cost one murmur2 each in Python; the rest is vectorized.
    """
    n = len(keys)
    if partitions is not None and partitions.null_count == 0:
        return partitions
    need = None if partitions is None else partitions.is_null()
    if keys.null_count == n:
        count = n if partitions is None else partitions.null_count
        chosen = (sticky or StickyPartitioner()).take(count, num_partitions)
    else:
        todo = keys if need is None else keys.filter(need)
        chosen = assign_partitions(todo.to_pylist(), None, num_partitions, sticky)
    fill = pa.array(chosen, type=pa.int32())
    return fill if partitions is None else pc.replace_with_mask(partitions, need, fill)


def with_offset_deltas(batch: pa.RecordBatch) -> pa.RecordBatch:
    """`batch` with offset_delta reset to 0..n-1 (after a split or a filter)."""
    return batch.set_column(0, RECORD_SCHEMA.field(0), offset_deltas(batch.num_rows))


def split_by_partition(
    batch: pa.RecordBatch, partitions: pa.Array, num_partitions: int
) -> dict[int, pa.RecordBatch]:
    """Rows of `batch` grouped by partition, record order kept, offset deltas renumbered.

    Raises TierlogError(UNKNOWN_TOPIC_OR_PARTITION) for partitions outside [0, n).
    """
    if len(partitions) != batch.num_rows:
        raise ValueError("partitions and batch differ in length")
    if batch.num_rows == 0:
        return {}
    if partitions.null_count:
        raise ValueError("every record needs a partition before splitting")
    lo, hi = (s.as_py() for s in pc.min_max(partitions).values())
    if lo < 0 or hi >= num_partitions:
        bad = lo if lo < 0 else hi
        raise TierlogError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"partition {bad} does not exist (the topic has {num_partitions})",
        )
    if lo == hi:
        return {lo: with_offset_deltas(batch)}
    # A stable sort keeps each partition's records in request order.
    order = pc.sort_indices(partitions)
    ordered = batch.take(order)
    counts = pc.value_counts(partitions.take(order))
    out: dict[int, pa.RecordBatch] = {}
    start = 0
    for p, c in zip(
        counts.field("values").to_pylist(), counts.field("counts").to_pylist(), strict=True
    ):
        out[p] = with_offset_deltas(ordered.slice(start, c))
        start += c
    return out
