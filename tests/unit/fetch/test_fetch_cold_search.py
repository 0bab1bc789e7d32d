"""The cold search of one file (fetch/cold/cold_search.py) without S3: a real Parquet file
(tiering's writer, small row groups) in the in-memory store of test_fetch_cold_reader, the
real footer and range caches. Row groups are pruned by their statistics, only the columns a
condition names are fetched, and only matching row groups' other columns."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from cluster.search_contract import FileHits, SearchQuery
from fetch.cold.cold_search import ColdSearch
from fetch.cold.footer_cache import FooterCache
from fetch.cold.range_cache import RangeCache
from tests.unit.fetch.test_fetch_cold_reader import (
    T0,
    MemStore,
    cold_file,
    expected,
    record,
    segment,
)

N = 2000


def search(query: SearchQuery, max_hits: int = 1000) -> tuple[FileHits, MemStore, int]:
    store = MemStore()
    f = cold_file(store, 1, segment(0, N), row_group_bytes=16 * 1024)
    pool = ThreadPoolExecutor(2)

    async def run() -> FileHits:
        ranges = RangeCache(store, 64 << 20)
        searcher = ColdSearch(None, FooterCache(ranges, pool), store, pool)  # type: ignore[arg-type]
        return await searcher.scan_file(f, query, max_hits)

    try:
        return asyncio.run(run()), store, f.size_bytes
    finally:
        pool.shutdown()


def test_key_search_reads_the_key_column_and_the_matching_groups() -> None:
    key = record(1234)["key"]
    hits, store, size = search(SearchQuery(key=key))
    assert hits.batch.to_pylist() == expected([1234]).to_pylist()
    assert hits.row_groups_read == hits.row_groups > 4
    assert hits.bytes_read == sum(e - s for _, s, e in store.gets)
    # Beside the footer (one GET of the tail): the key chunks of every group and the other
    # columns of the one group that matched, well under the file.
    chunks = sum(e - s for _, s, e in store.gets if e != size)
    assert chunks < size // 3, (chunks, size)


def test_offset_and_time_bounds_prune_row_groups() -> None:
    q = SearchQuery(value_contains="", start_offset=1500, end_timestamp=T0 + 1600 * 10)
    hits, _, _ = search(q)
    assert hits.batch.column(0).to_pylist() == [i for i in range(1500, 1600) if i % 11]
    assert 0 < hits.row_groups_read < hits.row_groups / 2


def test_the_cap_stops_the_scan() -> None:
    hits, _, _ = search(SearchQuery(value_contains=""), max_hits=5)
    assert hits.batch.column(0).to_pylist() == [1, 2, 3, 4, 5]  # 0 is a tombstone
    assert hits.row_groups_read > 1  # read counts the candidates; the scan stopped at one
