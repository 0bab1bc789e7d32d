"""The Kafka listener on the wire (issue 19): requests no real client sends (bad frames,
wrong CRCs, versions not served, retried idempotent batches) get an answer or a closed
connection, never a dead broker, and nothing is written from a bad batch. And Kafka
connections get HTTP's protections: connection caps, request bytes in flight, the broker's
one long-poll cap (shared with HTTP fetches), and per-principal byte-rate quotas answered
Kafka's way (throttle_time_ms, the connection muted meanwhile) rather than refused."""

from __future__ import annotations

import contextlib
import re
import socket
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import google_crc32c
import pyarrow as pa
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.init_producer_id.v0.request import (
    InitProducerIdRequest as InitProducerIdRequestV0,
)
from kio.schema.init_producer_id.v0.response import (
    InitProducerIdResponse as InitProducerIdResponseV0,
)
from kio.serial import entity_reader

from ingest.kafka.record_batch import encode_batch
from logformat.schema import CONSUMER_SCHEMA
from metadata.db import make_engine, migrate
from metadata.quotas import DEFAULT_ENTITY, QuotaRepo
from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import wait_for
from tests.integration.kafka_wire import (
    api_versions_ok,
    call,
    encode,
    fetch_request,
    fetch_response,
    produce_raw,
    produce_request,
    produce_response,
    read_frame,
    request,
)
from tests.integration.ports import free_port
from tests.integration.tiering_catch_up import tier_everything

INFLIGHT = 4_000_000  # the module broker's budget of request bytes in flight
RATE = 100_000  # bytes/s: every (anonymous) client's produce and fetch quota here
BURST = 150  # records of 1 KB: half as much again as a second's quota
VALUE = bytes(1000)
UNTIERED = 3000  # bytes sealed and not yet tiered past which produce waits (no worker runs)


@pytest.fixture(scope="module")
def kafka_broker(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[BrokerProcess, str]]:
    """A broker with small limits, one long-poll slot, and RATE as every client's quotas."""
    db = db_factory()
    engine = make_engine(db)
    try:
        migrate(engine)
        rates = {"producer_byte_rate": RATE, "consumer_byte_rate": RATE}
        QuotaRepo(engine).set(DEFAULT_ENTITY, rates)
    finally:
        engine.dispose()
    port = free_port()
    data = tmp_path_factory.mktemp("kafka-wire") / "data-1"
    args = ["--kafka-listen", f"127.0.0.1:{port}", "--max-connections-per-address", "32"]
    args += ["--max-inflight-bytes", str(INFLIGHT), "--max-long-polls", "1"]
    args += ["--max-untiered-bytes", str(UNTIERED)]
    b = BrokerProcess(db, data, 1, args)
    try:
        yield b.start(), f"127.0.0.1:{port}"
    finally:
        b.stop()


def _topic(broker: BrokerProcess) -> str:
    name = f"w-{uuid.uuid4().hex[:8]}"
    broker.create_topic(name)
    return name


# -- quotas and the long-poll cap --------------------------------------------------------
# First in the module, in this order: every test here is the one anonymous principal, whose
# byte-rate windows (up to 11 s) would otherwise start with earlier tests' few bytes and
# dilute these bursts. HTTP produces here retry a 429; the consumer's test waits until its
# quota lets HTTP fetches through again, as the tests below need.


def _metric(broker: BrokerProcess, name: str) -> float:
    text = broker.http.get("/metrics").text
    found = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else -1.0


def _produce_http(broker: BrokerProcess, topic: str, records: list[dict[str, Any]]) -> None:
    """The producer's test leaves the (shared, anonymous) principal over its produce rate: a
    refused HTTP produce wrote nothing, so it is sent again once the 429's wait is over."""
    body = {"records": records}
    wait_for(
        "the records produced",
        lambda: broker.http.post(f"/topics/{topic}/records", json=body).status_code == 200,
    )


def _warm(broker: BrokerProcess, bootstrap: str, topic: str) -> None:
    """A first quota check starts the broker's (background) quota load: wait for it."""
    call(bootstrap, fetch_request(topic, 0, max_wait_ms=0))
    wait_for("quotas loaded", lambda: _metric(broker, "tierlog_quota_entities") == 1)


