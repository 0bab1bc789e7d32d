"""Kafka's leader-epoch rules over a cache's entries, and the batch field they set."""

from __future__ import annotations

import struct

import google_crc32c
import pyarrow as pa
import pytest

from cluster.read_contract import FetchResult
from ingest.kafka.leader_epochs import (
    UNDEFINED,
    EpochEnd,
    end_offset_for,
    epoch_of,
    within_epoch,
)
from ingest.kafka.record_batch import encode_batch
from logformat.schema import CONSUMER_SCHEMA

ENTRIES = [(2, 0), (3, 10), (5, 20)]  # (epoch, start offset); the log ends at 30


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [
        (5, EpochEnd(5, 30)),  # the latest: open until the log end
        (3, EpochEnd(3, 20)),
        (4, EpochEnd(3, 20)),  # never led: the epoch before it, ended where 5 began
        (1, EpochEnd(1, 0)),  # older than the oldest: ends where the oldest begins
        (6, UNDEFINED),  # newer than any this log has seen
        (-1, UNDEFINED),
    ],
)
def test_end_offset_for_follows_kafka(epoch: int, expected: EpochEnd) -> None:
    assert end_offset_for(ENTRIES, 30, epoch) == expected
    assert end_offset_for([], 30, epoch) == UNDEFINED


def test_the_epoch_of_an_offset_and_where_it_ends() -> None:
    assert epoch_of(ENTRIES, 0) == (2, 10)
    assert epoch_of(ENTRIES, 15) == (3, 20)
    assert epoch_of(ENTRIES, 25) == (5, None)
    assert epoch_of([(3, 10)], 4) == (-1, 10)  # below what the cache keeps
    assert epoch_of([], 4) == (-1, None)


def _result(offsets: list[int], next_offset: int) -> FetchResult:
    n = len(offsets)
    cols = {
        "offset": pa.array(offsets, pa.int64()),
        "timestamp": pa.array([0] * n, CONSUMER_SCHEMA.field("timestamp").type),
    }
    arrays = [cols.get(f.name, pa.nulls(n, f.type)) for f in CONSUMER_SCHEMA]
    return FetchResult(
        pa.RecordBatch.from_arrays(arrays, schema=CONSUMER_SCHEMA), next_offset, 9, 0
    )


def test_a_read_stops_where_the_next_epoch_starts() -> None:
    got = within_epoch(_result([7, 9, 11, 12], 13), 10)  # compacted: offsets 8, 10 gone
    assert got.batch.column(0).to_pylist() == [7, 9] and got.next_offset == 10
    whole = _result([7, 9], 10)
    assert within_epoch(whole, 10) is whole and within_epoch(whole, None) is whole


def test_the_leader_epoch_is_written_outside_the_crc() -> None:
    plain = encode_batch(_result([0, 1], 2).batch, 0, 2)
    stamped = encode_batch(_result([0, 1], 2).batch, 0, 2, leader_epoch=7)
    assert struct.unpack_from(">i", plain, 12) == (-1,)  # NO_PARTITION_LEADER_EPOCH
    assert struct.unpack_from(">i", stamped, 12) == (7,) and stamped[16:] == plain[16:]
    (crc,) = struct.unpack_from(">I", stamped, 17)
    assert google_crc32c.value(stamped[21:]) == crc  # CRC covers attributes onwards
