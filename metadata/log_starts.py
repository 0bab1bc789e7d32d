"""The log start DeleteRecords set on a partition, across both tiers (migration 0016).

Kafka's DeleteRecords makes an offset the partition's log start; on a tiered topic the
records below it are gone from the cold tier too (Kafka's log start is cross-tier, and its
RLMExpirationTask deletes the remote segments wholly below it). The start only moves forward.
Readers: cold reads (fetch/cold/cold_index.py, refusing offsets below it), each replica's
local retention (raising its hot log start to it), the compaction worker (removing the cold
files wholly below it), and describe. A change NOTIFYs `tierlog_cold_files`.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.engine import Engine
from sqlalchemy.sql.selectable import ScalarSelect

from metadata.schema import of_partition, partition_log_starts
from metadata.types import TopicIdPartition

_T = partition_log_starts


def log_start_of(tp: TopicIdPartition) -> ScalarSelect[int]:
    """The partition's DeleteRecords start as a scalar subquery (NULL: never set)."""
    return select(_T.c.log_start_offset).where(of_partition(_T, tp)).scalar_subquery()


class LogStarts:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def get(self, tp: TopicIdPartition) -> int | None:
        with self.engine.connect() as conn:
            found = conn.execute(select(log_start_of(tp))).scalar()
        return None if found is None else int(found)

    def raise_to(self, tp: TopicIdPartition, offset: int) -> int:
        """Make `offset` the start unless it is already higher; the start after it."""
        if offset < 0:
            raise ValueError(f"a log start is an offset >= 0, got {offset}")
        row = insert(_T).values(
            topic_id=tp.topic_id, partition=tp.partition, log_start_offset=offset
        )
        stmt = row.on_conflict_do_update(
            index_elements=[_T.c.topic_id, _T.c.partition],
            set_={
                "log_start_offset": func.greatest(_T.c.log_start_offset, offset),
                "updated_at": func.now(),
            },
        ).returning(_T.c.log_start_offset)
        with self.engine.begin() as conn:
            return int(conn.execute(stmt).scalar_one())
