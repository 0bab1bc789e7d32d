"""Raw transaction requests (non-flexible versions) for test_kafka_transactions.py: the
errors Kafka's clients hide behind their own state machines, asserted by code."""

from __future__ import annotations

import importlib
import struct
from datetime import timedelta
from typing import Any

import google_crc32c
import pyarrow as pa
from kio.serial import entity_reader
from kio.static.primitive import i8, i16, i32, i64

from ingest.kafka.record_codec import encode_records
from logformat.schema import CONSUMER_SCHEMA
from tests.integration.kafka_wire import call, encode, produce_response, request

_TAIL = struct.Struct(">hiqqqhii")  # attributes .. record count (the CRC covers these on)
_TRANSACTIONAL = 0x10


def _schema(api: str, version: int, kind: str) -> Any:
    return importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")


def _ask(bootstrap: str, api: str, key: int, version: int, body: Any, name: str) -> Any:
    frame = call(bootstrap, request(key, version, encode(body)))
    resp, _ = entity_reader(getattr(_schema(api, version, "response"), name))(frame, 4)
    return resp


def init_producer(bootstrap: str, tid: str, timeout_ms: int = 60_000) -> Any:
    req = _schema("init_producer_id", 1, "request").InitProducerIdRequest(
        transactional_id=tid, transaction_timeout=timedelta(milliseconds=timeout_ms)
    )
    return _ask(bootstrap, "init_producer_id", 22, 1, req, "InitProducerIdResponse")


def add_partition(
    bootstrap: str, tid: str, pid: int, epoch: int, topic: str, partitions: tuple[int, ...] = (0,)
) -> int:
    """AddPartitionsToTxn v1: the first partition's error code."""
    s = _schema("add_partitions_to_txn", 1, "request")
    parts = tuple(i32(p) for p in partitions)
    req = s.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=tid,
        v3_and_below_producer_id=i64(pid),
        v3_and_below_producer_epoch=i16(epoch),
        v3_and_below_topics=(s.AddPartitionsToTxnTopic(name=topic, partitions=parts),),
    )
    resp = _ask(bootstrap, "add_partitions_to_txn", 24, 1, req, "AddPartitionsToTxnResponse")
    return int(resp.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)


def end_txn(bootstrap: str, tid: str, pid: int, epoch: int, commit: bool) -> int:
    req = _schema("end_txn", 1, "request").EndTxnRequest(
        transactional_id=tid, producer_id=i64(pid), producer_epoch=i16(epoch), committed=commit
    )
    return int(_ask(bootstrap, "end_txn", 26, 1, req, "EndTxnResponse").error_code)


def txn_batch(pid: int, epoch: int, seq: int, value: bytes) -> bytes:
    """One transactional RecordBatch v2 of one record."""
    batch = pa.RecordBatch.from_pylist(
        [{"offset": 0, "timestamp": 1_700_000_000_000, "key": None, "value": value}],
        schema=CONSUMER_SCHEMA,
    )
    body = encode_records(batch, 0, 1_700_000_000_000).to_pybytes()
    tail = _TAIL.pack(_TRANSACTIONAL, 0, 1_700_000_000_000, 1_700_000_000_000, pid, epoch, seq, 1)
    crc = google_crc32c.extend(google_crc32c.value(tail), body)
    return struct.pack(">qiibI", 0, len(tail) + len(body) + 9, -1, 2, crc) + tail + body


def produce_txn(bootstrap: str, topic: str, batch: bytes, tid: str, partition: int = 0) -> int:
    """A transactional Produce v7 of `batch` to `partition`: its error code."""
    s = _schema("produce", 7, "request")
    req = s.ProduceRequest(
        transactional_id=tid,
        acks=i16(-1),
        timeout=timedelta(seconds=5),
        topic_data=(
            s.TopicProduceData(
                name=topic,
                partition_data=(s.PartitionProduceData(index=i32(partition), records=batch),),
            ),
        ),
    )
    resp = produce_response(call(bootstrap, request(0, 7, encode(req))))
    return int(resp.responses[0].partition_responses[0].error_code)


def txn_coordinator(bootstrap: str, tid: str) -> int:
    """The node FindCoordinator (v2, key type 1) names for transactional id `tid`."""
    return coordinator(bootstrap, tid, 1)


def coordinator(bootstrap: str, key: str, key_type: int) -> int:
    """The node FindCoordinator (v2) names for `key` (key type 0: a group, 1: a
    transactional id)."""
    req = _schema("find_coordinator", 2, "request").FindCoordinatorRequest(
        key=key, key_type=i8(key_type)
    )
    resp = _ask(bootstrap, "find_coordinator", 10, 2, req, "FindCoordinatorResponse")
    assert int(resp.error_code) == 0, resp
    return int(resp.node_id)
