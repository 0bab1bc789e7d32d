"""Where cold data lives in the bucket (docs/design.md §4).

    {prefix}/topics/{topic}/                      the topic's Delta table (its root)
    {prefix}/topics/{topic}/_delta_log/...        the Delta log
    {prefix}/topics/{topic}/partition={p}/{base_offset:020d}-{uuid}.parquet

The zero-padded base offset makes a listing sort by offset; the uuid makes every upload
attempt a new object, so a retried upload never overwrites a file a reader may be reading
(an abandoned attempt is garbage for the compaction sweep, never a corrupt table).
Partition directories use Hive style, as Delta and Spark expect for a partition column.
"""

from __future__ import annotations

import uuid

from coldstore.object_store import ObjectStoreConfig

PARTITION_COLUMN = "partition"


def table_key(config: ObjectStoreConfig, topic: str) -> str:
    """Bucket key of the topic's table root, without a trailing "/"."""
    return config.key("topics", topic)


def table_uri(config: ObjectStoreConfig, topic: str) -> str:
    return f"s3://{config.bucket}/{table_key(config, topic)}"


def data_file_relpath(partition: int, base_offset: int, unique: str | None = None) -> str:
    """A new data file's path relative to the table root (what a Delta add action holds)."""
    return f"{PARTITION_COLUMN}={partition}/{base_offset:020d}-{unique or uuid.uuid4().hex}.parquet"


def data_file_key(config: ObjectStoreConfig, topic: str, partition: int, base_offset: int) -> str:
    """Bucket key for a new data file of `partition` starting at `base_offset`."""
    return f"{table_key(config, topic)}/{data_file_relpath(partition, base_offset)}"
