"""Real Kafka clients against the broker's Kafka listener (issue 19): confluent-kafka
(librdkafka) and kcat, and records crossing between the Kafka and HTTP protocols."""

from __future__ import annotations

import base64
import contextlib
import io
import shutil
import socket
import struct
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import google_crc32c
import pyarrow as pa
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.init_producer_id.v0.request import (
    InitProducerIdRequest as InitProducerIdRequestV0,
)
from kio.schema.init_producer_id.v0.response import (
    InitProducerIdResponse as InitProducerIdResponseV0,
)
from kio.schema.produce.v7.request import PartitionProduceData, TopicProduceData
from kio.schema.produce.v7.request import ProduceRequest as ProduceRequestV7
from kio.schema.produce.v7.response import ProduceResponse as ProduceResponseV7
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32

from coldstore.object_store import ObjectStoreConfig
from ingest.kafka.record_batch import encode_batch
from logformat.schema import CONSUMER_SCHEMA
from metadata.db import make_engine
from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import wait_for
from tests.integration.fetch_nodes import s3_env
from tests.integration.ports import free_port
from tests.integration.s3 import MotoServer, moto_s3_fixture, new_bucket  # noqa: F401
from tiering.worker import TieringWorker

INFLIGHT = 4_000_000  # the module broker's budget of request bytes in flight


@pytest.fixture(scope="module")
def kafka_s3(moto_s3: MotoServer) -> ObjectStoreConfig:
    return new_bucket(moto_s3)


@pytest.fixture(scope="module")
def kafka_broker(
    db_factory: Callable[..., str],
    tmp_path_factory: pytest.TempPathFactory,
    kafka_s3: ObjectStoreConfig,
) -> Iterator[tuple[BrokerProcess, str]]:
    """One broker for the module, with its Kafka listener and a cold tier in (moto) S3."""
    port = free_port()
    data = tmp_path_factory.mktemp("kafka-broker") / "data-1"
    args = ["--kafka-listen", f"127.0.0.1:{port}", "--max-connections-per-address", "32"]
    args += ["--max-inflight-bytes", str(INFLIGHT)]
    b = BrokerProcess(db_factory(), data, 1, args, env=s3_env(kafka_s3))
    try:
        yield b.start(), f"127.0.0.1:{port}"
    finally:
        b.stop()


def _topic(broker: BrokerProcess, partitions: int = 1) -> str:
    name = f"k-{uuid.uuid4().hex[:8]}"
    broker.create_topic(name, partitions)
    return name


