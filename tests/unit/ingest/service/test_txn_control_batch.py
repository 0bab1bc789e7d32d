"""The control records a marker writes (ingest/service/txn_log.py): Kafka's commit/abort
record (key: version 0 + type; value: version 0 + coordinator epoch), each with the time it
was written, though most of it is built once per kind."""

from __future__ import annotations

import struct
from datetime import UTC, datetime

from ingest.service.txn_log import ABORT, COMMIT, control_batch
from logformat.schema import RECORD_SCHEMA
from logformat.txn_rows import MARKER_HEADER


def test_each_marker_is_kafkas_control_record_with_its_own_time() -> None:
    first, second = control_batch(True, 1_000), control_batch(False, 2_000)
    again = control_batch(True, 3_000)
    for batch, kind, ms in ((first, COMMIT, 1_000), (second, ABORT, 2_000), (again, COMMIT, 3_000)):
        assert batch.schema == RECORD_SCHEMA and batch.num_rows == 1
        row = batch.to_pylist()[0]
        assert struct.unpack(">hh", row["key"]) == (0, kind)
        assert struct.unpack(">hi", row["value"]) == (0, 0)
        assert row["timestamp"] == datetime.fromtimestamp(ms / 1000, UTC)
        outcome = b"commit" if kind == COMMIT else b"abort"
        assert row["headers"] == [{"key": MARKER_HEADER, "value": outcome}]
    assert first.column(1).to_pylist() != again.column(1).to_pylist()  # not one shared time
