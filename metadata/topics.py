"""Topics and their partitions: create, describe, alter configs, add partitions, delete.

Each operation is one short transaction. Races are settled by the database (unique name,
row locks), never by check-then-act in Python.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping
from typing import Any

from sqlalchemy import delete as sql_delete
from sqlalchemy import exists, func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Connection, Engine, Row

from logformat.errors import ErrorCode, TierlogError
from metadata.configs import check_min_insync, merge_configs, validate_configs, validate_topic_name
from metadata.db import single_statements
from metadata.placement import assign_replicas
from metadata.schema import (
    brokers,
    cold_files,
    deleted_topics,
    hot_segments,
    metadata_version,
    partitions,
    topics,
)
from metadata.types import PartitionRecord, TopicInfo

AnyRow = Row[*tuple[Any, ...]]
MAX_PARTITIONS = 10_000  # per topic; a sanity bound (each partition is files on every replica)

_TOPIC_COLUMNS = (
    topics.c.id,
    topics.c.name,
    topics.c.partition_count,
    topics.c.replication_factor,
    topics.c.configs,
    topics.c.created_at,
)
PARTITION_COLUMNS = (  # a PartitionRecord's, from partitions joined with topics
    topics.c.name,
    partitions.c.topic_id,
    partitions.c.partition,
    partitions.c.leader,
    partitions.c.leader_epoch,
    partitions.c.replicas,
    partitions.c.isr,
    partitions.c.partition_epoch,
)


def _topic(row: AnyRow) -> TopicInfo:
    return TopicInfo(
        str(row.id),
        row.name,
        row.partition_count,
        row.replication_factor,
        dict(sorted(row.configs.items())),
        row.created_at,
    )


def partition_info(row: AnyRow) -> PartitionRecord:
    """A row of PARTITION_COLUMNS as a PartitionRecord."""
    return PartitionRecord(
        row.name,
        str(row.topic_id),
        row.partition,
        row.leader,
        row.leader_epoch,
        list(row.replicas),
        list(row.isr),
        row.partition_epoch,
    )


def _locked_topic(conn: Connection, name: str) -> TopicInfo:
    """The topic, its row locked until the transaction ends; UNKNOWN_TOPIC_OR_PARTITION if
    there is none."""
    row = conn.execute(
        select(*_TOPIC_COLUMNS).where(topics.c.name == name).with_for_update()
    ).first()
    if row is None:
        raise _unknown(name)
    return _topic(row)


def _unknown(name: str) -> TierlogError:
    return TierlogError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist")


def _count(value: object, what: str, code: ErrorCode, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= hi:
        raise TierlogError(code, f"{what} must be an integer in [1, {hi}], got {value!r}")
    return value


def _live_brokers(conn: Connection, replication_factor: int) -> builtins.list[int]:
    ids = list(
        conn.execute(
            select(brokers.c.id)
            .where(brokers.c.lease_expires_at > func.now())
            .order_by(brokers.c.id)
        ).scalars()
    )
    if replication_factor > len(ids):
        raise TierlogError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"replication factor {replication_factor} is larger than the number of live "
            f"brokers ({len(ids)} alive: {ids})",
        )
    return ids


def _insert_partitions(
    conn: Connection, topic_id: str, assignment: builtins.list[builtins.list[int]], first: int
) -> None:
    rows = [
        {
            "topic_id": topic_id,
            "partition": first + i,
            "leader": replicas[0],
            "leader_epoch": 0,
            "replicas": replicas,
            "isr": replicas,
            "partition_epoch": 0,
        }
        for i, replicas in enumerate(assignment)
    ]
    conn.execute(insert(partitions), rows)


class TopicRepo:
    def __init__(self, engine: Engine, defaults: Mapping[str, str] | None = None) -> None:
        self.engine = engine
        self._polls = single_statements(engine)  # the version, read by every refresh
        # The broker's defaults for new topics (Kafka's log.segment.bytes, log.roll.ms, ...):
        # a create that does not name a config gets these, stored as the topic's own.
        self.defaults = validate_configs(defaults or {})

    # -- changes ------------------------------------------------------------------------------

    def create(
        self,
        name: str,
        partitions: int,
        replication_factor: int,
        configs: Mapping[str, object] | None = None,
    ) -> TopicInfo:
        """A new topic with replicas spread over the live brokers; leader = first replica."""
        validate_topic_name(name)
        n = _count(partitions, "partitions", ErrorCode.INVALID_PARTITIONS, MAX_PARTITIONS)
        rf = _count(
            replication_factor, "replication_factor", ErrorCode.INVALID_REPLICATION_FACTOR, 1000
        )
        given = configs or {}
        overrides = validate_configs(
            {**self.defaults, **given} if isinstance(given, Mapping) else given
        )
        check_min_insync(overrides, rf)
        with self.engine.begin() as conn:
            # The unique index decides duplicates, even between racing creators.
            row = conn.execute(
                pg_insert(topics)
                .values(name=name, partition_count=n, replication_factor=rf, configs=overrides)
                .on_conflict_do_nothing(index_elements=[topics.c.name])
                .returning(*_TOPIC_COLUMNS)
            ).first()
            if row is None:
                raise TierlogError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists")
            # Checked after the insert: a delete racing this create has committed by now.
            if conn.execute(select(exists().where(deleted_topics.c.name == name))).scalar():
                raise TierlogError(
                    ErrorCode.TOPIC_ALREADY_EXISTS,
                    f"topic {name!r} is marked for deletion: the compaction role is deleting its"
                    " cold files from the bucket; create it again once they are gone",
                )
            info = _topic(row)
            live = _live_brokers(conn, rf)  # raising here rolls the insert back
            _insert_partitions(conn, info.id, assign_replicas(live, n, rf), 0)
        return info

    def alter_configs(
        self, name: str, set: Mapping[str, object] | None = None, delete: Iterable[str] = ()
    ) -> TopicInfo:
        """Incremental alter (Kafka's IncrementalAlterConfigs): set some, reset others."""
        if not isinstance(set, Mapping | None):
            raise TierlogError(ErrorCode.INVALID_CONFIG, "configs must be an object")
        with self.engine.begin() as conn:
            current = _locked_topic(conn, name)
            merged = merge_configs(current.configs, set or {}, delete)
            check_min_insync(merged, current.replication_factor)
            row = conn.execute(
                update(topics)
                .where(topics.c.id == current.id)
                .values(configs=merged)
                .returning(*_TOPIC_COLUMNS)
            ).one()
        return _topic(row)

    def add_partitions(self, name: str, total: int) -> TopicInfo:
        """Grow the topic to ``total`` partitions (Kafka's CreatePartitions: never shrinks)."""
        total = _count(total, "partitions", ErrorCode.INVALID_PARTITIONS, MAX_PARTITIONS)
        with self.engine.begin() as conn:
            info = _locked_topic(conn, name)
            if total <= info.partition_count:
                raise TierlogError(
                    ErrorCode.INVALID_PARTITIONS,
                    f"topic {name!r} has {info.partition_count} partitions; the new total "
                    f"must be larger, got {total}",
                )
            live = _live_brokers(conn, info.replication_factor)
            # Continue the rotation from partition 0's first replica, as Kafka does.
            first = conn.execute(
                select(partitions.c.replicas).where(
                    partitions.c.topic_id == info.id, partitions.c.partition == 0
                )
            ).scalar()
            start = live.index(first[0]) if first and first[0] in live else None
            assignment = assign_replicas(
                live,
                total - info.partition_count,
                info.replication_factor,
                start_partition=info.partition_count,
                start_index=start,
            )
            _insert_partitions(conn, info.id, assignment, info.partition_count)
            row = conn.execute(
                update(topics)
                .where(topics.c.id == info.id)
                .values(partition_count=total)
                .returning(*_TOPIC_COLUMNS)
            ).one()
        return _topic(row)

    def delete(self, name: str) -> TopicInfo:
        """Remove the topic and (by cascade) its partitions; returns what was deleted. A topic
        that may have objects in the bucket is also marked for deletion (deleted_topics), so
        the compaction role deletes its Delta table and the name waits until it has."""
        with self.engine.begin() as conn:
            locked = conn.execute(
                select(topics.c.id).where(topics.c.name == name).with_for_update()
            ).first()
            if locked is None:
                raise _unknown(name)
            # Looked at before the delete cascades the rows away. The segment rows are locked:
            # a claim in flight (it bumps `attempts`, which references the topic without
            # locking its row) finishes first, and later ones skip them. Starting an upload
            # inserts a cold_files row, which waits on the topic row locked above.
            attempts = (
                conn.execute(
                    select(hot_segments.c.attempts)
                    .where(hot_segments.c.topic_id == locked.id)
                    .with_for_update()
                )
                .scalars()
                .all()
            )
            # A segment a tiering worker claimed may have made the table or uploaded; sealed
            # segments no worker took (a cluster without tiering) left nothing in the bucket.
            in_bucket = (
                any(a > 0 for a in attempts)
                or conn.execute(select(exists().where(cold_files.c.topic_id == locked.id))).scalar()
            )
            row = conn.execute(
                sql_delete(topics).where(topics.c.id == locked.id).returning(*_TOPIC_COLUMNS)
            ).one()
            if in_bucket:
                mark = pg_insert(deleted_topics).values(name=name, topic_id=locked.id)
                conn.execute(
                    mark.on_conflict_do_update(
                        index_elements=[deleted_topics.c.name],
                        set_={"topic_id": mark.excluded.topic_id, "deleted_at": func.now()},
                    )
                )
        return _topic(row)

    # -- reads --------------------------------------------------------------------------------

    def get(self, name: str) -> TopicInfo | None:
        with self.engine.connect() as conn:
            row = conn.execute(select(*_TOPIC_COLUMNS).where(topics.c.name == name)).first()
        return None if row is None else _topic(row)

    def list(self) -> builtins.list[TopicInfo]:
        with self.engine.connect() as conn:
            rows = conn.execute(select(*_TOPIC_COLUMNS).order_by(topics.c.name)).all()
        return [_topic(r) for r in rows]

    def partitions(self, name: str) -> builtins.list[PartitionRecord]:
        """The topic's partitions in order; UNKNOWN_TOPIC_OR_PARTITION if there is no topic."""
        stmt = (
            select(*PARTITION_COLUMNS)
            .join(topics, topics.c.id == partitions.c.topic_id)
            .where(topics.c.name == name)
            .order_by(partitions.c.partition)
        )
        with self.engine.connect() as conn:
            rows = conn.execute(stmt).all()
        if not rows:
            raise _unknown(name)  # every topic has >= 1 partition
        return [partition_info(r) for r in rows]

    def all_partitions(self) -> builtins.list[PartitionRecord]:
        stmt = (
            select(*PARTITION_COLUMNS)
            .join(topics, topics.c.id == partitions.c.topic_id)
            .order_by(topics.c.name, partitions.c.partition)
        )
        with self.engine.connect() as conn:
            return [partition_info(r) for r in conn.execute(stmt)]

    def snapshot(self) -> tuple[int, builtins.list[TopicInfo], builtins.list[PartitionRecord]]:
        """(version, topics, partitions) read in one consistent snapshot (REPEATABLE READ)."""
        with self.engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn:
            version = int(conn.execute(select(metadata_version.c.version)).scalar_one())
            infos = [
                _topic(r) for r in conn.execute(select(*_TOPIC_COLUMNS).order_by(topics.c.name))
            ]
            parts = [
                partition_info(r)
                for r in conn.execute(
                    select(*PARTITION_COLUMNS)
                    .join(topics, topics.c.id == partitions.c.topic_id)
                    .order_by(topics.c.name, partitions.c.partition)
                )
            ]
        return version, infos, parts

    def version(self) -> int:
        """The metadata version: it moves on every topic, partition or membership change."""
        with self._polls.connect() as conn:
            return int(conn.execute(select(metadata_version.c.version)).scalar_one())
