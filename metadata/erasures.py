"""Erasure requests (migration 0012): the audit trail of "erase every record with these keys"
and the working state the hot and cold tiers need to carry one out (issue 31).

    pending ──start──▶ running ──finish──▶ done
       └──────────────────┴──────fail──▶ failed (with why)

The audit row keeps the keys only as HMAC-SHA256 digests under the cluster secret; the raw
keys sit in ``erasure_keys`` while the request is open (the tiers compare raw keys against
row-group statistics and bloom filters) and are deleted in the transaction that ends it.
Requests on one topic run one at a time, oldest first (`runnable`), so two erasures of a
topic serialize. The record of a request outlives its topic (no foreign key).
"""

from __future__ import annotations

import builtins
import hmac
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import (
    Column,
    DateTime,
    ForeignKey,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    func,
    insert,
    literal,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, UUID
from sqlalchemy.engine import Connection, Engine

from metadata.db import single_statements
from metadata.schema import cluster, hot_segments, of_partition, partitions, topics
from metadata.types import PartitionRecord, TopicIdPartition

STATES = ("pending", "running", "done", "failed")
OPEN_STATES = ("pending", "running")
MAX_KEYS = 10_000

_meta = MetaData()
erasures = Table(
    "erasures",
    _meta,
    Column("id", UUID(as_uuid=False), primary_key=True, server_default=text("gen_random_uuid()")),
    Column("topic_id", UUID(as_uuid=False), nullable=False),
    Column("topic", Text, nullable=False),
    Column("state", Text, nullable=False, server_default="pending"),
    Column("error", Text),
    Column("requested_by", Text, nullable=False),
    Column("requested_at", DateTime(timezone=True), nullable=False, server_default=func.now()),
    Column("started_at", DateTime(timezone=True)),
    Column("finished_at", DateTime(timezone=True)),
    Column("key_count", Integer, nullable=False),
    Column("key_hashes", ARRAY(LargeBinary), nullable=False),
    Column("end_offsets", JSONB, nullable=False),
    Column("hot", JSONB, nullable=False),
    Column("cold", JSONB, nullable=False),
)
erasure_keys = Table(
    "erasure_keys",
    _meta,
    Column("erasure_id", UUID(as_uuid=False), ForeignKey(erasures.c.id), primary_key=True),
    Column("keys", ARRAY(LargeBinary), nullable=False),
)


class Erasure(NamedTuple):
    id: str
    topic_id: str
    topic: str
    state: str
    error: str | None
    requested_by: str
    requested_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    key_count: int
    end_offsets: dict[str, int]  # partition (as text) -> log end offset at acceptance
    hot: dict[str, Any]  # "partition/broker" -> that replica's result
    cold: dict[str, Any]  # partition (as text) -> the cold tier's result

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "topic": self.topic,
            "state": self.state,
            "error": self.error,
            "requested_by": self.requested_by,
            "requested_at": _iso(self.requested_at),
            "started_at": _iso(self.started_at),
            "finished_at": _iso(self.finished_at),
            "keys": self.key_count,
            "end_offsets": self.end_offsets,
            "hot": self.hot,
            "cold": self.cold,
        }


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at is not None else None


_COLUMNS = [erasures.c[name] for name in Erasure._fields]


def key_digest(secret: str, key: bytes) -> bytes:
    """The keyed hash the audit trail keeps instead of a key (HMAC-SHA256, cluster secret)."""
    return hmac.digest(secret.encode(), key, "sha256")


def _uuid(value: str) -> str | None:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        return None


