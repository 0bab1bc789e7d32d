"""The seam between Kafka's transaction admin APIs (ListTransactions, DescribeTransactions in
ingest/kafka/txn_admin_apis.py) and the transaction coordinator's store, which keeps each
transactional id's state in Postgres (Kafka's names: Empty, Ongoing, PrepareCommit,
PrepareAbort, CompleteCommit, CompleteAbort).

A listener without a store (no transactional producer can exist then) lists none and
describes every id as TRANSACTIONAL_ID_NOT_FOUND. The store's reads are blocking (the
handlers run them in a worker thread).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol


class TransactionRow(Protocol):
    @property
    def transactional_id(self) -> str: ...

    @property
    def producer_id(self) -> int: ...

    @property
    def producer_epoch(self) -> int: ...

    @property
    def state(self) -> str: ...

    @property
    def timeout_ms(self) -> int: ...

    @property
    def started_at(self) -> datetime | None: ...

    @property
    def partitions(self) -> tuple[tuple[str, int], ...]: ...


class TransactionStore(Protocol):
    def get(self, tid: str) -> TransactionRow | None: ...

    def list(self) -> Sequence[TransactionRow]: ...
