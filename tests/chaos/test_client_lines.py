"""The Kafka producer's idempotence lines (librdkafka's "eos" debug log) reach a failed
run's report: the client's side of a duplicate, kept from a real librdkafka."""

from __future__ import annotations

import time

from confluent_kafka import Producer

from tests.chaos.history import CLIENT_LINES, History
from tests.chaos.kafka_workload import _client_logger
from tests.integration.ports import free_port


def test_librdkafka_s_idempotence_lines_are_kept_and_reported() -> None:
    history = History()
    producer = Producer(
        {
            "bootstrap.servers": f"127.0.0.1:{free_port()}",  # nothing listens: no producer id
            "enable.idempotence": True,
            "log_level": 2,
            "debug": "eos",
            "logger": _client_logger(history, "kafka"),
        }
    )
    producer.produce("t", b"v")
    deadline = time.monotonic() + 30
    while not any("RequestPID" in line for line in history.client_lines):
        assert time.monotonic() < deadline, list(history.client_lines)
        producer.poll(0.1)
    assert not any("REBOOTSTRAP" in line for line in history.client_lines)  # noise left out
    tail = history.client_tail()
    assert "idempotence (librdkafka eos)" in tail and "RequestPID" in tail
    producer.purge()
    producer.flush(0)


def test_only_the_last_lines_are_kept() -> None:
    history = History()
    for i in range(CLIENT_LINES + 10):
        history.client_line(f"line {i}")
    assert len(history.client_lines) == CLIENT_LINES
    assert history.client_lines[0] == "line 10"
    assert History().client_tail() == ""  # nothing kept: nothing added to a report