class ErasureRepo:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._polls = single_statements(engine)  # every broker counts open requests each second

    def create(
        self,
        topic_id: str,
        topic: str,
        keys: Sequence[bytes],
        requested_by: str,
        end_offsets: Mapping[int, int],
    ) -> Erasure:
        """A pending request; its keys stored as digests (audit) and raw (work), at once."""
        keys = list(dict.fromkeys(keys))
        if not 1 <= len(keys) <= MAX_KEYS:
            raise ValueError(f"an erasure takes 1 to {MAX_KEYS} keys, not {len(keys)}")
        with self.engine.begin() as conn:
            secret = _secret(conn)
            row = conn.execute(
                insert(erasures)
                .values(
                    topic_id=topic_id,
                    topic=topic,
                    requested_by=requested_by,
                    key_count=len(keys),
                    key_hashes=[key_digest(secret, k) for k in keys],
                    end_offsets={str(p): o for p, o in end_offsets.items()},
                    hot={},
                    cold={},
                )
                .returning(*_COLUMNS)
            ).one()
            conn.execute(insert(erasure_keys).values(erasure_id=row.id, keys=keys))
        return Erasure(*row)

    def get(self, topic: str, erasure_id: str) -> Erasure | None:
        """The request `erasure_id` of `topic`; None for another topic's id or a malformed one."""
        eid = _uuid(erasure_id)
        if eid is None:
            return None
        query = select(*_COLUMNS).where(erasures.c.id == eid, erasures.c.topic == topic)
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        return None if row is None else Erasure(*row)

    def list(self, topic: str, limit: int = 100) -> builtins.list[Erasure]:
        """The topic's requests, newest first."""
        query = (
            select(*_COLUMNS)
            .where(erasures.c.topic == topic)
            .order_by(erasures.c.requested_at.desc(), erasures.c.id)
            .limit(limit)
        )
        with self.engine.connect() as conn:
            return [Erasure(*r) for r in conn.execute(query)]

    def runnable(self) -> builtins.list[Erasure]:
        """Per topic, its oldest open request: the one to work on (the others wait)."""
        e = erasures.c
        query = select(*_COLUMNS).where(e.state.in_(OPEN_STATES)).order_by(e.requested_at, e.id)
        first: dict[str, Erasure] = {}
        with self.engine.connect() as conn:
            for row in conn.execute(query):
                first.setdefault(row.topic_id, Erasure(*row))
        return builtins.list(first.values())

    def count_open(self) -> dict[str, int]:
        """How many requests are open, by state (zeros included): read through the partial
        index of open requests, so its cost does not grow with the finished ones."""
        e = erasures.c
        query = select(e.state, func.count()).where(e.state.in_(OPEN_STATES)).group_by(e.state)
        with self._polls.connect() as conn:
            found = {str(state): int(n) for state, n in conn.execute(query)}
        return {state: found.get(state, 0) for state in OPEN_STATES}

    def count_by_state(self) -> dict[str, int]:
        """How many requests are in each state, cluster-wide (every state, zeros included)."""
        e = erasures.c
        query = select(e.state, func.count()).group_by(e.state)
        with self.engine.connect() as conn:
            found = {str(state): int(n) for state, n in conn.execute(query)}
        return {state: found.get(state, 0) for state in STATES}

    def keys(self, erasure_id: str) -> builtins.list[bytes]:
        query = select(erasure_keys.c["keys"]).where(erasure_keys.c.erasure_id == erasure_id)
        with self.engine.connect() as conn:
            found = conn.execute(query).scalar_one_or_none()
        return [bytes(k) for k in found or []]

    def start(self, erasure_id: str) -> None:
        self._set(erasure_id, ("pending",), state="running", started_at=func.now())

    def record_hot(self, erasure_id: str, replica: str, result: Mapping[str, Any]) -> None:
        """One replica's result ("partition/broker"), merged into the request's `hot`; the
        compaction workers are told (ERASURE_WORK_CHANNEL) on commit: the partition's cold
        pass may be due."""
        note = text("SELECT pg_notify(:channel, :id)").bindparams(
            channel=ERASURE_WORK_CHANNEL, id=erasure_id
        )
        self._merge(erasure_id, erasures.c.hot, replica, result, also=note)

    def record_cold(
        self, erasure_id: str, topic_id: str, partition: int, result: Mapping[str, Any]
    ) -> None:
        """The partition's cold result; readers are told (ERASURES_CHANNEL) on commit."""
        note = text("SELECT pg_notify(:channel, :tp)").bindparams(
            channel=ERASURES_CHANNEL, tp=f"{topic_id}/{partition}"
        )
        self._merge(erasure_id, erasures.c.cold, str(partition), result, also=note)

    def finish(self, erasure_id: str) -> bool:
        """done (from an open state); the raw keys are deleted in the same transaction."""
        return self._end(erasure_id, state="done", error=None)

    def fail(self, erasure_id: str, why: str) -> bool:
        return self._end(erasure_id, state="failed", error=why)

    def fail_deleted_topics(self) -> int:
        """Open requests whose topic is gone (deleted, or deleted and created anew under the
        same name) fail, saying so; returns how many."""
        e = erasures.c
        gone = ~select(topics.c.id).where(topics.c.id == e.topic_id).exists()
        with self.engine.begin() as conn:
            ids = conn.execute(
                select(e.id).where(e.state.in_(OPEN_STATES), gone).with_for_update()
            ).scalars()
            ended = [
                eid for eid in ids if self._end_in(conn, eid, "failed", "the topic was deleted")
            ]
        return len(ended)

    def resize_untiered_segment(
        self, tp: TopicIdPartition, base_offset: int, end_offset: int, size: int
    ) -> None:
        """A registered segment not yet tiered was erased in place: tiering must expect its new
        size (every replica's copy of [base, end) has it: the rewrite is the same everywhere)."""
        h = hot_segments.c
        stmt = (
            update(hot_segments)
            .where(
                of_partition(hot_segments, tp),
                h.base_offset == base_offset,
                h.end_offset == end_offset,
                h.state != "tiered",
            )
            .values(size_bytes=size)
        )
        with self.engine.begin() as conn:
            conn.execute(stmt)

    def replicas(self, tp: TopicIdPartition) -> builtins.list[int]:
        query = select(partitions.c.replicas).where(of_partition(partitions, tp))
        with self.engine.connect() as conn:
            found = conn.execute(query).scalar_one_or_none()
        return builtins.list(found or [])

    def tiering_in_flight(self, tp: TopicIdPartition, below: int) -> bool:
        """Is a segment starting below `below` being copied to the cold tier right now (its
        copy may predate the hot erasure)?"""
        h = hot_segments.c
        query = select(h.base_offset).where(
            of_partition(hot_segments, tp), h.base_offset < below, h.state == "tiering"
        )
        with self.engine.connect() as conn:
            return conn.execute(query.limit(1)).first() is not None

    def _set(self, erasure_id: str, states: Sequence[str], **values: Any) -> bool:
        stmt = update(erasures).where(erasures.c.id == erasure_id, erasures.c.state.in_(states))
        with self.engine.begin() as conn:
            return conn.execute(stmt.values(**values)).rowcount == 1

    def _merge(
        self,
        erasure_id: str,
        column: Any,
        name: str,
        result: Mapping[str, Any],
        also: Any = None,
    ) -> None:
        patch = func.jsonb_build_object(name, literal(dict(result), JSONB))
        stmt = (
            update(erasures)
            .where(erasures.c.id == erasure_id, erasures.c.state.in_(OPEN_STATES))
            .values({column.name: column.op("||")(patch)})
        )
        with self.engine.begin() as conn:
            conn.execute(stmt)
            if also is not None:
                conn.execute(also)

    def _end(self, erasure_id: str, state: str, error: str | None) -> bool:
        with self.engine.begin() as conn:
            return self._end_in(conn, erasure_id, state, error)

    @staticmethod
    def _end_in(conn: Connection, erasure_id: str, state: str, error: str | None) -> bool:
        ended = conn.execute(
            update(erasures)
            .where(erasures.c.id == erasure_id, erasures.c.state.in_(OPEN_STATES))
            .values(state=state, error=error, finished_at=func.now())
        ).rowcount
        conn.execute(erasure_keys.delete().where(erasure_keys.c.erasure_id == erasure_id))
        return ended == 1


