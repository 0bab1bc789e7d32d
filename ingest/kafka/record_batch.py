"""Kafka RecordBatch v2 <-> tierlog record batches (logformat/schema.py), both ways.

Kafka's batch is a header (offsets, timestamps, producer id/epoch/sequence, CRC-32C) over
varint-framed records; tierlog keeps the same fields as Arrow columns. Keys, values, header
keys and values, timestamps and offsets are carried unchanged, so a record round-trips
byte-exact between the two protocols. The records themselves are converted a column at a
time (record_codec.py); this module checks and writes the batch header around them.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import google_crc32c
import pyarrow as pa
import pyarrow.compute as pc

from ingest.data_limits import DEFAULT_LIMITS, DataLimits
from ingest.kafka.compression import DecodedTooLarge, decompress
from ingest.kafka.record_codec import corrupt, decode_records, encode_records
from ingest.service.expansion import check_decoded, decode_budget
from logformat.errors import ErrorCode, TierlogError
from logformat.expansion import ExpansionLimits

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, record count
_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = _HEADER.size  # 61
_FRONT, _TAIL = struct.Struct(">qiibI"), struct.Struct(">hiqqqhii")  # split at the CRC
_CRC_START = _FRONT.size  # the CRC covers attributes .. the end of the batch
_TRANSACTIONAL, _CONTROL, _LOG_APPEND_TIME = 0x10, 0x20, 0x08


class KafkaBatch(NamedTuple):
    records: pa.RecordBatch  # RECORD_SCHEMA, offset_delta 0..n-1
    producer_id: int  # -1: not an idempotent producer
    producer_epoch: int
    base_sequence: int
    decoded_bytes: int  # the records' size after decompression
    transactional: bool = False  # a transactional producer's (its partition is checked)


def _body(data: bytes, codec: int, limits: ExpansionLimits) -> bytes:
    """The batch's records, decompressed within the broker's expansion limits (the byte
    limit and the compression ratio, as HTTP produce has them)."""
    body = data[HEADER_SIZE:]
    if not codec:
        check_decoded(len(body), len(body), limits)
        return body
    try:
        out = decompress(codec, body, decode_budget(len(body), limits))
    except DecodedTooLarge as exc:
        check_decoded(exc.decoded, len(body), limits)
        raise AssertionError("decode_budget and check_decoded disagree") from None
    check_decoded(len(out), len(body), limits)
    return out


def decode_batch(
    data: bytes, limits: ExpansionLimits, data_limits: DataLimits = DEFAULT_LIMITS
) -> KafkaBatch:
    """The one RecordBatch v2 of a produce request's partition (Kafka: exactly one from
    Produce v3 on). A malformed batch, or one over the broker's limits, raises before a record
    is handed on."""
    if len(data) < HEADER_SIZE:
        raise corrupt(f"{len(data)} bytes is shorter than a batch header ({HEADER_SIZE})")
    (_, length, _, magic, crc, attrs, last_delta, base_ts, _, pid, epoch, seq, count) = (
        _HEADER.unpack_from(data)
    )
    if magic != 2:
        raise corrupt(f"magic {magic}: only RecordBatch v2 is supported")
    if length + 12 != len(data):
        raise corrupt("the batch length does not match the partition's record bytes")
    if google_crc32c.value(data[_CRC_START:]) != crc:
        raise corrupt("CRC-32C mismatch")
    if attrs & _CONTROL:  # markers are the coordinator's to write, never a client's
        raise TierlogError(ErrorCode.INVALID_RECORD, "a client may not produce control batches")
    if attrs & _TRANSACTIONAL and pid < 0:
        raise TierlogError(ErrorCode.INVALID_RECORD, "a transactional batch needs a producer id")
    if not 0 < count <= limits.max_records or last_delta != count - 1:
        raise TierlogError(
            ErrorCode.INVALID_RECORD,
            f"a batch must hold 1..{limits.max_records} records with lastOffsetDelta = count - 1",
        )
    body = _body(data, attrs & 0x07, limits)
    records = decode_records(body, count, base_ts, data_limits)
    return KafkaBatch(records, pid, epoch, seq, len(body), bool(attrs & _TRANSACTIONAL))


# -- tierlog -> Kafka ---------------------------------------------------------------------


def encode_batch(
    batch: pa.RecordBatch,
    first: int,
    next_offset: int,
    log_append_time: bool = False,
    leader_epoch: int = -1,
) -> bytes:
    """One uncompressed RecordBatch v2 of a fetch result that read [first, next_offset)
    (CONSUMER_SCHEMA: absolute offsets, with gaps on a compacted topic). lastOffsetDelta
    reaches next_offset - 1, so a consumer moves past offsets compaction removed, even when
    no record is left (a batch with no records, as Kafka's cleaner leaves them).
    `leader_epoch` is written as the leader stamps it (outside the CRC): in place, so a
    fetch's megabytes are not copied again to set four bytes."""
    n = batch.num_rows
    if next_offset <= first:
        return b""
    base = batch.column(0)[0].as_py() if n else first
    stamps = batch.column(1).cast(pa.int64())
    base_ts = stamps[0].as_py() if n else -1
    body = encode_records(batch, base, base_ts) if n else b""
    attrs = _LOG_APPEND_TIME if log_append_time else 0
    max_ts = pc.max(stamps).as_py() if n else -1
    last_delta = next_offset - 1 - base
    head = _TAIL.pack(attrs, last_delta, base_ts, max_ts, -1, -1, -1, n)
    crc = google_crc32c.extend(google_crc32c.value(head), body)
    front = _FRONT.pack(base, len(head) + len(body) + 9, leader_epoch, 2, crc)
    return b"".join((front, head, body))


def encode_control(marker: pa.RecordBatch, leader_epoch: int = -1) -> bytes:
    """A transaction marker (one row of CONSUMER_SCHEMA, as the log keeps it) as Kafka
    sends it: a control batch of one control record, its key and value as written and no
    headers. Clients step over it, moving their position past its offset (librdkafka moves
    a read_committed consumer's position on control records, not on empty batches)."""
    row = marker.slice(0, 1)
    bare = row.set_column(4, "headers", pa.nulls(1, row.schema.field(4).type))
    offset = row.column(0)[0].as_py()
    ts = row.column(1).cast(pa.int64())[0].as_py()
    body = encode_records(bare, offset, ts)
    head = _TAIL.pack(_TRANSACTIONAL | _CONTROL, 0, ts, ts, -1, -1, -1, 1)
    crc = google_crc32c.extend(google_crc32c.value(head), body)
    front = _FRONT.pack(offset, len(head) + len(body) + 9, leader_epoch, 2, crc)
    return b"".join((front, head, body))
