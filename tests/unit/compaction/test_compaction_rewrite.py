"""compaction/rewrite.py and DeltaTopicTable.replace_files on a local Delta table."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from coldstore.delta_table import DeltaTopicTable
from coldstore.layout import data_file_relpath
from coldstore.parquet_writer import write_parquet
from compaction.rewrite import (
    keep_mask,
    latest_offsets,
    read_data_file,
    split_by_bytes,
    write_table,
)
from logformat.frame import encode_frame
from logformat.records import build_batch

T0 = 1_700_000_000_000


def _parquet(base: int, keys: list[bytes | None], values: list[bytes | None]) -> bytes:
    n = len(keys)
    batch = build_batch(keys, values, [None] * n, [T0 + base + i for i in range(n)], T0)
    out = write_parquet(bytes(encode_frame(batch, base_offset=base))).output
    assert isinstance(out, bytes)
    return out


def test_latest_per_key_and_the_keep_mask() -> None:
    t = read_data_file(
        _parquet(0, [b"a", b"b", b"a", None, b"b", b"c"], [b"1", b"2", b"3", b"n", None, None])
    )
    latest = latest_offsets(t.select(["offset", "key"]))
    assert sorted(latest.to_pylist()) == [2, 4, 5]
    # tombstones at offsets 4 (ts T0+4) and 5 (ts T0+5); the horizon drops the first only
    kept = t.filter(keep_mask(t, latest, T0 + 5))
    assert kept.column("offset").to_pylist() == [2, 3, 5]


def test_write_table_keeps_the_tiering_conventions(tmp_path) -> None:
    t = read_data_file(_parquet(10, [b"k"] * 50, [b"v" * 100] * 50))
    pf = write_table(t.filter(pa.array([i % 2 == 0 for i in range(50)])), tmp_path / "x.parquet")
    assert (pf.base_offset, pf.last_offset, pf.records) == (10, 58, 25)
    assert (pf.min_timestamp, pf.max_timestamp) == (T0 + 10, T0 + 58)
    meta = pq.ParquetFile(tmp_path / "x.parquet").metadata
    assert meta.row_group(0).column(0).compression == "ZSTD"
    assert meta.row_group(0).column(0).statistics.min == 10
    assert meta.row_group(0).sorting_columns[0].column_index == 0
    with pytest.raises(ValueError):
        write_table(t.slice(0, 0), tmp_path / "empty.parquet")
    with pytest.raises(ValueError):  # out of offset order
        write_table(pa.concat_tables([t.slice(5, 1), t.slice(0, 1)]), tmp_path / "bad.parquet")


def test_split_by_bytes_never_makes_empty_pieces() -> None:
    t = read_data_file(_parquet(0, [b"k"] * 10, [b"v"] * 10))
    assert [p.num_rows for p in split_by_bytes(t, 1000, 250)] == [3, 3, 3, 1]
    assert [p.num_rows for p in split_by_bytes(t, 100, 1000)] == [10]
    assert [p.num_rows for p in split_by_bytes(t, 10**9, 1)] == [1] * 10


def test_replace_files_is_one_commit_and_refuses_dead_files(tmp_path) -> None:
    root = tmp_path / "topics" / "t"
    table = DeltaTopicTable(str(root))
    table.ensure_created()
    rels = []
    for base in (0, 5):
        data = _parquet(base, [b"k"] * 5, [b"v"] * 5)
        rel = data_file_relpath(0, base)
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
        table.commit_file(0, write_parquet_file_info(root / rel, base), rel)
        rels.append(rel)
    merged = pa.concat_tables([read_data_file((root / r).read_bytes()) for r in rels])
    new_rel = data_file_relpath(0, 0, "mgabc")
    pf = write_table(merged, root / new_rel)
    version = table.replace_files(0, rels, [(pf, new_rel)], data_change=False)
    assert [f.path for f in table.files()] == [new_rel]
    log = (root / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    actions = [json.loads(line) for line in log]
    kinds = sorted(k for a in actions for k in a if k in ("add", "remove"))
    assert kinds == ["add", "remove", "remove"]
    assert all(not a[k]["dataChange"] for a in actions for k in a if k in ("add", "remove"))
    assert DeltaTable(str(root)).to_pyarrow_table().column("offset").to_pylist() == list(range(10))
    with pytest.raises(ValueError):  # the old files are gone: nothing is committed twice
        table.replace_files(0, rels, [(pf, new_rel)])
    assert table.version() == version


def write_parquet_file_info(path, base):  # the ParquetFile of an existing file
    from coldstore.parquet_writer import ParquetFile

    t = read_data_file(path.read_bytes())
    ts = t.column("timestamp").cast(pa.int64()).to_pylist()
    return ParquetFile(str(path), base, base + t.num_rows - 1, min(ts), max(ts), t.num_rows,
                       path.stat().st_size, 1)  # fmt: skip
