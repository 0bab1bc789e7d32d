"""Tiering and Kafka transactions (issue 30): the Delta table, read with deltalake itself,
holds committed records only. Aborted records and markers are skipped; a segment with a
transaction still open waits until it ends. Real Postgres (the spans) and moto's S3; the
replicas are tiering_env's stand-ins."""

from __future__ import annotations

import time
from typing import Any

from logformat.txn_rows import MARKER_HEADER
from metadata.transactions import Span, TxnRepo
from tests.integration.s3 import moto_s3_fixture, s3_bucket_fixture  # noqa: F401
from tests.integration.tiering_env import Env, env_fixture, rec  # noqa: F401 (fixture)


def _marker(i: int, commit: bool) -> dict[str, Any]:
    word = b"commit" if commit else b"abort"
    return rec(
        i,
        key=b"\x00\x00\x00\x01",
        value=b"\x00\x00\x00\x00\x00\x00",
        headers=[{"key": MARKER_HEADER, "value": word}],
    )


def _tiered(env: Env, topic: str) -> list[tuple[int, bytes]]:
    return [(r["offset"], r["value"]) for r in env.delta_rows(topic)]


def test_delta_holds_committed_records_only(env: Env) -> None:
    env.topic("tx", 1)
    txns = TxnRepo(env.engine)
    recs = [
        rec(0),
        rec(1),
        rec(2),  # producer 7's transaction, committed
        _marker(3, commit=True),
        rec(4),
        rec(5),  # producer 8's transaction, aborted
        _marker(6, commit=False),
        rec(7),  # not transactional
        _marker(8, commit=True),  # a marker whose span never reached Postgres
        rec(9),
    ]
    end = env.add_segment("tx", 0, 0, recs, per_frame=2)
    txns.add_spans(
        "tx",
        0,
        [Span(3, 3, 7, "marker"), Span(4, 5, 8, "aborted"), Span(6, 6, 8, "marker")],
    )
    # a second segment with producer 9's transaction open over offsets 11..12
    env.add_segment("tx", 0, end, [rec(10), rec(11), rec(12), _marker(13, True), rec(14)])
    txns.add_span("tx", 0, 9, 11, 12)

    w = env.worker("w1")
    assert w.run_once() == 1  # the first segment; the second waits for its transaction
    assert _tiered(env, "tx") == [(i, f"v{i}".encode()) for i in (0, 1, 2, 7, 9)]

    txns.close_spans("tx", 0, 9, commit=True, marker_offset=13)
    deadline = time.monotonic() + 30  # the released segment's retry backoff (≤ 200 ms)
    tiered = 0
    while tiered == 0 and time.monotonic() < deadline:
        tiered = w.run_once()
        time.sleep(0.05)
    assert tiered == 1
    assert _tiered(env, "tx") == [(i, f"v{i}".encode()) for i in (0, 1, 2, 7, 9, 10, 11, 12, 14)]


def test_aborted_open_transaction_never_reaches_delta(env: Env) -> None:
    env.topic("tx2", 1)
    txns = TxnRepo(env.engine)
    env.add_segment("tx2", 0, 0, [rec(0), rec(1), rec(2), _marker(3, False), rec(4)])
    txns.add_span("tx2", 0, 5, 1, 2)
    w = env.worker("w2")
    assert w.run_once() == 0  # open: not tiered past the last stable offset (1)
    txns.close_spans("tx2", 0, 5, commit=False, marker_offset=3)  # its timeout aborts it
    deadline = time.monotonic() + 30
    tiered = 0
    while tiered == 0 and time.monotonic() < deadline:
        tiered = w.run_once()
        time.sleep(0.05)
    assert tiered == 1
    assert _tiered(env, "tx2") == [(0, b"v0"), (4, b"v4")]


def test_a_segment_of_an_aborted_transaction_alone_keeps_only_its_marker(env: Env) -> None:
    """A file must hold a row: such a segment is tiered as its marker (known by its header),
    never as its aborted records, and the partition's later segments follow it."""
    env.topic("tx3", 1)
    txns = TxnRepo(env.engine)
    end = env.add_segment("tx3", 0, 0, [rec(0), rec(1), _marker(2, False)])
    env.add_segment("tx3", 0, end, [rec(3), rec(4)])
    txns.add_spans("tx3", 0, [Span(0, 1, 4, "aborted"), Span(2, 2, 4, "marker")])
    assert env.worker("w3").run_once() == 2
    rows = env.delta_rows("tx3")
    assert [(r["offset"], r["headers"]) for r in rows[:1]] == [
        (2, [{"key": MARKER_HEADER, "value": b"abort"}])
    ]
    assert [(r["offset"], r["value"]) for r in rows[1:]] == [(3, b"v3"), (4, b"v4")]


def test_a_segment_of_aborted_records_only_is_one_placeholder(env: Env) -> None:
    """A long aborted transaction whose marker is in a later segment: its first segment is
    tiered as one marker-like row with no data, and the partition goes on."""
    env.topic("tx4", 1)
    txns = TxnRepo(env.engine)
    end = env.add_segment("tx4", 0, 0, [rec(0), rec(1), rec(2)])
    env.add_segment("tx4", 0, end, [rec(3), _marker(4, False), rec(5)])
    txns.add_spans("tx4", 0, [Span(0, 3, 4, "aborted"), Span(4, 4, 4, "marker")])
    assert env.worker("w4").run_once() == 2
    rows = [(r["offset"], r["key"], r["value"], r["headers"]) for r in env.delta_rows("tx4")]
    assert rows == [
        (0, None, None, [{"key": MARKER_HEADER, "value": b"aborted"}]),
        (5, b"k5", b"v5", None),
    ]
