"""Produce requests → per-partition frames, validated whole before anything is written.

Bad input anywhere in a request rejects the whole request (no partial writes). The Arrow
path is vectorized: O(1) Python operations per frame, never per record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import pyarrow as pa

from cluster.http.responses import parse_json

# The topic's rules for stored records, one copy for HTTP and Kafka (ingest/service/).
from ingest.data_limits import DEFAULT_LIMITS, DataLimits
from ingest.service.record_rules import checked_records
from logformat import records
from logformat.errors import ErrorCode, TierlogError
from logformat.expansion import UNLIMITED, ExpansionLimits, check_json_records
from logformat.frame import encode_frame
from logformat.partitioner import StickyPartitioner, assign_partitions
from metadata.configs import TopicConfig


class PartitionAppend(NamedTuple):
    partition: int
    frames: list[bytearray]
    positions: list[int] | None  # request positions of the records, in append order (JSON)
    record_count: int


class ProducePlan(NamedTuple):
    appends: list[PartitionAppend]
    record_count: int


class ProducerFields(NamedTuple):
    """An idempotent producer's identity and the sequence of the request's first record."""

    producer_id: int
    producer_epoch: int
    base_sequence: int


_MAX_SEQUENCE = 0x7FFFFFFF


def producer_fields(headers: Mapping[str, str]) -> ProducerFields | None:
    """Parse X-Tierlog-Producer-Id / -Producer-Epoch / -Sequence (all or none)."""
    names = ("x-tierlog-producer-id", "x-tierlog-producer-epoch", "x-tierlog-sequence")
    raw = [headers.get(name) for name in names]
    if raw == [None, None, None]:
        return None
    if any(x is None for x in raw):
        raise TierlogError(
            ErrorCode.INVALID_REQUEST,
            "idempotent produce needs all of X-Tierlog-Producer-Id, -Producer-Epoch, -Sequence",
        )
    try:
        pid, epoch, seq = (int(x or "") for x in raw)
    except ValueError:
        raise TierlogError(ErrorCode.INVALID_REQUEST, "producer headers must be integers") from None
    if not (0 <= pid < 2**63 and 0 <= epoch <= 32767 and 0 <= seq <= _MAX_SEQUENCE):
        raise TierlogError(ErrorCode.INVALID_REQUEST, "producer id, epoch or sequence out of range")
    return ProducerFields(pid, epoch, seq)


def _codec(config: TopicConfig) -> str | None:
    return config.compression_type if config.compression_type in ("zstd", "lz4") else None


def frames_for(
    batch: pa.RecordBatch, config: TopicConfig, producer: ProducerFields | None = None
) -> list[bytearray]:
    """Encode `batch` as frames of at most max.message.bytes, splitting when needed.

    With an idempotent producer each frame carries the sequence of its first record, so a
    split batch keeps consecutive sequences (Kafka wraps them at 2^31-1).
    """
    if producer is None:
        frame = encode_frame(batch, compression=_codec(config))
    else:
        frame = encode_frame(
            batch,
            compression=_codec(config),
            producer_id=producer.producer_id,
            producer_epoch=producer.producer_epoch,
            base_sequence=producer.base_sequence,
        )
    if len(frame) <= config.max_message_bytes:
        return [frame]
    if batch.num_rows == 1:
        raise TierlogError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"a record of {len(frame)} bytes (framed) exceeds the topic's max.message.bytes "
            f"of {config.max_message_bytes}",
        )
    half = batch.num_rows // 2
    second = None
    if producer is not None:
        seq = (producer.base_sequence + half) % (_MAX_SEQUENCE + 1)
        second = producer._replace(base_sequence=seq)
    return frames_for(
        records.with_offset_deltas(batch.slice(0, half)), config, producer
    ) + frames_for(records.with_offset_deltas(batch.slice(half)), config, second)


def _check_partition(partition: int, num_partitions: int, topic: str) -> None:
    if not 0 <= partition < num_partitions:
        raise TierlogError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"topic {topic!r} has partitions 0..{num_partitions - 1}; got partition {partition}",
        )


def _single(producer: ProducerFields | None) -> ProducerFields | None:
    """Sequences are per partition: an idempotent request must hold one partition's batch."""
    if producer is not None:
        raise TierlogError(
            ErrorCode.INVALID_REQUEST,
            "an idempotent produce request (X-Tierlog-Sequence) must send records to one "
            "partition: sequences are kept per partition",
        )
    return None


def _one_partition(
    p: int, batch: pa.RecordBatch, config: TopicConfig, producer: ProducerFields | None
) -> ProducePlan:
    """The whole request to partition `p`, as one append."""
    count = batch.num_rows
    return ProducePlan(
        [PartitionAppend(p, frames_for(batch, config, producer), None, count)], count
    )


