"""Deleting a deleted topic's Delta table from the bucket (Kafka deletes a deleted topic's
remote log segments the same way, in the background).

`TopicRepo.delete` marks a topic that may have objects in the bucket (deleted_topics, in the
transaction that deletes it). Once the grace period is over — in-flight readers and a tiering
attempt whose claim died with the topic have finished — every object under the topic's table
root goes (data files, the Delta log, abandoned uploads), then the mark, which frees the name.
A pass that dies half way leaves the mark, and the next pass lists what is left.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import NamedTuple

from sqlalchemy import delete, func, select
from sqlalchemy.engine import Engine

from coldstore.layout import table_key
from coldstore.object_store import ObjectStore, ObjectStoreConfig
from compaction import metrics
from metadata.schema import deleted_topics

log = logging.getLogger("tierlog.compaction")
_BATCH = 1000  # objects per delete call, and per progress line


class DeletedTopic(NamedTuple):
    name: str
    topic_id: str


class TopicPurge:
    def __init__(
        self, engine: Engine, store: ObjectStore, config: ObjectStoreConfig, grace_ms: int
    ) -> None:
        self.engine, self.store, self.config, self.grace_ms = engine, store, config, grace_ms

    def due(self) -> list[DeletedTopic]:
        """Deleted topics whose grace period is over, oldest first."""
        cutoff = func.now() - timedelta(milliseconds=self.grace_ms)
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(deleted_topics.c.name, deleted_topics.c.topic_id)
                .where(deleted_topics.c.deleted_at <= cutoff)
                .order_by(deleted_topics.c.deleted_at)
            ).all()
        return [DeletedTopic(r.name, str(r.topic_id)) for r in rows]

    def run_once(self) -> tuple[int, int, int]:
        """Purge every due topic; (topics, objects, bytes)."""
        topics = objects = size = 0
        for topic in self.due():
            n, b = self._purge(topic)
            topics, objects, size = topics + 1, objects + n, size + b
        return topics, objects, size

    def _purge(self, topic: DeletedTopic) -> tuple[int, int]:
        root = table_key(self.config, topic.name) + "/"
        ctx = {"topic": topic.name, "topic_id": topic.topic_id, "prefix": root}
        log.info("deleting a deleted topic's table", extra=ctx)
        objects = size = 0
        batch: list[str] = []
        for key, nbytes in self.store.list(root):
            batch.append(key)
            size += nbytes
            if len(batch) == _BATCH:
                objects += self.store.delete(batch)
                batch = []
                log.info("deleted topic's objects", extra={**ctx, "objects": objects})
        if batch:
            objects += self.store.delete(batch)
        # Only this deletion's mark: the topic may have been created and deleted again since.
        with self.engine.begin() as conn:
            conn.execute(
                delete(deleted_topics).where(
                    deleted_topics.c.name == topic.name,
                    deleted_topics.c.topic_id == topic.topic_id,
                )
            )
        metrics.PURGED_TOPICS.inc()
        metrics.DELETED_OBJECTS.inc(objects)
        metrics.RECLAIMED_BYTES.inc(size)
        log.info("deleted topic's table is gone", extra={**ctx, "objects": objects, "bytes": size})
        return objects, size
