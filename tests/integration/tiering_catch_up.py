"""A tiering worker's catch-up without the worker: for tests of tiering backpressure."""

from __future__ import annotations

from metadata.db import make_engine
from metadata.segment_registry import FileSpec, SegmentRegistry


def tier_everything(database_url: str, topic_id: str) -> None:
    """What a tiering worker that caught up does to the manifest: every registered segment
    committed (the file itself is not needed by the brokers' bound)."""
    engine = make_engine(database_url)
    reg = SegmentRegistry(engine)
    try:
        while claims := [c for c in reg.claim("catch-up", 60_000, 100) if c.topic_id == topic_id]:
            for claim in claims:
                name = f"sim/{topic_id}/{claim.base_offset}.parquet"
                reg.mark_tiered(claim, FileSpec(name, claim.size_bytes, 2, 0, 0), 1)
    finally:
        engine.dispose()
