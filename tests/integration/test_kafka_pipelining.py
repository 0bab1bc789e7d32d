"""Pipelined Kafka requests on one connection: served and answered in order, and nothing
read after a request the broker refuses is ever applied."""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Iterator

import pytest

from bench.pre_encoded import kafka_request, recv_exactly
from tests.integration.brokers import BrokerProcess
from tests.integration.ports import free_port


@pytest.fixture(scope="module")
def kafka(
    db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[BrokerProcess, str]]:
    port = free_port()
    data = tmp_path_factory.mktemp("kafka-pipelining") / "data-1"
    b = BrokerProcess(db_factory(), data, 1, ["--kafka-listen", f"127.0.0.1:{port}"])
    try:
        yield b.start(), f"127.0.0.1:{port}"
    finally:
        b.stop()


def _numbered(frame: bytes, correlation: int) -> bytes:
    """The request frame with its correlation id set (bytes 8-11: after size, key, version)."""
    return frame[:8] + struct.pack(">i", correlation) + frame[12:]


def _answers(sock: socket.socket, most: int) -> list[tuple[int, bytes]]:
    """(correlation id, body) of each answer until `most` or the broker closes."""
    out: list[tuple[int, bytes]] = []
    try:
        while len(out) < most:
            (size,) = struct.unpack(">i", recv_exactly(sock, 4))
            body = recv_exactly(sock, size)
            out.append((struct.unpack_from(">i", body)[0], body))
    except ConnectionError:
        pass
    return out


def _values(broker: BrokerProcess, topic: str) -> list[str]:
    return [r["value"] for r in broker.fetch(topic, 0, 0)["records"]]


def test_pipelined_produces_are_applied_and_answered_in_order(
    kafka: tuple[BrokerProcess, str],
) -> None:
    broker, address = kafka
    broker.create_topic("piped", 1)
    frames = [
        _numbered(kafka_request("piped", 0, [b"k"] * 3, [b"%d-%d" % (i, j) for j in range(3)]), i)
        for i in range(20)
    ]
    host, port = address.split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(b"".join(frames))  # every request before any answer
        answers = _answers(sock, 20)
    assert [c for c, _ in answers] == list(range(20))
    assert _values(broker, "piped") == [f"{i}-{j}" for i in range(20) for j in range(3)]


def test_requests_after_a_refused_one_are_never_applied(kafka: tuple[BrokerProcess, str]) -> None:
    broker, address = kafka
    broker.create_topic("cut", 1)
    good = [_numbered(kafka_request("cut", 0, [b"k"], [b"%d" % i]), i) for i in range(3)]
    unknown = struct.pack(">ihhih", 10, 9999, 0, 3, -1)  # an API key no one serves
    host, port = address.split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(good[0] + good[1] + unknown + good[2])
        answers = _answers(sock, 4)
    assert [c for c, _ in answers] == [0, 1]  # then the connection closed
    assert _values(broker, "cut") == ["0", "1"]