def _consume(bootstrap: str, topic: str, partition: int, count: int) -> list[Any]:
    """`count` records from offset 0 of one partition, by assignment (no group protocol)."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",  # librdkafka wants one; assign() never joins a group
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        c.assign([TopicPartition(topic, partition, 0)])
        out: list[Any] = []
        deadline = time.monotonic() + 30
        while len(out) < count and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None or msg.error().code() == KafkaError._PARTITION_EOF, (
                msg.error()
            )
            if msg.error() is None:
                out.append(msg)
        return out
    finally:
        c.close()


def _produce(bootstrap: str, topic: str, records: list[dict[str, Any]], **conf: Any) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    errors: list[Any] = []
    for r in records:
        p.produce(topic, on_delivery=lambda err, _m: errors.append(err) if err else None, **r)
    assert p.flush(30) == 0
    assert errors == []


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_idempotent_producer_and_consumer(kafka_broker: Any, codec: str) -> None:
    broker, bootstrap = kafka_broker
    topic = _topic(broker)
    records = [
        {
            "key": f"k{i}".encode(),
            "value": bytes([i % 256]) * (i % 50),
            "headers": [("h", f"v{i}".encode()), ("empty", None)],
            "timestamp": 1_700_000_000_000 + i,
            "partition": 0,
        }
        for i in range(300)
    ]
    _produce(
        bootstrap,
        topic,
        records,
        acks="all",
        **{"enable.idempotence": True, "compression.type": codec},
    )
    got = _consume(bootstrap, topic, 0, len(records))
    assert [m.offset() for m in got] == list(range(300))
    for m, r in zip(got, records, strict=True):
        assert (m.key(), m.value(), m.timestamp()[1]) == (r["key"], r["value"], r["timestamp"])
        assert m.headers() == r["headers"]


def test_kafka_to_http_byte_exact(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    topic = _topic(broker)
    raw = bytes(range(256))
    _produce(
        bootstrap,
        topic,
        [{"key": raw, "value": raw[::-1], "headers": [("bin", raw)], "timestamp": 1234}],
        acks=1,
    )
    (rec,) = broker.fetch(topic, 0, 0, value_format="base64")["records"]
    assert rec["offset"] == 0
    assert base64.b64decode(rec["key_b64"]) == raw
    assert base64.b64decode(rec["value_b64"]) == raw[::-1]
    assert rec["timestamp"] == 1234
    assert rec["headers"] == [{"key": "bin", "value_b64": base64.b64encode(raw).decode()}]


def test_http_to_kafka_byte_exact(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    topic = _topic(broker)
    raw = bytes(range(255, -1, -1))
    broker.produce(
        topic,
        [
            {
                "key_b64": base64.b64encode(raw).decode(),
                "value_b64": base64.b64encode(raw[:7]).decode(),
                "headers": [{"key": "x", "value_b64": base64.b64encode(raw[:3]).decode()}],
                "timestamp": 99,
            },
            {"key": None, "value": None},
        ],
    )
    first, second = _consume(bootstrap, topic, 0, 2)
    assert (first.key(), first.value(), first.timestamp()[1]) == (raw, raw[:7], 99)
    assert first.headers() == [("x", raw[:3])]
    assert (second.offset(), second.key(), second.value(), second.headers()) == (
        1,
        None,
        None,
        None,
    )


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (apt: kcat)")
def test_kcat_produce_and_consume(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    topic = _topic(broker, partitions=2)
    lines = "".join(f"key{i}:value {i}\n" for i in range(20))
    subprocess.run(
        ["kcat", "-b", bootstrap, "-P", "-t", topic, "-K:", "-p", "1"],
        input=lines.encode(),
        check=True,
        timeout=30,
    )
    out = subprocess.run(
        [
            "kcat",
            "-b",
            bootstrap,
            "-C",
            "-t",
            topic,
            "-p",
            "1",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%o %k=%s\n",
        ],
        capture_output=True,
        check=True,
        timeout=30,
    )
    assert out.stdout.decode().splitlines() == [f"{i} key{i}=value {i}" for i in range(20)]
    meta = subprocess.run(
        ["kcat", "-b", bootstrap, "-L", "-t", topic], capture_output=True, check=True, timeout=30
    )
    assert "2 partitions" in meta.stdout.decode()


# -- bad input on the wire: an answer or a closed connection, never a dead broker ------------


def _request(api_key: int, version: int, body: bytes, correlation: int = 7) -> bytes:
    """A request frame with header v1 (client id "t"), and v2's empty tags when flexible."""
    flexible = (api_key, version) in {(18, 3), (0, 9), (3, 12)}
    head = struct.pack(">hhih", api_key, version, correlation, 1) + b"t"
    frame = head + (b"\0" if flexible else b"") + body
    return struct.pack(">i", len(frame)) + frame


def _call(bootstrap: str, raw: bytes) -> bytes:
    """The response frame to `raw`, or b"" when the broker closed the connection."""
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(raw)
        s.shutdown(socket.SHUT_WR)  # all sent: a truncated frame is a client hanging up
        head = b""
        while len(head) < 4:
            chunk = s.recv(4 - len(head))
            if not chunk:
                return b""
            head += chunk
        (size,) = struct.unpack(">i", head)
        body = b""
        while len(body) < size:
            body += s.recv(size - len(body))
        return body


def _encode(body: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(body))(out, body)
    return out.getvalue()


def _produce_raw(bootstrap: str, topic: str, records: bytes) -> Any:
    """One Produce v7 request (acks=all) of `records` to partition 0; its partition answer."""
    req = ProduceRequestV7(
        transactional_id=None,
        acks=i16(-1),
        timeout=timedelta(seconds=5),
        topic_data=(
            TopicProduceData(
                name=topic,
                partition_data=(PartitionProduceData(index=i32(0), records=records),),
            ),
        ),
    )
    resp, _ = entity_reader(ProduceResponseV7)(_call(bootstrap, _request(0, 7, _encode(req))), 4)
    return resp.responses[0].partition_responses[0]


def _api_versions_ok(bootstrap: str) -> None:
    resp = _call(bootstrap, _request(18, 0, b""))
    assert resp[:4] == struct.pack(">i", 7) and resp[4:6] == b"\0\0"  # correlation, no error


