"""Sealed segment → Parquet: byte-exact rows, offsets exactly once, row groups, statistics."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from coldstore.parquet_writer import (
    CorruptSegmentError,
    EmptyRangeError,
    ParquetFile,
    write_parquet,
)
from logformat.frame import encode_frame
from logformat.records import build_batch
from logformat.schema import CONSUMER_SCHEMA

T0 = 1_700_000_000_000
BIG = bytes(range(256)) * 4096  # 1 MiB, every byte value


def rec(key, value, headers=None, ts=T0):
    return {"key": key, "value": value, "headers": headers, "ts": ts}


def frame_of(recs, base_offset, compression=None, deltas=None):
    batch = build_batch(
        [r["key"] for r in recs],
        [r["value"] for r in recs],
        [r["headers"] for r in recs],
        [r["ts"] for r in recs],
        T0,
    )
    if deltas is not None:  # gaps, as after key compaction
        batch = batch.set_column(0, batch.schema.field(0), pa.array(deltas, pa.int32()))
    return bytes(encode_frame(batch, base_offset=base_offset, compression=compression))


def segment(frames_recs, base=0, compression=None):
    """(segment bytes, expected consumer rows) for consecutive frames starting at `base`."""
    out, expected, offset = [], [], base
    for recs in frames_recs:
        out.append(frame_of(recs, offset, compression))
        for r in recs:
            expected.append((offset, r))
            offset += 1
    return b"".join(out), expected


def expected_rows(expected):
    return [
        {
            "offset": o,
            "timestamp": dt.datetime.fromtimestamp(r["ts"] / 1000, dt.UTC),
            "key": r["key"],
            "value": r["value"],
            "headers": r["headers"],
        }
        for o, r in expected
    ]


TRICKY = [
    [
        rec(b"\x00\xff\x00", b"\x00" * 3),
        rec(None, b"no key"),
        rec(b"tombstone", None),
        rec(None, None),
        rec(b"", b""),  # empty, not null
    ],
    [
        rec("ключ-🔑".encode(), "значение ✓ 値".encode(), [{"key": "ünï", "value": "✓".encode()}]),
        rec(b"k", b"v", [{"key": "h", "value": None}, {"key": "h", "value": b"\xff\xfe"}]),
        rec(b"k2", b"v2", [], ts=T0 - 5000),  # timestamps need not be monotonic
        rec(b"big", BIG, [{"key": "", "value": b""}], ts=T0 + 9),
    ],
    [rec(f"k{i}".encode(), f"value {i}".encode() * 10, ts=T0 + i) for i in range(50)],
]


@pytest.mark.parametrize("compression", [None, "zstd", "lz4"])
@pytest.mark.parametrize("as_file", [False, True])
def test_byte_exact_round_trip(tmp_path, compression, as_file):
    seg, expected = segment(TRICKY, base=1000, compression=compression)
    if as_file:
        src = tmp_path / "00000000000000001000.log"
        src.write_bytes(seg)
        pf = write_parquet(src, tmp_path / "out.parquet")
        assert pf.output == str(tmp_path / "out.parquet")
        table = pq.read_table(pf.output)
        assert pf.size_bytes == (tmp_path / "out.parquet").stat().st_size
    else:
        pf = write_parquet(seg)
        assert isinstance(pf.output, bytes)
        table = pq.read_table(pa.BufferReader(pf.output))
        assert pf.size_bytes == len(pf.output)
    assert table.schema.equals(CONSUMER_SCHEMA)  # no partition column in the file
    assert "partition" not in table.column_names
    assert table.to_pylist() == expected_rows(expected)
    offsets = table.column("offset").to_pylist()
    assert offsets == list(range(1000, 1000 + len(expected)))  # each exactly once, sorted
    ts = [r["ts"] for _, r in expected]
    assert pf == ParquetFile(
        pf.output,
        1000,
        1000 + len(expected) - 1,
        min(ts),
        max(ts),
        len(expected),
        pf.size_bytes,
        pf.row_groups,
    )
    meta = pq.ParquetFile(pa.BufferReader(pf.output) if not as_file else pf.output).metadata
    assert meta.num_row_groups == pf.row_groups
    assert meta.row_group(0).column(0).compression == "ZSTD"


def test_offset_gaps_are_kept(tmp_path):
    recs = [rec(b"a", b"1"), rec(b"b", b"2"), rec(b"c", b"3")]
    seg = frame_of(recs, 10, deltas=[0, 4, 7]) + frame_of(recs, 20)
    pf = write_parquet(seg)
    table = pq.read_table(pa.BufferReader(pf.output))
    assert table.column("offset").to_pylist() == [10, 14, 17, 20, 21, 22]
    assert (pf.base_offset, pf.last_offset, pf.records) == (10, 22, 6)


def test_offset_range_filter():
    seg, expected = segment([[rec(b"k", str(i).encode()) for i in range(10)] for _ in range(5)])
    pf = write_parquet(seg, from_offset=13, to_offset=37)
    table = pq.read_table(pa.BufferReader(pf.output))
    assert table.column("offset").to_pylist() == list(range(13, 37))
    assert table.to_pylist() == expected_rows(expected[13:37])
    assert (pf.base_offset, pf.last_offset, pf.records) == (13, 36, 24)
    with pytest.raises(EmptyRangeError):
        write_parquet(seg, from_offset=100)


def test_row_groups_sized_and_statistics_present():
    # ~1 KiB rows, 64 KiB target: about 64 rows per group, whatever the frame boundaries.
    frames = [
        [rec(f"k{f}-{i}".encode(), bytes([i % 256]) * 1000, ts=T0 + f * 100 + i) for i in range(37)]
        for f in range(40)
    ]
    seg, expected = segment(frames)
    pf = write_parquet(seg, row_group_bytes=64 * 1024)
    pfile = pq.ParquetFile(pa.BufferReader(pf.output))
    meta = pfile.metadata
    assert meta.num_row_groups == pf.row_groups
    n = len(expected)
    assert n // 70 <= pf.row_groups <= n // 55 + 1
    sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert sum(sizes) == n
    assert max(sizes[:-1]) - min(sizes[:-1]) <= 2  # even groups, not frame-shaped
    first = 0
    for i in range(meta.num_row_groups):
        rg = meta.row_group(i)
        off, ts = rg.column(0).statistics, rg.column(1).statistics
        assert off.has_min_max and ts.has_min_max
        assert (off.min, off.max) == (first, first + rg.num_rows - 1)
        rows = expected[first : first + rg.num_rows]
        assert ts.min == dt.datetime.fromtimestamp(min(r["ts"] for _, r in rows) / 1000, dt.UTC)
        assert ts.max == dt.datetime.fromtimestamp(max(r["ts"] for _, r in rows) / 1000, dt.UTC)
        assert rg.column(3).statistics is None or not rg.column(3).statistics.has_min_max
        assert [s.column_index for s in rg.sorting_columns] == [0]
        first += rg.num_rows
    # The page index is there for page-level offset pruning inside a row group.
    assert meta.row_group(0).column(0).has_offset_index
    assert pfile.read().column("offset").to_pylist() == list(range(n))


def test_one_big_row_per_group():
    seg, expected = segment([[rec(b"big", BIG, ts=T0 + i) for i in range(3)]])
    pf = write_parquet(seg, row_group_bytes=512 * 1024)
    assert pf.row_groups == 3
    assert pq.read_table(pa.BufferReader(pf.output)).to_pylist() == expected_rows(expected)


@pytest.mark.parametrize("where", ["payload", "header_tail"])
def test_corrupt_frame_is_an_error(tmp_path, where):
    seg, _ = segment(TRICKY)
    first = frame_of(TRICKY[0], 0)
    pos = len(first) + (100 if where == "payload" else 30)  # inside the second frame
    bad = bytearray(seg)
    bad[pos] ^= 0x01
    out = tmp_path / "x.parquet"
    with pytest.raises(CorruptSegmentError, match="CRC"):
        write_parquet(bytes(bad), out)
    assert not out.exists()  # no half-written file left behind


def test_torn_tail_and_garbage_are_errors():
    seg, _ = segment(TRICKY)
    with pytest.raises(CorruptSegmentError):
        write_parquet(seg[:-10])
    with pytest.raises(CorruptSegmentError):
        write_parquet(seg + b"\x00" * 100)


def test_out_of_order_frames_are_an_error():
    a = frame_of([rec(b"a", b"1"), rec(b"b", b"2")], 10)
    b = frame_of([rec(b"c", b"3")], 11)  # overlaps the first frame's offsets
    with pytest.raises(CorruptSegmentError, match="not after"):
        write_parquet(a + b)
    with pytest.raises(CorruptSegmentError, match="unordered"):
        write_parquet(frame_of([rec(b"a", b"1"), rec(b"b", b"2")], 0, deltas=[1, 1]))


def test_empty_segment():
    with pytest.raises(EmptyRangeError):
        write_parquet(b"")
