"""What one read may see of a transactional partition (ingest/service/txn_log.py): nothing
at or past the last stable offset, no aborted span, no marker (by its span, or by its
header when its span never reached Postgres)."""

from __future__ import annotations

import asyncio

import pyarrow as pa

from cluster.read_contract import FetchResult
from ingest.replication.group_commit import AppendResult
from ingest.service.txn_log import control_batch
from ingest.service.txn_partition import PartitionTxns, TxnView
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


def test_a_read_hides_the_ranges_it_reaches_among_many() -> None:
    """A partition with a marker per transaction (and an aborted one among them): a read of
    a window in the middle leaves out exactly the markers and aborted records in it."""
    spans = [Span(i, i, 7, "marker") for i in range(10, 1000, 10)]
    spans.append(Span(501, 505, 8, "aborted"))
    txns = PartitionTxns(1, spans)
    view = txns.view(1000, committed=True)
    assert view.reaching(495, 512) == ((500, 500), (501, 505), (510, 510))
    assert view.reaching(0, 9) == () and view.reaching(990, 2000) == ((990, 990),)
    got = _read([b"v%d" % i for i in range(520)])  # offsets 0..519
    window = got._replace(batch=got.batch.slice(495, 18))  # offsets 495..512
    kept = view.apply(window, 495)
    assert _values(kept) == [b"v%d" % i for i in (495, 496, 497, 498, 499, 506, 507, 508, 509)] + [
        b"v511",
        b"v512",
    ]


def test_a_marker_closes_its_producers_spans_only() -> None:
    """Two producers' transactions under way: one's commit makes its records data and its
    marker hidden; the other's still hold the last stable offset back, then its abort
    hides its records."""
    txns = PartitionTxns(1, [Span(0, 3, 7, "ongoing"), Span(4, 5, 8, "ongoing")])
    txns.add_ongoing([Span(6, 7, 7, "ongoing")])
    assert txns.view(10, committed=True).stable == 0
    assert txns.aborting(8) == (Span(4, 5, 8, "aborted"),)
    txns.close(7, True, Span(8, 8, 7, "marker"))
    view = txns.view(10, committed=True)
    assert (view.stable, view.hidden) == (4, ((8, 8),))
    txns.close(8, False, Span(9, 9, 8, "marker"))
    view = txns.view(10, committed=True)
    assert (view.stable, view.hidden) == (10, ((4, 5), (8, 8), (9, 9)))
    assert txns.view(10, committed=False).hidden == ((8, 8), (9, 9))
    assert sorted(txns.spans) == sorted(
        [Span(4, 5, 8, "aborted"), Span(8, 8, 7, "marker"), Span(9, 9, 8, "marker")]
    )