def test_bad_frames_close_the_connection_not_the_broker(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    bad = [
        struct.pack(">i", 1 << 30) + b"x",  # over the request size limit
        struct.pack(">i", -5),
        struct.pack(">i", 3) + b"abc",  # shorter than a header
        _request(9999, 0, b""),  # unknown API key
        _request(3, 99, b""),  # a Metadata version not served
        _request(3, 1, b"\xff\xff\xff\x00\x01"),  # Metadata with a garbled body
        struct.pack(">i", 100) + b"\0\x12",  # truncated: the client hangs up mid-frame
    ]
    for raw in bad:
        assert _call(bootstrap, raw) == b"", raw
        _api_versions_ok(bootstrap)
    assert broker.http.get("/readyz").status_code == 200


def test_api_versions_answers_an_unknown_version(kafka_broker: Any) -> None:
    _, bootstrap = kafka_broker
    resp = _call(bootstrap, _request(18, 77, b""))
    got, _ = entity_reader(ApiVersionsResponseV0)(resp, 4)
    assert got.error_code == 35  # UNSUPPORTED_VERSION, with the versions we do serve
    assert {(k.api_key, k.min_version, k.max_version) for k in got.api_keys} >= {(0, 3, 9)}


def test_a_batch_with_a_wrong_crc_writes_nothing(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    topic = _topic(broker)
    good = encode_batch(
        pa.RecordBatch.from_pylist(
            [{"offset": 0, "timestamp": 5, "key": b"k", "value": b"v", "headers": None}],
            schema=CONSUMER_SCHEMA,
        ),
        0,
        1,
    )
    # A flipped byte (CRC mismatch: CORRUPT_MESSAGE, nothing written), then the intact batch.
    for records, code in ((good[:-1] + bytes([good[-1] ^ 0xFF]), 2), (good, 0)):
        assert _produce_raw(bootstrap, topic, records).error_code == code
        if code:
            assert broker.fetch(topic, 0, 0)["high_watermark"] == 0
    assert [r["value"] for r in broker.fetch(topic, 0, 0)["records"]] == ["v"]


# kafka-python reads its bundled schemas with a deprecated importlib call: its noise, not ours
@pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning")
def test_kafka_python_client(kafka_broker: Any) -> None:
    """kafka-python (a pure-Python implementation of the protocol) negotiates its own
    versions: produce with lz4 and read back by assignment."""
    from kafka import KafkaConsumer, KafkaProducer
    from kafka import TopicPartition as KTopicPartition

    broker, bootstrap = kafka_broker
    topic = _topic(broker)
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type="gzip")
    for i in range(10):
        producer.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=0)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    consumer.assign([KTopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    got: list[Any] = []
    deadline = time.monotonic() + 30
    while len(got) < 10 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got.extend(records)
    consumer.close()
    assert [(r.offset, r.key, r.value) for r in got] == [
        (i, b"k%d" % i, b"v%d" % i) for i in range(10)
    ]


def _idempotent(batch: bytes, pid: int, epoch: int, seq: int) -> bytes:
    """`batch` as an idempotent producer's: its id, epoch and base sequence, CRC redone."""
    tail = bytearray(batch[21:])
    struct.pack_into(">qhi", tail, 43 - 21, pid, epoch, seq)
    return batch[:17] + struct.pack(">I", google_crc32c.value(bytes(tail))) + bytes(tail)


def test_a_resent_idempotent_batch_is_written_once(kafka_broker: Any) -> None:
    """The producer id from InitProducerId and the batch's sequence reach the log's producer
    state: a retried batch (same sequence) answers its first offsets and writes nothing."""
    broker, bootstrap = kafka_broker
    topic = _topic(broker)
    init = _encode(InitProducerIdRequestV0(transactional_id=None, transaction_timeout=timedelta(0)))
    got, _ = entity_reader(InitProducerIdResponseV0)(_call(bootstrap, _request(22, 0, init)), 4)
    assert got.error_code == 0 and got.producer_id >= 0 and got.producer_epoch == 0
    row = {"timestamp": 5, "key": None, "value": b"x", "headers": None}
    rows = [{"offset": i, **row} for i in range(3)]
    plain = encode_batch(pa.RecordBatch.from_pylist(rows, schema=CONSUMER_SCHEMA), 0, 3)
    answers = []
    for seq in (0, 0, 3):  # the first batch, its retry, the next batch
        part = _produce_raw(bootstrap, topic, _idempotent(plain, got.producer_id, 0, seq))
        answers.append((part.error_code, part.base_offset))
    assert answers == [(0, 0), (0, 0), (0, 3)]
    assert broker.fetch(topic, 0, 0)["high_watermark"] == 6


def test_consume_history_that_is_only_in_s3(kafka_broker: Any, kafka_s3: ObjectStoreConfig) -> None:
    """Offsets below the hot log are served from the cold tier through the broker's cold read
    path: a consumer from offset 0 cannot tell the tiers apart."""
    broker, bootstrap = kafka_broker
    topic = f"cold-{uuid.uuid4().hex[:8]}"
    old = int(time.time() * 1000) - 3600_000  # local retention may delete it at once
    broker.create_topic(topic, 1, segment_bytes=4096, local_retention_ms=1000)
    values = [bytes([i % 256, 0, 0xFF]) * (50 + i) for i in range(90)]
    for i in range(0, 90, 3):
        broker.produce(
            topic,
            [
                {"value_b64": base64.b64encode(v).decode(), "timestamp": old + j}
                for j, v in enumerate(values[i : i + 3], i)
            ],
        )
    engine = make_engine(broker.database_url)
    worker = TieringWorker(engine, kafka_s3, "kafka-cold-worker")
    try:

        def hot_start() -> int | None:
            worker.run_once()
            start = broker.http.get(f"/topics/{topic}").json()["partitions"][0]["hot"]["start"]
            return int(start) if start >= 30 else None

        wait_for("the first segments tiered and deleted locally", hot_start, timeout=60, every=0.3)
    finally:
        worker.close()
        engine.dispose()
    got = _consume(bootstrap, topic, 0, 90)
    assert [(m.offset(), m.value(), m.timestamp()[1]) for m in got] == [
        (i, v, old + i) for i, v in enumerate(values)
    ]


def test_admin_creates_and_deletes_topics(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    admin = AdminClient({"bootstrap.servers": bootstrap})
    name = f"admin-{uuid.uuid4().hex[:8]}"
    new = NewTopic(name, num_partitions=2, replication_factor=1, config={"retention.ms": "60000"})
    admin.create_topics([new])[name].result(30)
    topic = broker.http.get(f"/topics/{name}").json()
    assert len(topic["partitions"]) == 2 and topic["configs"]["retention.ms"] == "60000"
    with pytest.raises(KafkaException) as err:  # tierlog's own message comes through
        admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    assert err.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    bad = NewTopic(f"{name}-x", 1, 1, config={"retention.ms": "soon"})
    with pytest.raises(KafkaException) as err:
        admin.create_topics([bad], validate_only=True)[f"{name}-x"].result(30)
    assert err.value.args[0].code() == KafkaError.INVALID_CONFIG
    admin.delete_topics([name])[name].result(30)
    assert broker.http.get(f"/topics/{name}").status_code == 404


def test_connections_per_address_are_capped(kafka_broker: Any) -> None:
    """The broker's --max-connections-per-address (32 here) holds for Kafka connections: the
    ones past it are closed at once, the others served, and the broker stays up."""
    _, bootstrap = kafka_broker
    host, port = bootstrap.split(":")
    socks = [socket.create_connection((host, int(port)), timeout=10) for _ in range(40)]
    served = 0
    try:
        for s in socks:
            with contextlib.suppress(OSError):  # a refused one may be reset mid-send
                s.sendall(_request(18, 0, b""))
        for s in socks:
            with contextlib.suppress(OSError):
                served += len(s.recv(4)) == 4
    finally:
        for s in socks:
            s.close()
    assert 1 <= served <= 32
    time.sleep(0.2)  # the broker counts the closed ones down
    _api_versions_ok(bootstrap)


def test_acks_zero_gets_no_response_and_writes(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    topic = _topic(broker)
    _produce(bootstrap, topic, [{"value": b"%d" % i, "partition": 0} for i in range(50)], acks=0)
    wait_for("acks=0 records written", lambda: broker.fetch(topic)["high_watermark"] == 50)
    assert [m.value() for m in _consume(bootstrap, topic, 0, 50)] == [b"%d" % i for i in range(50)]


def test_request_bytes_in_flight_are_bounded(kafka_broker: Any) -> None:
    """A request that finds the in-flight budget full waits a second, then its connection
    closes; once the budget frees, requests are served again."""
    _, bootstrap = kafka_broker
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as hog:
        hog.sendall(struct.pack(">i", INFLIGHT - 100) + b"\0" * 10)  # begun, never finished
        time.sleep(0.2)
        refused = struct.pack(">i", 200_000) + b"\0" * 10
        assert _call(bootstrap, refused) == b""
    time.sleep(0.2)  # the broker sees the hog gone and frees its bytes
    _api_versions_ok(bootstrap)


@pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning")
def test_list_offsets_by_time_answers_the_record_time(kafka_broker: Any) -> None:
    """ListOffsets by timestamp: the first record at or after it, with that record's own
    time (kafka-python's offsets_for_times shows both)."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KTopicPartition

    broker, bootstrap = kafka_broker
    topic = _topic(broker)
    base = 1_700_000_000_000
    _produce(
        bootstrap,
        topic,
        [{"value": b"v", "partition": 0, "timestamp": base + i * 10} for i in range(3)],
    )
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = KTopicPartition(topic, 0)
        found = consumer.offsets_for_times({tp: base + 5})[tp]
        assert (found.offset, found.timestamp) == (1, base + 10)
        assert consumer.offsets_for_times({tp: base + 100})[tp] is None  # all older
    finally:
        consumer.close()
