"""Offset → cold file through the manifest (fetch/cold/cold_index.py) on a real Postgres: correct
answers, and the same few index pages touched whatever the number of cold files (docs/design.md §4:
fetch resolves offsets through the manifest, never by listing the bucket)."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.engine import Engine

from cluster.read_contract import ColdRange
from fetch.cold.cold_index import ColdIndex, ManifestQueries
from metadata.brokers import BrokerRepo
from metadata.schema import cold_files
from metadata.topics import TopicRepo
from metadata.types import TopicIdPartition

SIZE = 100  # offsets per file


def _fill(engine: Engine, topic_id: str, deleted: int, committed: int) -> None:
    """`deleted` files removed by retention, then `committed` ones; file i covers
    [i*SIZE, i*SIZE+SIZE-1], timestamps grow with offsets except file 7's (a producer's
    clock)."""
    with engine.begin() as conn:
        conn.execute(
            text(
                """
                INSERT INTO cold_files (topic_id, partition, base_offset, last_offset,
                    min_timestamp, max_timestamp, object_key, size_bytes, records, state,
                    delta_version)
                SELECT CAST(:tid AS uuid), 0, i * :size, i * :size + :size - 1,
                    CASE WHEN i = :odd THEN 0 ELSE i * 1000 END,
                    CASE WHEN i = :odd THEN 10000000000 ELSE i * 1000 + 999 END,
                    CAST(:tid AS text) || '/' || i, 1000, :size,
                    CASE WHEN i < :deleted THEN 'deleted' ELSE 'committed' END, i
                FROM generate_series(0, :n - 1) AS i
                """
            ),
            {
                "tid": topic_id,
                "size": SIZE,
                "deleted": deleted,
                "n": deleted + committed,
                "odd": deleted + 7,
            },
        )
        conn.execute(text("ANALYZE cold_files"))


def _buffers(plan: dict[str, Any]) -> int:
    return int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0))


def _explain(engine: Engine, stmt: Any) -> dict[str, Any]:
    sql = stmt.compile(engine, compile_kwargs={"literal_binds": True})
    with engine.connect() as conn:
        doc = conn.execute(text(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}")).scalar_one()
    plan = (json.loads(doc) if isinstance(doc, str) else doc)[0]["Plan"]
    return dict(plan)


def _index_lookups(engine: Engine, topic_id: str, offset: int) -> list[dict[str, Any]]:
    c = cold_files.c
    w = (c.topic_id == topic_id, c.partition == 0, c.state == "committed")
    return [
        _explain(engine, select(c.base_offset).where(*w).order_by(c.base_offset).limit(1)),
        _explain(engine, select(c.last_offset).where(*w).order_by(c.base_offset.desc()).limit(1)),
        _explain(
            engine,
            select(*cold_files.columns)
            .where(*w, c.base_offset <= offset)
            .order_by(c.base_offset.desc())
            .limit(1),
        ),
        _explain(
            engine,
            select(*cold_files.columns)
            .where(*w, c.base_offset > offset)
            .order_by(c.base_offset)
            .limit(8),
        ),
    ]


def test_lookups_are_right_and_cost_the_same_for_10_or_200k_files(db_engine: Engine) -> None:
    BrokerRepo(db_engine).register(1, "http://127.0.0.1:9001", 60_000)
    topics = TopicRepo(db_engine)
    small = topics.create("small", 1, 1).id
    big = topics.create("big", 1, 1).id
    _fill(db_engine, small, deleted=3, committed=10)
    _fill(db_engine, big, deleted=100_000, committed=100_000)
    pool = ThreadPoolExecutor(2)
    q = ManifestQueries(db_engine)

    async def check(tid: str, deleted: int, committed: int) -> None:
        index = ColdIndex(q, pool)
        tp = TopicIdPartition(tid, 0)
        start, end = deleted * SIZE, (deleted + committed) * SIZE
        assert await index.bounds(tp) == ColdRange(start, end)
        for o in (start, start + 1, start + 5 * SIZE + 17, end - 1):
            f = await index.file_at(tp, o)
            assert f is not None and f.base_offset <= o <= f.last_offset
            assert f.base_offset == o // SIZE * SIZE and f.state == "committed"
        assert await index.file_at(tp, end) is None
        # Below the start: the first committed file (the reader's gap skipping).
        first = await index.file_at(tp, 0)
        assert first is not None and first.base_offset == start
        # By timestamp: the first file in offset order reaching it (file 7 after the deleted
        # ones has a huge max timestamp, so it answers for anything newer than file 6).
        hit = await index.first_reaching(tp, (deleted + 3) * 1000 + 5)
        assert hit is not None and hit.base_offset == (deleted + 3) * SIZE
        hit = await index.first_reaching(tp, (deleted + 9) * 1000)
        assert hit is not None and hit.base_offset == (deleted + 7) * SIZE

    asyncio.run(check(small, 3, 10))
    asyncio.run(check(big, 100_000, 100_000))
    pool.shutdown()

    # The same plan and a handful of index pages, whether 13 or 200,000 files: probes of the
    # partial index of committed rows, never a scan of the partition's history.
    for tid, o in ((small, 3 * SIZE + 250), (big, 150_000 * SIZE + 250)):
        for plan in _index_lookups(db_engine, tid, o):
            assert plan["Node Type"] == "Limit", plan
            scan = plan["Plans"][0]
            assert scan["Node Type"] in ("Index Scan", "Index Only Scan"), scan
            assert scan["Index Name"] == "cold_files_committed_by_offset", scan
            assert _buffers(plan) <= 12, plan
            assert scan["Actual Rows"] <= 8 and scan.get("Rows Removed by Filter", 0) == 0
