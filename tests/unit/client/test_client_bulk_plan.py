"""plan_batches: one sort by partition, then zero-copy batches framed for the produce API."""

from __future__ import annotations

import array

import pyarrow as pa

from logformat.schema import HEADERS
from tierlog.client.bulk import assign_partitions, binary_column, plan_batches, produce_table
from tierlog.client.partitioner import Partitioner


def test_batches_are_per_partition_in_input_order_with_headers_and_rejects() -> None:
    n = 60
    rows = {
        "key": [b"k%d" % (i % 7) for i in range(n)],
        "value": [b"x" * (500 if i == 13 else 10) for i in range(n)],
        "headers": [[{"key": "i", "value": b"%d" % i}] for i in range(n)],
    }
    schema = pa.schema([("key", pa.binary()), ("value", pa.binary()), ("headers", HEADERS)])
    whole = pa.table(rows, schema=schema)
    table = produce_table(pa.concat_tables([whole.slice(0, 25), whole.slice(25)]))
    assert table.column("value").num_chunks == 2  # the sort must gather across chunks
    parts = assign_partitions(table, "t", 3, Partitioner(), 100)
    batches, starts, perm = plan_batches(table, parts, "t", 200, 100)
    real = [b for b in batches if b.tp.partition >= 0]
    framed = ["key", "value", "timestamp", "partition", "headers"]
    assert all(b.arrow.schema.names == framed for b in real)
    seen: list[int] = []
    for batch in real:
        assert set(batch.arrow.column("partition").to_pylist()) == {batch.tp.partition}
        index = [int(h[0]["value"]) for h in batch.arrow.column("headers").to_pylist()]
        assert index == sorted(index)  # input order kept within a partition
        assert batch.size <= 200 or batch.record_count == 1
        seen += index
    # Record 13 is above max_record_bytes (100): it fails on its own, the rest are planned.
    assert sorted(seen) == [i for i in range(n) if i != 13]
    rejected = [b for b in batches if b.tp.partition < 0]
    assert len(rejected) == 1 and rejected[0].done.is_set() and rejected[0].record_count == 1
    assert perm.to_pylist()[starts[batches.index(rejected[0])]] == 13


def test_an_empty_table_plans_no_batches() -> None:
    table = produce_table(pa.table({"value": pa.array([], pa.binary())}))
    parts = assign_partitions(table, "t", 3, Partitioner(), 100)
    batches, starts, _perm = plan_batches(table, parts, "t", 200, 100)
    assert batches == [] and starts == []


def test_binary_column_matches_pa_array_for_every_kind_of_item() -> None:
    cases: list[list[object]] = [
        [b"a", b"", b"ccc" * 100],
        [],
        [b"a", None, b"c"],  # tombstones
        ["text", b"bytes"],  # str is taken as UTF-8, as pa.array does
        [bytearray(b"xy"), b"z"],
        [memoryview(array.array("h", [1, 2, 3])), b"z"],  # len() counts items, not bytes
    ]
    for items in cases:
        got = binary_column(items)
        assert got.type == pa.binary()
        assert got.equals(
            pa.array(
                [bytes(i) if isinstance(i, bytearray | memoryview) else i for i in items],
                pa.binary(),
            )
        ), items