def _sticky(
    batch: pa.RecordBatch,
    config: TopicConfig,
    sticky: StickyPartitioner,
    num_partitions: int,
    producer: ProducerFields | None,
) -> ProducePlan:
    """No keys, no partitions: the common case, the whole request to one sticky partition."""
    p = sticky.partition(num_partitions)
    sticky.on_batch_done()
    return _one_partition(p, batch, config, producer)


def plan_json(
    body: bytes,
    topic: str,
    num_partitions: int,
    config: TopicConfig,
    sticky: StickyPartitioner,
    now_ms: int,
    producer: ProducerFields | None = None,
    limits: ExpansionLimits = UNLIMITED,
    data_limits: DataLimits = DEFAULT_LIMITS,
) -> ProducePlan:
    check_json_records(body, limits)  # before parsing: 24 MB of `{}` would be 3 GB parsed
    doc = parse_json(body)
    if not isinstance(doc, dict) or not isinstance(doc.get("records"), list):
        raise TierlogError(
            ErrorCode.INVALID_REQUEST, 'the body must be a JSON object {"records": [ ... ]}'
        )
    if not doc["records"]:
        raise TierlogError(ErrorCode.INVALID_REQUEST, '"records" must hold at least one record')
    parsed = records.parse_json_records(doc["records"])
    count = len(parsed.keys)
    batch = records.build_batch(
        parsed.keys, parsed.values, parsed.headers, parsed.timestamps, now_ms
    )
    batch = checked_records(batch, config, now_ms, data_limits)
    explicit = None if parsed.partitions.count(None) == count else parsed.partitions
    if explicit is None and parsed.keys.count(None) == count:
        return _sticky(batch, config, sticky, num_partitions, producer)
    chosen = assign_partitions(parsed.keys, explicit, num_partitions, sticky)
    sticky.on_batch_done()
    positions: dict[int, list[int]] = {}
    for i, p in enumerate(chosen):
        positions.setdefault(p, []).append(i)
    for p in positions:
        _check_partition(p, num_partitions, topic)
    if len(positions) == 1:
        (p,) = positions
        return _one_partition(p, batch, config, producer)
    split = records.split_by_partition(batch, pa.array(chosen, pa.int32()), num_partitions)
    appends = [
        PartitionAppend(p, frames_for(part, config, _single(producer)), positions[p], part.num_rows)
        for p, part in split.items()
    ]
    return ProducePlan(appends, count)


def plan_arrow(
    body: bytes,
    topic: str,
    num_partitions: int,
    config: TopicConfig,
    sticky: StickyPartitioner,
    now_ms: int,
    producer: ProducerFields | None = None,
    limits: ExpansionLimits = UNLIMITED,
    measured: bool = False,
    data_limits: DataLimits = DEFAULT_LIMITS,
) -> ProducePlan:
    table = records.read_arrow_stream(body, limits, measured)
    if table.num_rows == 0:
        raise TierlogError(ErrorCode.INVALID_REQUEST, "the Arrow stream holds no records")
    norm = records.normalize_arrow(table, now_ms)
    batch = checked_records(norm.batch, config, now_ms, data_limits)
    partitions = norm.partitions
    if partitions is None and batch.column(2).null_count == batch.num_rows:
        return _sticky(batch, config, sticky, num_partitions, producer)
    partitions = records.resolve_partitions(partitions, batch.column(2), num_partitions, sticky)
    sticky.on_batch_done()
    split = records.split_by_partition(batch, partitions, num_partitions)
    # An idempotent request is fine when all its records land in one partition.
    one = producer if len(split) == 1 else _single(producer)
    appends = [
        PartitionAppend(p, frames_for(part, config, one), None, part.num_rows)
        for p, part in split.items()
    ]
    return ProducePlan(appends, batch.num_rows)


def json_offsets(
    plan: ProducePlan, bases: dict[int, int | TierlogError]
) -> list[dict[str, object]]:
    """Per record, in request order: {"partition", "offset"}, or the partition's error."""
    out: list[dict[str, object]] = [{}] * plan.record_count
    for append in plan.appends:
        base = bases[append.partition]
        positions = append.positions if append.positions is not None else range(append.record_count)
        if isinstance(base, TierlogError):
            failed = {"partition": append.partition, **base.to_json()}
            for pos in positions:
                out[pos] = failed
            continue
        for k, pos in enumerate(positions):
            out[pos] = {"partition": append.partition, "offset": base + k}
    return out
