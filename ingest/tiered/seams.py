"""What the broker's tiering duties need from outside the broker: the Postgres repositories
they call (as protocols, so tests can hand in fakes) and the live config of a hosted partition.
"""

from __future__ import annotations

from typing import Protocol

from cluster.metadata_cache import MetadataCache
from ingest.replication.partition import Partition
from metadata.configs import TopicConfig
from metadata.types import TopicIdPartition


class SegmentRegistryApi(Protocol):
    """What the broker uses of metadata.segment_registry.SegmentRegistry."""

    def register_sealed(
        self, tp: TopicIdPartition, base_offset: int, end_offset: int, size_bytes: int
    ) -> None: ...


class ColdManifestApi(Protocol):
    """What the broker uses of metadata.cold_manifest.ColdManifest."""

    def tiered_end_offset(self, tp: TopicIdPartition) -> int | None: ...

    def cold_range(self, tp: TopicIdPartition) -> tuple[int, int] | None: ...

    def log_start_offset(self, tp: TopicIdPartition) -> int | None: ...

    def deleted_before(self, tp: TopicIdPartition) -> int | None: ...

    def cold_bytes(self, tp: TopicIdPartition) -> int: ...


def topic_config(cache: MetadataCache, state: Partition) -> TopicConfig | None:
    """The config of the partition's topic; None when metadata no longer has that topic (or
    a topic of the same name was created again: another id)."""
    view = cache.topic(state.topic)
    if view is None or view.info.id != state.topic_id:
        return None
    return view.config
