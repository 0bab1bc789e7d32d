"""The cold read path without Postgres or S3: real Parquet files (tiering's writer) in an
in-memory store that counts GETs, a stand-in for the manifest index; the rest is real (range
cache, footer cache, row-group cache, reader, prefetcher, timestamp lookup)."""

from __future__ import annotations

import asyncio
import bisect
import itertools
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from cluster.read_contract import ColdRange
from coldstore.parquet_writer import write_parquet
from fetch.cold.cold_caches import ColdCaches
from fetch.cold.cold_offsets import offset_for_timestamp
from fetch.cold.cold_reader import ColdFileReader, ReadLimits
from fetch.cold.footer_cache import FooterCache
from fetch.cold.parquet_layout import SparseFile, decode_group, parse_footer
from fetch.cold.prefetch import PrefetchConfig, Prefetcher, runs
from fetch.cold.range_cache import RangeCache
from fetch.cold.row_groups import RowGroupCache
from logformat.frame import encode_frame
from logformat.records import build_batch
from logformat.schema import CONSUMER_SCHEMA
from metadata.types import ColdFile, TopicIdPartition

T0 = 1_700_000_000_000
NOW = datetime.now(UTC)
TP = TopicIdPartition("tid", 0)


def record(i: int) -> dict:
    """Record i: binary keys/values (every byte value), some tombstones, some headers."""
    key = None if i % 7 == 0 else bytes([i % 256, 0, 255]) + str(i).encode()
    value = None if i % 11 == 0 else bytes(range(i % 256)) + i.to_bytes(4, "little")
    headers = [("h", bytes([i % 256]))] if i % 5 == 0 else None
    return {"key": key, "value": value, "headers": headers, "ts": T0 + i * 10}


def segment(base: int, count: int, per_frame: int = 50, gap_every: int = 0) -> bytes:
    """Frames of records base..base+count-1; with gap_every, those offsets are left out
    (as key compaction leaves gaps)."""
    out = b""
    for start in range(base, base + count, per_frame):
        idx = [
            i
            for i in range(start, min(start + per_frame, base + count))
            if not gap_every or i % gap_every
        ]
        recs = [record(i) for i in idx]
        batch = build_batch(
            [r["key"] for r in recs],
            [r["value"] for r in recs],
            [r["headers"] for r in recs],
            [r["ts"] for r in recs],
            T0,
        )
        batch = batch.set_column(
            0, batch.schema.field(0), pa.array([i - start for i in idx], pa.int32())
        )
        out += bytes(encode_frame(batch, base_offset=start))
    return out


def expected(offsets: list[int]) -> pa.Table:
    recs = [record(i) for i in offsets]
    batch = build_batch(
        [r["key"] for r in recs],
        [r["value"] for r in recs],
        [r["headers"] for r in recs],
        [r["ts"] for r in recs],
        T0,
    )
    cols = [pa.array(offsets, pa.int64()), *batch.columns[1:]]
    return pa.Table.from_arrays(cols, schema=CONSUMER_SCHEMA)


class MemStore:
    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.gets: list[tuple[str, int, int]] = []

    async def open(self) -> None:
        pass

    async def close(self) -> None:
        pass

    async def get_range(self, key: str, start: int, end: int) -> bytes:
        await asyncio.sleep(0.001)
        if key not in self.objects:
            raise KeyError(key)
        self.gets.append((key, start, end))
        return self.objects[key][start:end]


class FakeIndex:
    """ColdIndex's read side over a list of files."""

    def __init__(self, files: list[ColdFile]) -> None:
        self.files = sorted(files, key=lambda f: f.base_offset)

    async def file_at(self, tp: TopicIdPartition, offset: int) -> ColdFile | None:
        for f in self.files:
            if f.last_offset >= offset:
                return f
        return None

    def peek_after(self, tp: TopicIdPartition, file: ColdFile, n: int) -> list[ColdFile]:
        i = bisect.bisect_right([f.base_offset for f in self.files], file.base_offset)
        return self.files[i : i + n]

    async def first_reaching(self, tp: TopicIdPartition, ts: int) -> ColdFile | None:
        return next((f for f in self.files if f.max_timestamp >= ts), None)

    async def bounds(self, tp: TopicIdPartition, fresh: bool = False) -> ColdRange | None:
        if not self.files:
            return None
        return ColdRange(self.files[0].base_offset, self.files[-1].last_offset + 1)


