"""DeltaTopicTable logic on a local-filesystem Delta table (no network)."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from coldstore.delta_table import DeltaTopicTable, OutOfOrderCommitError, file_stats
from coldstore.layout import data_file_relpath
from coldstore.parquet_writer import ParquetFile, write_parquet
from logformat.frame import encode_frame
from logformat.records import build_batch

T0 = 1_700_000_000_000


def parquet_for(base, n, ts0=T0):
    batch = build_batch(
        [f"k{i}".encode() for i in range(n)],
        [f"v{base + i}".encode() for i in range(n)],
        [None] * n,
        [ts0 + i for i in range(n)],
        T0,
    )
    return write_parquet(bytes(encode_frame(batch, base_offset=base)))


def add(table, root, partition, pf):
    rel = data_file_relpath(partition, pf.base_offset)
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_bytes(pf.output)
    return table.commit_file(partition, pf, rel)


@pytest.fixture
def local_table(tmp_path):
    root = tmp_path / "topics" / "orders"
    table = DeltaTopicTable(str(root))
    table.ensure_created()
    return table, root


def test_file_stats_json():
    pf = ParquetFile(b"", 5, 9, 1_000, 2_500, 5, 100, 1)
    assert json.loads(file_stats(pf)) == {
        "numRecords": 5,
        "minValues": {"offset": 5, "timestamp": "1970-01-01T00:00:01.000Z"},
        "maxValues": {"offset": 9, "timestamp": "1970-01-01T00:00:02.500Z"},
        "nullCount": {"offset": 0, "timestamp": 0},
    }


def test_commit_retry_and_order(local_table):
    table, root = local_table
    table.ensure_created()  # again: a no-op
    assert table.topic == "orders"
    v1 = add(table, root, 0, parquet_for(0, 10))
    assert v1 == 1 and table.transaction_version(0) == 0
    assert add(table, root, 0, parquet_for(0, 10)) == 1  # retried segment, new object: no add
    v2 = add(table, root, 0, parquet_for(10, 5))
    assert v2 == 2 and table.transaction_version(0) == 10
    assert add(table, root, 0, parquet_for(0, 10)) == 2  # older retry: covered by a live file
    assert add(table, root, 0, parquet_for(3, 1)) == 2  # inside a live file's offsets
    files = table.files()
    assert [(f.partition, f.min_offset, f.max_offset, f.records) for f in files] == [
        (0, 0, 9, 10),
        (0, 10, 14, 5),
    ]
    assert files[0].min_timestamp == T0 and files[0].max_timestamp == T0 + 9
    rows = DeltaTable(str(root)).to_pyarrow_table().sort_by("offset")
    assert rows.column("offset").to_pylist() == list(range(15))


def test_out_of_order_is_refused(local_table):
    table, root = local_table
    add(table, root, 1, parquet_for(100, 10))
    with pytest.raises(OutOfOrderCommitError):
        add(table, root, 1, parquet_for(50, 10))  # below the txn version, not covered
    assert [f.min_offset for f in table.files()] == [100]


def test_commit_checks_paths(local_table):
    table, _ = local_table
    pf = parquet_for(0, 1)
    with pytest.raises(ValueError, match="partition 0"):
        table.commit_file(0, pf, "partition=1/x.parquet")
    with pytest.raises(ValueError, match="not under"):
        table.commit_file(0, pf, "s3://other/x.parquet")
    assert table.relpath(table.uri + "/partition=0/a.parquet") == "partition=0/a.parquet"
    s3 = DeltaTopicTable("s3://b/pre/topics/t/")
    assert s3.relpath("pre/topics/t/partition=1/a.parquet") == "partition=1/a.parquet"
    assert s3.relpath("s3://b/pre/topics/t/partition=1/a.parquet") == "partition=1/a.parquet"
    with pytest.raises(ValueError):
        s3.relpath("s3://b/pre/topics/t2/partition=1/a.parquet")


def test_remove_files(local_table):
    table, root = local_table
    add(table, root, 0, parquet_for(0, 3))
    add(table, root, 2, parquet_for(0, 4))
    keep, drop = table.files()
    assert drop.partition == 2
    v = table.remove_files([drop.path, "partition=9/absent.parquet"], data_change=True)
    assert table.files() == [keep]
    assert table.remove_files([drop.path], data_change=True) == v  # nothing left to remove
    assert DeltaTable(str(root)).to_pyarrow_table().num_rows == 3


def test_existing_table_with_other_partitioning_is_refused(tmp_path):
    root = tmp_path / "t"
    DeltaTable.create(str(root), pa.schema([("x", pa.int64())]))
    with pytest.raises(ValueError, match="partitioned"):
        DeltaTopicTable(str(root)).ensure_created()
    shutil.rmtree(root)
