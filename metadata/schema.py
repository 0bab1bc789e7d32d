"""SQLAlchemy Core tables the repositories query (migrations own the DDL; keep both in step)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    ForeignKey,
    Integer,
    MetaData,
    Sequence,
    SmallInteger,
    Table,
    Text,
    and_,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID
from sqlalchemy.sql.elements import ColumnElement

from metadata.types import TopicIdPartition

NOTIFY_CHANNEL = "tierlog_metadata"  # payload: the new metadata_version, as text

meta = MetaData()


def _partition_key() -> tuple[Column[Any], Column[Any]]:
    """(topic_id, partition), leading the primary key of a table with rows per partition."""
    return (
        Column(
            "topic_id",
            UUID(as_uuid=False),
            ForeignKey("topics.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        Column("partition", Integer, primary_key=True, autoincrement=False),
    )


def of_partition(table: Table, tp: TopicIdPartition) -> ColumnElement[bool]:
    """The rows of one partition in a table with (topic_id, partition) columns."""
    return and_(table.c.topic_id == tp.topic_id, table.c.partition == tp.partition)


brokers = Table(
    "brokers",
    meta,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("url", Text, nullable=False),
    Column("rack", Text),
    Column("lease_expires_at", DateTime(timezone=True), nullable=False),
    Column("registered_at", DateTime(timezone=True), nullable=False),
    Column("incarnation", BigInteger, nullable=False),
    Column("kafka_address", Text),  # HOST:PORT Kafka clients reach it at; NULL: no listener
)

controller = Table(
    "controller",
    meta,
    Column("id", SmallInteger, primary_key=True),  # always 1: a single-row lease
    Column("holder", Integer),
    Column("epoch", BigInteger, nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)

topics = Table(
    "topics",
    meta,
    Column("id", UUID(as_uuid=False), primary_key=True, server_default=text("gen_random_uuid()")),
    Column("name", Text, nullable=False, unique=True),
    Column("partition_count", Integer, nullable=False),
    Column("replication_factor", Integer, nullable=False),
    Column("configs", JSONB, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

partitions = Table(
    "partitions",
    meta,
    *_partition_key(),
    Column("leader", Integer),
    Column("leader_epoch", Integer, nullable=False),
    Column("replicas", ARRAY(Integer), nullable=False),
    Column("isr", ARRAY(Integer), nullable=False),
    Column("partition_epoch", Integer, nullable=False),
)

metadata_version = Table(
    "metadata_version",
    meta,
    Column("id", SmallInteger, primary_key=True),  # always 1
    Column("version", BigInteger, nullable=False),
    Column("last_xact", BigInteger),
)

# Idempotent-producer ids: never reused, even by a rolled-back transaction (0002).
producer_ids = Sequence("producer_ids", metadata=meta)

cluster = Table(
    "cluster",
    meta,
    Column("id", SmallInteger, primary_key=True),  # always 1
    Column("cluster_id", UUID(as_uuid=False), nullable=False),
    Column("secret", Text, nullable=False),  # authenticates cluster-internal HTTP
    Column("created_at", DateTime(timezone=True), nullable=False),
)

# Deleted topics whose cold files are still in the bucket (migration 0008): the compaction
# role deletes the table's objects, then the row; until then the name cannot be reused.
deleted_topics = Table(
    "deleted_topics",
    meta,
    Column("name", Text, primary_key=True),
    Column("topic_id", UUID(as_uuid=False), nullable=False),
    Column("deleted_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

# Tiering (0003): sealed segments to tier (metadata/segment_registry.py) and the cold manifest
# (metadata/cold_manifest.py).
hot_segments = Table(
    "hot_segments",
    meta,
    *_partition_key(),
    Column("base_offset", BigInteger, primary_key=True, autoincrement=False),
    Column("end_offset", BigInteger, nullable=False),
    Column("size_bytes", BigInteger, nullable=False),
    Column("sealed_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("state", Text, nullable=False, server_default="sealed"),
    Column("claimed_by", Text),
    Column("claim_expires_at", DateTime(timezone=True)),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("last_error", Text),
    Column("retry_at", DateTime(timezone=True)),
)

cold_files = Table(
    "cold_files",
    meta,
    Column("id", BigInteger, primary_key=True),
    Column("topic_id", UUID(as_uuid=False), ForeignKey("topics.id", ondelete="CASCADE")),
    Column("partition", Integer, nullable=False),
    Column("base_offset", BigInteger, nullable=False),
    Column("last_offset", BigInteger, nullable=False),
    Column("min_timestamp", BigInteger, nullable=False),
    Column("max_timestamp", BigInteger, nullable=False),
    Column("object_key", Text, nullable=False, unique=True),
    Column("size_bytes", BigInteger, nullable=False),
    Column("records", BigInteger, nullable=False),
    Column("state", Text, nullable=False),
    Column("delta_version", BigInteger),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("delete_after", DateTime(timezone=True)),
)

# The log start DeleteRecords set, across both tiers (0016; metadata/cold_manifest.py).
partition_log_starts = Table(
    "partition_log_starts",
    meta,
    *_partition_key(),
    Column("log_start_offset", BigInteger, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)

# Consumer groups (0004): groups, members and committed offsets (metadata/groups.py).
consumer_groups = Table(
    "consumer_groups",
    meta,
    Column("id", BigInteger, primary_key=True),
    Column("name", Text, nullable=False, unique=True),
    Column("group_epoch", Integer, nullable=False, server_default="0"),
    Column("assignor", Text, nullable=False),
    Column("state", Text, nullable=False, server_default="empty"),
    Column("subscribed", JSONB, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("updated_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("kafka", JSONB),  # a client-assigned Kafka round (metadata/groups.py)
)

group_members = Table(
    "group_members",
    meta,
    Column(
        "group_id",
        BigInteger,
        ForeignKey("consumer_groups.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("member_id", Text, primary_key=True),
    Column("member_epoch", Integer, nullable=False),
    Column("topics", ARRAY(Text), nullable=False),
    Column("assignor", Text),
    Column("session_timeout_ms", Integer, nullable=False),
    Column("joined_at", DateTime(timezone=True), nullable=False),
    Column("last_heartbeat_at", DateTime(timezone=True), nullable=False),
    Column("session_expires_at", DateTime(timezone=True), nullable=False),
    Column("target", JSONB, nullable=False),  # {"topic": [partition, ...]}
    Column("assigned", JSONB, nullable=False),
    Column("owned", JSONB, nullable=False),
    Column("kafka", JSONB),  # a Kafka client's protocols and assignment (None: HTTP member)
)

group_offsets = Table(
    "group_offsets",
    meta,
    Column(
        "group_id",
        BigInteger,
        ForeignKey("consumer_groups.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    *_partition_key(),
    Column("committed_offset", BigInteger, nullable=False),
    Column("metadata", Text),
    Column("committed_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
)
