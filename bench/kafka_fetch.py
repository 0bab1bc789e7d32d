"""Kafka Fetch requests on bare sockets (bench/kafka_protocol.py's "Kafka wire" consume case):
the analogue of the raw HTTP Arrow fetch baseline, no client library. Each partition's span
is read from its leader by its own thread and connection, Fetch v11 of up to FETCH_BYTES,
walking only the record batch headers (offsets and counts), never the records."""

from __future__ import annotations

import io
import socket
import struct
import threading
import time
from datetime import timedelta

from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v11.response import FetchResponse
from kio.schema.types import BrokerId, TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i32, i32Timedelta, i64

from bench.client_consume import FETCH_BYTES, PartitionSpan, Reading
from bench.pre_encoded import recv_exactly

_BATCH = struct.Struct(">qi")  # baseOffset, batchLength
_LAST_DELTA_AT, _COUNT_AT = 23, 57


def _request(topic: str, partition: int, offset: int) -> bytes:
    req = FetchRequest(
        replica_id=BrokerId(-1),
        max_wait=i32Timedelta.parse(timedelta(milliseconds=100)),
        min_bytes=i32(1),
        max_bytes=i32(FETCH_BYTES),
        isolation_level=i8(0),
        session_id=i32(0),
        session_epoch=i32(-1),
        topics=(
            FetchTopic(
                topic=TopicName(topic),
                partitions=(
                    FetchPartition(
                        partition=i32(partition),
                        current_leader_epoch=i32(-1),
                        fetch_offset=i64(offset),
                        log_start_offset=i64(-1),
                        partition_max_bytes=i32(FETCH_BYTES),
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
        rack_id="",
    )
    body = io.BytesIO()
    entity_writer(FetchRequest)(body, req)
    frame = struct.pack(">hhih", 1, 11, 0, 5) + b"bench" + body.getvalue()
    return struct.pack(">i", len(frame)) + frame


def _batches(records: bytes, at: int, end: int) -> tuple[int, int]:
    """(records below `end`, the next offset) of the batches, checked to continue at `at`."""
    got, pos = 0, 0
    while pos + 61 <= len(records):
        base, length = _BATCH.unpack_from(records, pos)
        (last,) = struct.unpack_from(">i", records, pos + _LAST_DELTA_AT)
        (count,) = struct.unpack_from(">i", records, pos + _COUNT_AT)
        if base != at or count != last + 1:
            raise SystemExit(f"Kafka fetch: a batch at {base} (count {count}), expected {at}")
        got += max(0, min(end, base + count) - base)
        at = base + count
        pos += 12 + length
    return got, at


def _span(address: str, topic: str, span: PartitionSpan, out: list[int], lat: list[float]) -> None:
    try:
        _read_span(address, topic, span, out, lat)
    except BaseException as exc:  # a thread's SystemExit would vanish: counted as missing
        out.append(-(10**12))
        print(f"partition {span.partition}: {exc}")


def _read_span(
    address: str, topic: str, span: PartitionSpan, out: list[int], lat: list[float]
) -> None:
    host, port = address.rsplit(":", 1)
    at = span.start
    with socket.create_connection((host, int(port)), timeout=60) as sock:
        while at < span.end:
            began = time.perf_counter()
            sock.sendall(_request(topic, span.partition, at))
            (size,) = struct.unpack(">i", recv_exactly(sock, 4))
            answer, _ = entity_reader(FetchResponse)(recv_exactly(sock, size), 4)
            part = answer.responses[0].partitions[0]
            if part.error_code != 0 or not part.records:
                raise SystemExit(f"Kafka fetch at {at}: error {part.error_code}, no records")
            got, at = _batches(bytes(part.records), at, span.end)
            out.append(got)
            lat.append((time.perf_counter() - began) * 1000)


def fetch(leaders: dict[int, str], topic: str, spans: list[PartitionSpan]) -> Reading:
    """Every span read once, all partitions at once; leaders: Kafka host:port per partition."""
    counts: list[int] = []
    lat: list[float] = []
    threads = [
        threading.Thread(target=_span, args=(leaders[s.partition], topic, s, counts, lat))
        for s in spans
    ]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - started
    want = sum(s.end - s.start for s in spans)
    if sum(counts) != want:
        raise SystemExit(f"Kafka fetch read {sum(counts):,} records of {want:,}")
    return Reading(want, seconds, lat)