def test_producer_over_its_quota_is_throttled_not_refused(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    topic = _topic(broker)
    _warm(broker, bootstrap, topic)
    # BURST KB at once: over the rate, yet written. Produce v5's clients do not back off by
    # themselves, so its answer waits out the throttle it carries.
    rows = [{"offset": 0, "timestamp": 1, "key": None, "value": VALUE * BURST, "headers": None}]
    batch = encode_batch(pa.RecordBatch.from_pylist(rows, schema=CONSUMER_SCHEMA), 0, 1)
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        sent = time.monotonic()
        s.sendall(produce_request(topic, batch, version=5))
        old = produce_response(read_frame(s), version=5)
        waited_s = time.monotonic() - sent
    assert old.responses[0].partition_responses[0].error_code == 0
    assert old.throttle_time > timedelta(0) and waited_s >= old.throttle_time.total_seconds()
    # Now at its rate: BURST KB more by Produce v7, answered at once with the time to wait,
    # and the connection's next request is served no sooner (it is muted meanwhile).
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(produce_request(topic, batch))
        answer = produce_response(read_frame(s))
        answered = time.monotonic()
        s.sendall(request(18, 0, b""))
        assert read_frame(s)[4:6] == b"\0\0"  # ApiVersions, no error
        muted_s = time.monotonic() - answered
    assert answer.responses[0].partition_responses[0].error_code == 0
    assert answer.throttle_time > timedelta(0)
    # Muted: not answered in milliseconds. (Half: the throttle runs from when the broker
    # answered, and a loaded machine may hand this test the answer late.)
    assert muted_s >= answer.throttle_time.total_seconds() / 2
    # Now at its rate: librdkafka's next 100 KB take it over again, and it is told so.
    throttles: list[float] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "batch.size": 16_384,  # several requests, so the quota bites mid-way
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    for _ in range(100):
        producer.produce(topic, value=VALUE, partition=0)
    assert producer.flush(30) == 0
    producer.poll(0)  # throttle events are served from poll()
    assert any(t > 0 for t in throttles), throttles
    # (Not read back here: fetched bytes would start the fetch quota's window early.)
    described = broker.http.get(f"/topics/{topic}").json()["partitions"][0]
    assert described["high_watermark"] == 2 + 100


def test_consumer_over_its_quota_is_throttled(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    topic = _topic(broker)
    _produce_http(broker, topic, [{"value": "v" * 1000} for _ in range(BURST)])
    _warm(broker, bootstrap, topic)
    throttles: list[float] = []
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",  # assign() never joins a group
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 100,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    got = 0
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 30
        while got < BURST and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            got += msg is not None and msg.error() is None
    finally:
        consumer.close()
    assert got == BURST
    assert any(t > 0 for t in throttles), throttles
    # Still over the rate: a raw Fetch gets its record, and how long to wait.
    answer = fetch_response(call(bootstrap, fetch_request(topic, BURST - 1, max_wait_ms=0)))
    assert answer.responses[0].partitions[0].records
    assert answer.throttle_time > timedelta(0)
    # Over HTTP, the same principal is refused until then (the tests below fetch over HTTP).
    url = f"/topics/{topic}/partitions/0/records"
    assert broker.http.get(url, params={"offset": BURST}).status_code == 429
    wait_for("under the quota", lambda: broker.http.get(url, params={"offset": BURST}).is_success)


def test_long_polls_share_the_broker_cap_with_http(kafka_broker: Any) -> None:
    """With the one slot held by a waiting Kafka fetch, another Kafka fetch is answered at
    once (empty, with a second's throttle time: come back then) and an HTTP long poll gets
    503; the waiting one is answered when a record comes, and the slot is free again."""
    broker, bootstrap = kafka_broker
    topic = _topic(broker)
    host, port = bootstrap.split(":")
    # A consumer closed by an earlier test may still have its last fetch in the broker.
    wait_for("the slot free", lambda: _metric(broker, "tierlog_long_polls_in_flight") == 0)
    with socket.create_connection((host, int(port)), timeout=30) as waiting:
        waiting.sendall(fetch_request(topic, 0, max_wait_ms=20_000))
        wait_for("the slot taken", lambda: _metric(broker, "tierlog_long_polls_in_flight") == 1)
        busy = fetch_response(call(bootstrap, fetch_request(topic, 0, max_wait_ms=20_000)))
        assert busy.throttle_time == timedelta(seconds=1)
        assert busy.responses[0].partitions[0].records in (None, b"")
        r = broker.http.get(
            f"/topics/{topic}/partitions/0/records", params={"offset": 0, "wait_ms": 5000}
        )
        assert r.status_code == 503 and r.json()["error_code"] == "REQUEST_TIMED_OUT", r.text
        _produce_http(broker, topic, [{"value": "wake up"}])
        answer = fetch_response(read_frame(waiting))
    assert answer.throttle_time == timedelta(0)
    assert answer.responses[0].partitions[0].records  # the record, served to the waiting poll
    wait_for("the slot free", lambda: _metric(broker, "tierlog_long_polls_in_flight") == 0)


# -- bad input on the wire ---------------------------------------------------------------


def test_bad_frames_close_the_connection_not_the_broker(kafka_broker: Any) -> None:
    broker, bootstrap = kafka_broker
    bad = [
        struct.pack(">i", 1 << 30) + b"x",  # over the request size limit
        struct.pack(">i", -5),
        struct.pack(">i", 3) + b"abc",  # shorter than a header
        request(9999, 0, b""),  # unknown API key
        request(3, 99, b""),  # a Metadata version not served
        request(3, 1, b"\xff\xff\xff\x00\x01"),  # Metadata with a garbled body
        struct.pack(">i", 100) + b"\0\x12",  # truncated: the client hangs up mid-frame
    ]
    for raw in bad:
        assert call(bootstrap, raw) == b"", raw
        api_versions_ok(bootstrap)
    assert broker.http.get("/readyz").status_code == 200


def test_api_versions_answers_an_unknown_version(kafka_broker: Any) -> None:
    _, bootstrap = kafka_broker
    resp = call(bootstrap, request(18, 77, b""))
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
        assert produce_raw(bootstrap, topic, records).error_code == code
        if code:
            assert broker.fetch(topic, 0, 0)["high_watermark"] == 0
    assert [r["value"] for r in broker.fetch(topic, 0, 0)["records"]] == ["v"]


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
    init = encode(InitProducerIdRequestV0(transactional_id=None, transaction_timeout=timedelta(0)))
    got, _ = entity_reader(InitProducerIdResponseV0)(call(bootstrap, request(22, 0, init)), 4)
    assert got.error_code == 0 and got.producer_id >= 0 and got.producer_epoch == 0
    row = {"timestamp": 5, "key": None, "value": b"x", "headers": None}
    rows = [{"offset": i, **row} for i in range(3)]
    plain = encode_batch(pa.RecordBatch.from_pylist(rows, schema=CONSUMER_SCHEMA), 0, 3)
    answers = []
    for seq in (0, 0, 3):  # the first batch, its retry, the next batch
        part = produce_raw(bootstrap, topic, _idempotent(plain, got.producer_id, 0, seq))
        answers.append((part.error_code, part.base_offset))
    assert answers == [(0, 0), (0, 0), (0, 3)]
    assert broker.fetch(topic, 0, 0)["high_watermark"] == 6


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
                s.sendall(request(18, 0, b""))
        for s in socks:
            with contextlib.suppress(OSError):
                served += len(s.recv(4)) == 4
    finally:
        for s in socks:
            s.close()
    assert 1 <= served <= 32
    time.sleep(0.2)  # the broker counts the closed ones down
    api_versions_ok(bootstrap)


def test_request_bytes_in_flight_are_bounded(kafka_broker: Any) -> None:
    """A request that finds the in-flight budget full waits a second, then its connection
    closes; once the budget frees, requests are served again."""
    _, bootstrap = kafka_broker
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=10) as hog:
        hog.sendall(struct.pack(">i", INFLIGHT - 100) + b"\0" * 10)  # begun, never finished
        time.sleep(0.2)
        refused = struct.pack(">i", 200_000) + b"\0" * 10
        assert call(bootstrap, refused) == b""
    time.sleep(0.2)  # the broker sees the hog gone and frees its bytes
    api_versions_ok(bootstrap)


def test_produce_paused_for_tiering_is_retried_not_failed(kafka_broker: Any) -> None:
    """Past --max-untiered-bytes (no tiering worker runs here), Kafka produce to a lagging
    partition is refused with a retriable error and a second's throttle (HTTP: 503 with
    Retry-After), not error 89, which librdkafka takes as final; an idempotent producer's
    records wait, then are written once tiering catches up."""
    broker, bootstrap = kafka_broker
    topic = f"w-{uuid.uuid4().hex[:8]}"
    topic_id = str(broker.create_topic(topic, segment_bytes=1024)["id"])
    rows = [{"offset": 0, "timestamp": 1, "key": None, "value": bytes(600), "headers": None}]
    batch = encode_batch(pa.RecordBatch.from_pylist(rows, schema=CONSUMER_SCHEMA), 0, 1)

    def paused() -> Any:
        answer = produce_response(call(bootstrap, produce_request(topic, batch)))
        return answer if answer.responses[0].partition_responses[0].error_code else None

    refused = wait_for("sealed segments past the bound", paused)
    assert refused.responses[0].partition_responses[0].error_code == 7  # REQUEST_TIMED_OUT
    assert refused.throttle_time >= timedelta(seconds=1)
    written = broker.http.get(f"/topics/{topic}").json()["partitions"][0]["high_watermark"]
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in range(5):
        producer.produce(
            topic, value=b"waits %d" % i, partition=0, on_delivery=lambda e, _m: errors.append(e)
        )
    assert producer.flush(1.5) == 5  # still waiting, not failed
    tier_everything(broker.database_url, topic_id)
    assert producer.flush(30) == 0
    assert errors == [None] * 5  # each delivered, none failed
    described = broker.http.get(f"/topics/{topic}").json()["partitions"][0]
    assert described["high_watermark"] == written + 5
