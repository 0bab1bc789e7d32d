"""One partition of one topic incarnation, as the compaction jobs work on it."""

from __future__ import annotations

from typing import NamedTuple

from metadata.configs import TopicConfig
from metadata.types import TopicIdPartition


class Target(NamedTuple):
    topic_id: str
    topic: str
    partition: int
    config: TopicConfig

    @property
    def tp(self) -> TopicIdPartition:
        return TopicIdPartition(self.topic_id, self.partition)