def cold_file(
    store: MemStore, n: int, seg: bytes, row_group_bytes: int, end: int | None = None
) -> ColdFile:
    """The manifest row of a segment's file: it covers [base, end - 1] (the segment's range,
    which after compaction may extend past the last record)."""
    pf = write_parquet(seg, row_group_bytes=row_group_bytes)
    assert isinstance(pf.output, bytes)
    key = f"topics/t/partition=0/{pf.base_offset:020d}-{n}.parquet"
    store.objects[key] = pf.output
    last = pf.last_offset if end is None else end - 1
    return ColdFile(
        n, "tid", 0, pf.base_offset, last, pf.min_timestamp, pf.max_timestamp, key,
        pf.size_bytes, pf.records, "committed", n, NOW, NOW, None,
    )  # fmt: skip


class Rig:
    def __init__(
        self,
        segments: list[bytes],
        ends: list[int] | None = None,
        row_group_bytes: int = 8 * 1024,
        cache_bytes: int = 64 << 20,
        prefetch: PrefetchConfig | None = None,
    ) -> None:
        self.store = MemStore()
        # Each segment's file covers its offsets (last_offset = the segment's end - 1).
        ends = ends or [None] * len(segments)  # type: ignore[list-item]
        self.files = [
            cold_file(self.store, i, s, row_group_bytes, e)
            for i, (s, e) in enumerate(zip(segments, ends, strict=True))
        ]
        self.index = FakeIndex(self.files)
        self.pool = ThreadPoolExecutor(2)
        self.ranges = RangeCache(self.store, cache_bytes)
        self.footers = FooterCache(self.ranges, self.pool)
        self.groups = RowGroupCache(self.ranges, self.pool, 32 << 20)
        self.caches = ColdCaches(self.index, self.footers, self.ranges, self.groups)  # type: ignore[arg-type]
        self.reader = ColdFileReader(self.caches, self.pool)
        self.prefetcher = Prefetcher(
            self.caches,
            prefetch or PrefetchConfig(chunk_bytes=64 * 1024, whole_file_bytes=128 * 1024),
        )

    async def read(self, offset: int, end: int, max_records: int = 500, max_bytes: int = 1 << 30):
        limits = ReadLimits(end, max_records, max_bytes)
        got, where = await self.reader.read(TP, offset, limits)
        self.prefetcher.after_read(TP, offset, got.next_offset, where, got.batch.num_rows)
        return got

    async def replay(self, start: int, end: int, **kw) -> tuple[pa.Table, int]:
        parts, pos, requests = [], start, 0
        while pos < end:
            got = await self.read(pos, end, **kw)
            requests += 1
            assert got.next_offset > pos
            if got.batch.num_rows:
                parts.append(pa.Table.from_batches([got.batch]))
            pos = got.next_offset
        await self.prefetcher.close()
        return pa.concat_tables(parts), requests


def test_layout_and_sparse_decode_read_only_the_row_group() -> None:
    store = MemStore()
    f = cold_file(store, 0, segment(0, 2000), 8 * 1024)
    data = store.objects[f.object_key]
    layout = parse_footer(data[-65536:], len(data))
    assert len(layout.groups) > 3
    assert layout.groups[0].first_offset == 0 and layout.groups[-1].last_offset == 1999
    assert [g.first_offset for g in layout.groups[1:]] == [
        g.last_offset + 1 for g in layout.groups[:-1]
    ]
    g = layout.groups[2]
    table = decode_group(layout, [(g.start, data[g.start : g.end])], 2)
    assert table.equals(expected(list(range(g.first_offset, g.last_offset + 1))))
    assert table.schema.equals(CONSUMER_SCHEMA, check_metadata=True)
    assert layout.group_for(g.first_offset) == 2 and layout.group_for(10**9) is None
    with pytest.raises(OSError, match="not fetched"):
        SparseFile(len(data), [(0, data[:10])]).read(20)


def test_replay_across_files_and_row_groups_is_exact_and_in_order() -> None:
    segs = [segment(0, 1500), segment(1500, 700), segment(2200, 2300)]
    rig = Rig(segs)
    table, _ = asyncio.run(rig.replay(0, 4500, max_records=333))
    assert table.equals(expected(list(range(4500))))