def replica_name(partition: int, broker_id: int) -> str:
    return f"{partition}/{broker_id}"


def hot_done(e: Erasure, partitions: Sequence[PartitionRecord]) -> bool:
    """Has every replica of every partition erased its hot log?"""
    return all(
        e.hot.get(replica_name(p.partition, r), {}).get("done")
        for p in partitions
        for r in p.replicas
    )


# Readers learn of a cold rewrite at once: record_cold NOTIFYs ERASURES_CHANNEL in the
# transaction that records it, and every reader (fetch/cold/cold_tier.py, brokers and fetch
# nodes) drops the file lists it cached (fetch/cold/cold_index.py). A reader uses a cached list
# only while its LISTEN connection holds; TCP keepalives every READER_LISTEN_KEEPALIVE_S notice
# a silently dead one within READER_LISTEN_DEAD_S, after which its lists are unusable. So a
# request is done once every cold rewrite is that much old (plus a second for clocks and
# delivery): a reader that missed the NOTIFY has stopped trusting its lists by then. The
# replaced objects outlive that by far (grace period >= 60 s).
ERASURES_CHANNEL = "tierlog_erasures"  # payload: "topic_id/partition"
# A replica recorded its hot pass: what wakes an idle compaction worker (cluster/wakeups.py).
ERASURE_WORK_CHANNEL = "tierlog_erasure_work"  # payload: the request's id
READER_LISTEN_KEEPALIVE_S = 1
READER_LISTEN_DEAD_S = 3 * READER_LISTEN_KEEPALIVE_S
COLD_SETTLE_MS = READER_LISTEN_DEAD_S * 1000 + 1_000
# Without notifications (no listener), a reader's window of cold files expires after this.
READER_FILE_LIST_TTL_S = 10.0


def cold_done(e: Erasure, partitions: Sequence[PartitionRecord], tiered: bool, now_ms: int) -> bool:
    if not tiered:
        return True
    results = [e.cold.get(str(p.partition), {}) for p in partitions]
    return all(
        r.get("done") and now_ms - int(r.get("finished_at_ms", 0)) >= COLD_SETTLE_MS
        for r in results
    )


def _secret(conn: Connection) -> str:
    return str(conn.execute(select(cluster.c.secret).where(cluster.c.id == 1)).scalar_one())
