"""Kafka connections get HTTP's protections (issue 19): the broker's one long-poll cap, shared
with HTTP fetches, and per-principal byte-rate quotas answered Kafka's way (throttle_time_ms,
the connection muted meanwhile) rather than refused."""

from __future__ import annotations

import re
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from ingest.kafka.record_batch import encode_batch
from logformat.schema import CONSUMER_SCHEMA
from metadata.db import make_engine, migrate
from metadata.quotas import DEFAULT_ENTITY, QuotaRepo
from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import wait_for
from tests.integration.kafka_wire import (
    call,
    fetch_request,
    fetch_response,
    produce_request,
    produce_response,
    read_frame,
)
from tests.integration.ports import free_port

RATE = 100_000  # bytes/s: every (anonymous) client's produce and fetch quota here
BURST = 150  # records of 1 KB: half as much again as a second's quota
VALUE = bytes(1000)


@pytest.fixture(scope="module")
def kafka_limits(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[BrokerProcess, str]]:
    """A broker with one long-poll slot, whose clients all have RATE as their quotas."""
    db = db_factory()
    engine = make_engine(db)
    try:
        migrate(engine)
        rates = {"producer_byte_rate": RATE, "consumer_byte_rate": RATE}
        QuotaRepo(engine).set(DEFAULT_ENTITY, rates)
    finally:
        engine.dispose()
    port = free_port()
    data = tmp_path_factory.mktemp("kafka-limits") / "data-1"
    args = ["--kafka-listen", f"127.0.0.1:{port}", "--max-long-polls", "1"]
    b = BrokerProcess(db, data, 1, args)
    try:
        yield b.start(), f"127.0.0.1:{port}"
    finally:
        b.stop()


def _metric(broker: BrokerProcess, name: str) -> float:
    text = broker.http.get("/metrics").text
    found = re.search(rf"^{name} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else -1.0


def _topic(broker: BrokerProcess) -> str:
    name = f"lim-{uuid.uuid4().hex[:8]}"
    broker.create_topic(name)
    return name


def test_long_polls_share_the_broker_cap_with_http(kafka_limits: Any) -> None:
    """With the one slot held by a waiting Kafka fetch, another Kafka fetch is answered at
    once (empty, with a second's throttle time: come back then) and an HTTP long poll gets
    503; the waiting one is answered when a record comes, and the slot is free again."""
    broker, bootstrap = kafka_limits
    topic = _topic(broker)
    host, port = bootstrap.split(":")
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
        broker.produce(topic, [{"value": "wake up"}])
        answer = fetch_response(read_frame(waiting))
    assert answer.throttle_time == timedelta(0)
    assert answer.responses[0].partitions[0].records  # the record, served to the waiting poll
    wait_for("the slot free", lambda: _metric(broker, "tierlog_long_polls_in_flight") == 0)


def _warm(broker: BrokerProcess, bootstrap: str, topic: str) -> None:
    """A first quota check starts the broker's (background) quota load: wait for it."""
    call(bootstrap, fetch_request(topic, 0, max_wait_ms=0))
    wait_for("quotas loaded", lambda: _metric(broker, "tierlog_quota_entities") == 1)


def test_producer_over_its_quota_is_throttled_not_refused(kafka_limits: Any) -> None:
    broker, bootstrap = kafka_limits
    topic = _topic(broker)
    _warm(broker, bootstrap, topic)
    throttles: list[float] = []
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "batch.size": 16_384,  # many requests, so the quota bites mid-way
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    for _ in range(BURST):
        producer.produce(topic, value=VALUE, partition=0)
    assert producer.flush(30) == 0
    producer.poll(0)  # throttle events are served from poll()
    assert any(t > 0 for t in throttles), throttles  # librdkafka saw the broker's throttle
    # Still over the rate: a raw Produce is written, and its answer says how long to wait.
    rows = [{"offset": 0, "timestamp": 1, "key": None, "value": VALUE * 50, "headers": None}]
    batch = encode_batch(pa.RecordBatch.from_pylist(rows, schema=CONSUMER_SCHEMA), 0, 1)
    answer = produce_response(call(bootstrap, produce_request(topic, batch)))
    assert answer.throttle_time > timedelta(0)
    assert answer.responses[0].partition_responses[0].error_code == 0
    assert broker.fetch(topic, max_records=1)["high_watermark"] == BURST + 1


def test_consumer_over_its_quota_is_throttled(kafka_limits: Any) -> None:
    broker, bootstrap = kafka_limits
    topic = _topic(broker)
    body = {"records": [{"value": "v" * 1000} for _ in range(BURST)]}
    # The producer's test may have left the (shared) principal over its produce rate: a
    # refused produce wrote nothing, so it is sent again once the 429's wait is over.
    wait_for(
        "the records produced",
        lambda: broker.http.post(f"/topics/{topic}/records", json=body).status_code == 200,
    )
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
    # Still over the rate: a raw Fetch gets its records, and how long to wait.
    answer = fetch_response(call(bootstrap, fetch_request(topic, 0, max_wait_ms=0)))
    assert answer.responses[0].partitions[0].records
    assert answer.throttle_time > timedelta(0)