def test_limits_end_and_mid_file_start() -> None:
    rig = Rig([segment(0, 3000)])

    async def go() -> None:
        got = await rig.read(1234, 3000, max_records=10)
        assert got.batch.column(0).to_pylist() == list(range(1234, 1244))
        assert got.next_offset == 1244
        got = await rig.read(2990, 2995, max_records=100)
        assert got.batch.column(0).to_pylist() == list(range(2990, 2995))
        assert got.next_offset == 2995
        got = await rig.read(100, 3000, max_records=1000, max_bytes=1)  # at least one record
        assert got.batch.num_rows == 1 and got.next_offset == 101
        got = await rig.read(0, 3000, max_records=100_000, max_bytes=20_000)
        assert 0 < got.batch.num_rows < 3000
        sizes = sum(
            len(v or b"") + len(k or b"") + 24
            for k, v in zip(
                got.batch.column(2).to_pylist(), got.batch.column(3).to_pylist(), strict=True
            )
        )
        assert sizes <= 20_000
        await rig.prefetcher.close()

    asyncio.run(go())


def test_compaction_gaps_are_skipped_without_stalling() -> None:
    # Every offset divisible by 3 was compacted away; the second file starts after a gap.
    segs = [segment(0, 900, gap_every=3), segment(1000, 600, gap_every=3)]
    rig = Rig(segs, ends=[900, 1600])
    table, _ = asyncio.run(rig.replay(0, 1600, max_records=77))
    want = [i for i in range(1600) if i % 3 and not 900 <= i < 1000]
    assert table.column(0).to_pylist() == want
    assert table.equals(expected(want))


def test_sequential_replay_coalesces_gets_and_prefetches_next_files() -> None:
    segs = [segment(i * 2000, 2000) for i in range(6)]
    rig = Rig(segs, prefetch=PrefetchConfig(chunk_bytes=256 * 1024, whole_file_bytes=1 << 20))
    total = sum(len(v) for v in rig.store.objects.values())
    table, requests = asyncio.run(rig.replay(0, 12000, max_records=200))
    assert table.equals(expected(list(range(12000))))
    # Whole files in one GET each once the stream is sequential: far fewer GETs than
    # requests, and every byte fetched about once.
    assert len(rig.store.gets) <= 2 + len(segs) + 2, rig.store.gets
    assert requests >= 60
    fetched = sum(e - s for _, s, e in rig.store.gets)
    assert fetched <= total * 1.1


def test_single_flight_and_memory_budget() -> None:
    rig = Rig([segment(0, 4000)], cache_bytes=64 * 1024)

    async def go() -> None:
        results = await asyncio.gather(*(rig.read(0, 4000, max_records=50) for _ in range(8)))
        assert all(r.batch.equals(results[0].batch) for r in results)
        # one footer GET and one row-group GET, shared by all eight readers (then the
        # prefetcher reads ahead, within the 64 KiB budget)
        size = rig.files[0].size_bytes
        assert [g[1:] for g in rig.store.gets if g[2] == size] == [(size - 65536, size)]
        first = rig.footers.cached(rig.files[0].object_key).groups[0].start
        assert len([g for g in rig.store.gets if g[1] == first]) == 1
        assert all(e - s <= 64 * 1024 for _, s, e in rig.store.gets)
        await rig.prefetcher.close()
        table, _ = await rig.replay(0, 4000, max_records=500)
        assert table.equals(expected(list(range(4000))))
        assert rig.ranges.used <= rig.ranges.capacity + 16 * 1024

    asyncio.run(go())


def test_runs_are_aligned_to_row_groups() -> None:
    store = MemStore()
    f = cold_file(store, 0, segment(0, 3000), 8 * 1024)
    data = store.objects[f.object_key]
    layout = parse_footer(data[-65536:], len(data))
    rs = runs(layout, 30 * 1024)
    starts = {g.start for g in layout.groups}
    ends = {g.end for g in layout.groups}
    assert rs[0][0] == layout.groups[0].start and rs[-1][1] == layout.groups[-1].end
    assert all(s in starts and e in ends for s, e in rs)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(rs))


def test_offset_for_timestamp_uses_statistics() -> None:
    rig = Rig([segment(0, 1000), segment(1000, 1000)])

    async def go() -> None:
        async def at(ts: int) -> int | None:
            return await offset_for_timestamp(rig.caches, TP, ts)

        assert await at(0) == 0
        assert await at(T0 + 5) == 1
        assert await at(T0 + 12_340) == 1234
        assert await at(T0 + 19_990) == 1999
        assert await at(T0 + 19_991) is None

    asyncio.run(go())
