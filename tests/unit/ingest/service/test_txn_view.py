"""What one read may see of a transactional partition (ingest/service/txn_log.py): nothing
at or past the last stable offset, no aborted span, no marker (by its span, or by its
header when its span never reached Postgres)."""

from __future__ import annotations

import asyncio

import pyarrow as pa

from cluster.read_contract import FetchResult
from ingest.replication.group_commit import AppendResult
from ingest.service.txn_log import PartitionTxns, TxnView, control_batch
from logformat.schema import CONSUMER_SCHEMA
from metadata.transactions import Span


def _read(values: list[bytes | None], marker_at: int | None = None) -> FetchResult:
    rows = [
        {"offset": i, "timestamp": 0, "key": None, "value": v, "headers": None}
        for i, v in enumerate(values)
    ]
    batch = pa.RecordBatch.from_pylist(rows, schema=CONSUMER_SCHEMA)
    if marker_at is not None:  # a real marker's headers at that row
        marker = control_batch(True, 0).column(4)
        headers = batch.column(4).to_pylist()
        headers[marker_at] = marker.to_pylist()[0]
        batch = batch.set_column(4, "headers", pa.array(headers, CONSUMER_SCHEMA.field(4).type))
    return FetchResult(batch, len(values), len(values), 0)


def _values(got: FetchResult) -> list[bytes | None]:
    return got.batch.column(3).to_pylist()


def test_read_committed_stops_at_the_oldest_open_transaction_and_skips_aborted() -> None:
    txns = PartitionTxns(
        1,
        [
            Span(1, 2, 7, "aborted"),
            Span(3, 3, 7, "marker"),
            Span(5, 6, 8, "ongoing"),
        ],
    )
    got = _read([b"a", b"x", b"y", None, b"b", b"open", b"open2", b"c"])
    committed = txns.view(8, committed=True).apply(got, 0)
    assert _values(committed) == [b"a", b"b"] and committed.next_offset == 5
    uncommitted = txns.view(8, committed=False).apply(got, 0)  # aborted shown, markers never
    assert _values(uncommitted) == [b"a", b"x", b"y", b"b", b"open", b"open2", b"c"]
    assert uncommitted.next_offset == 8


def test_a_marker_without_its_span_is_still_left_out() -> None:
    txns = PartitionTxns(1, [Span(0, 0, 7, "marker")])
    got = _read([None, b"a", None, b"b"], marker_at=2)
    assert _values(txns.view(4, committed=True).apply(got, 0)) == [b"a", b"b"]


def test_a_partition_without_transactions_is_read_as_it_is() -> None:
    got = _read([b"a", b"b"])
    assert TxnView(2, ()).apply(got, 0) is not None
    assert _values(TxnView(2, ()).apply(got, 0)) == [b"a", b"b"]


def test_a_batch_whose_span_is_being_recorded_holds_back_read_committed() -> None:
    """Written (and the high watermark past it) before Postgres has its span: read_committed
    stops at the log end offset it was queued at, read_uncommitted does not."""
    txns = PartitionTxns(1, [Span(0, 1, 7, "marker")])
    loop = asyncio.new_event_loop()
    try:
        recording: asyncio.Future[list[AppendResult]] = loop.create_future()
        txns.floors[recording] = 4
        assert txns.view(10, committed=True).stable == 4
        assert txns.view(10, committed=False).stable == 10
        del txns.floors[recording]
        assert txns.view(10, committed=True).stable == 10
    finally:
        loop.close()
