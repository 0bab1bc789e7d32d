"""Confluent's wire format as the broker reads it for schema validation: magic byte 0 and a
4-byte big-endian id, found with numpy over the Arrow buffers (slices and nulls too)."""

from __future__ import annotations

import struct

import pyarrow as pa

from ingest.service.schema_ids import framed_ids


def framed(schema_id: int, payload: bytes = b"x") -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + payload


def test_ids_of_framed_values_nulls_skipped() -> None:
    values = pa.array([framed(1), None, framed(70_000, b""), framed(2**31 - 1)], pa.binary())
    positions, ids, bad = framed_ids(values)
    assert bad is None
    assert positions.tolist() == [0, 2, 3] and ids.tolist() == [1, 70_000, 2**31 - 1]


def test_first_unframed_position() -> None:
    for wrong in (b"", b"\x00\x00\x00\x01", b"\x01" + framed(1)[1:], b"plain"):
        values = pa.array([framed(1), None, wrong, b"also wrong"], pa.binary())
        assert framed_ids(values)[2] == 2, wrong


def test_a_slice_reads_its_own_records() -> None:
    values = pa.array([b"bad", framed(5), framed(6)], pa.binary()).slice(1)
    positions, ids, bad = framed_ids(values)
    assert bad is None and positions.tolist() == [0, 1] and ids.tolist() == [5, 6]


def test_all_null_and_empty() -> None:
    assert framed_ids(pa.array([None, None], pa.binary()))[1].tolist() == []
    assert framed_ids(pa.array([], pa.binary()))[2] is None
