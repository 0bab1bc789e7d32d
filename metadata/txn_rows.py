"""A transactional id's row in Postgres (migration 0014_transactions): Kafka's transaction
states, the table, the row as Python reads it, and the checks every client call's row passes
(Kafka's error names). The statements that change it are metadata/transactions.py's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import BigInteger, Column, DateTime, Integer, Table, Text, func
from sqlalchemy.dialects.postgresql import JSONB

from metadata.txn_tables import META

EMPTY, ONGOING = "Empty", "Ongoing"
PREPARE_COMMIT, PREPARE_ABORT = "PrepareCommit", "PrepareAbort"
COMPLETE_COMMIT, COMPLETE_ABORT = "CompleteCommit", "CompleteAbort"
PREPARING = (PREPARE_COMMIT, PREPARE_ABORT)
ENDED = (EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT)  # no transaction under way
MAX_EPOCH = 32767

kafka_transactions = Table(
    "kafka_transactions",
    META,
    Column("transactional_id", Text, primary_key=True),
    Column("producer_id", BigInteger, nullable=False),
    Column("producer_epoch", Integer, nullable=False),
    Column("state", Text, nullable=False),
    Column("timeout_ms", Integer, nullable=False),
    Column("started_at", DateTime(timezone=True)),
    Column("partitions", JSONB, nullable=False),
    Column("offsets", JSONB, nullable=False),
    Column("updated_at", DateTime(timezone=True), server_default=func.now()),
)


class TxnError(Exception):
    """A refused transaction call: `kafka_name` is Kafka's error name for it."""

    def __init__(self, kafka_name: str, message: str) -> None:
        super().__init__(message)
        self.kafka_name, self.message = kafka_name, message


class TxnRow(NamedTuple):
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    started_at: datetime | None
    partitions: tuple[tuple[str, int], ...]
    # group -> {"member": str, "generation": int, "entries": [[topic, partition, offset, meta]]}
    offsets: dict[str, Any]
    updated_at: datetime


class Initialized(NamedTuple):
    producer_id: int
    producer_epoch: int


def row_of(r: Any) -> TxnRow:
    return TxnRow(
        r.transactional_id,
        int(r.producer_id),
        int(r.producer_epoch),
        r.state,
        int(r.timeout_ms),
        r.started_at,
        tuple((str(t), int(p)) for t, p in r.partitions),
        dict(r.offsets),
        r.updated_at,
    )


def expired(row: TxnRow, now: datetime) -> bool:
    started = row.started_at
    return started is not None and started + timedelta(milliseconds=row.timeout_ms) <= now


def now_utc() -> datetime:
    return datetime.now(UTC)


def matching(row: TxnRow | None, tid: str, pid: int, epoch: int) -> TxnRow:
    """The row of a client call naming (pid, epoch); Kafka's errors when they are not its."""
    if row is None or row.producer_id != pid:
        raise TxnError(
            "INVALID_PRODUCER_ID_MAPPING",
            f"transactional id {tid!r} has no producer {pid}: call InitProducerId first",
        )
    if row.producer_epoch != epoch:
        raise TxnError(
            "PRODUCER_FENCED",
            f"producer {pid} epoch {epoch} of {tid!r} is fenced by epoch {row.producer_epoch} "
            "(another producer with this transactional id, or the transaction timed out)",
        )
    if row.state in PREPARING:
        raise TxnError(
            "CONCURRENT_TRANSACTIONS", f"the transaction of {tid!r} is completing: retry"
        )
    return row
