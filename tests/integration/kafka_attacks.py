"""Helpers for attacks on the Kafka listener's connections: a normal client that keeps
producing and fetching beside the attack, a watch on the controller lease, raw SASL/PLAIN
over a socket, and the broker's connection gauges read from /metrics."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from http_transport.trust import default_trust
from metadata.api_keys import parse_key
from tests.integration.kafka_wire import read_frame, request


def sasl_conf(key: str, password: str | None = None) -> dict[str, Any]:
    parsed = parse_key(key)
    assert parsed is not None
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": parsed.key_id,
        "sasl.password": key if password is None else password,
    }


def connect(bootstrap: str, timeout: float = 30) -> socket.socket:
    host, port = bootstrap.split(":")
    return socket.create_connection((host, int(port)), timeout=timeout)


def kill(s: socket.socket) -> None:
    """Close with a reset (SO_LINGER 0), as a killed client's socket."""
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def closed_by_server(s: socket.socket, within: float) -> bool:
    """True once the broker closed `s` (EOF or reset); False if it is still open after
    `within` seconds (our own timeout is never taken for the broker's close)."""
    s.settimeout(within)
    try:
        while s.recv(65536):
            pass  # answers before the close are not what this waits for
    except TimeoutError:
        return False
    except ConnectionError:
        return True
    return True


def _str(v: str) -> bytes:
    return struct.pack(">h", len(v)) + v.encode()


def plain_login(s: socket.socket, user: str, password: str) -> tuple[int, str]:
    """SaslHandshake v1 (PLAIN) then SaslAuthenticate v0 on `s`: (error code, message);
    (-1, "") when the broker closed the connection instead of answering."""
    s.sendall(request(17, 1, _str("PLAIN"), correlation=1))
    if len(read_frame(s)) < 6:
        return -1, ""
    token = b"\0" + user.encode() + b"\0" + password.encode()
    s.sendall(request(36, 0, struct.pack(">i", len(token)) + token, correlation=2))
    answer = read_frame(s)
    if len(answer) < 6:
        return -1, ""
    (code,) = struct.unpack(">h", answer[4:6])
    (n,) = struct.unpack(">h", answer[6:8])
    return code, answer[8 : 8 + n].decode() if n > 0 else ""


def gauges(url: str, headers: dict[str, str]) -> dict[str, float]:
    """The Kafka listener's connection and budget gauges, by `name{labels}`."""
    text = httpx.get(f"{url}/metrics", headers=headers, timeout=10, verify=default_trust()).text
    out = {}
    for line in text.splitlines():
        if line.startswith(("tierlog_kafka_", "tierlog_auth_")):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not reached in {timeout} s: {what}"
        time.sleep(0.1)


ROUND_TRIP_PAUSE_S = 0.05


class NormalClient:
    """A SASL client producing and fetching one record at a time (one every
    ROUND_TRIP_PAUSE_S) from its own partition 0 of `topic` in a thread, and a watch that the
    broker keeps the controller lease and stays alive; `stop()` returns what went wrong
    (nothing, when the attack did no harm)."""

    def __init__(self, bootstrap: str, topic: str, key: str, url: str, admin_key: str) -> None:
        conf = {"bootstrap.servers": bootstrap, **sasl_conf(key)}
        self.producer = Producer({**conf, "message.timeout.ms": 20_000, "linger.ms": 0})
        self.consumer = Consumer(
            {**conf, "group.id": "unused", "enable.auto.commit": False, "fetch.wait.max.ms": 50}
        )
        self.topic, self.url, self.admin_key = topic, url, admin_key
        self.errors: list[str] = []
        self.round_trips = 0
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._run, daemon=True),
            threading.Thread(target=self._watch_lease, daemon=True),
        ]

    def start(self) -> NormalClient:
        # Connected and served once before the attack starts: it is the running client.
        lows = self.consumer.get_watermark_offsets(TopicPartition(self.topic, 0), timeout=20)
        self.consumer.assign([TopicPartition(self.topic, 0, lows[1])])
        self._round_trip(0)
        for t in self._threads:
            t.start()
        return self

    def _round_trip(self, i: int) -> None:
        got: list[Any] = []
        value = b"normal %d" % i
        self.producer.produce(
            self.topic, value=value, partition=0, on_delivery=lambda e, m: got.append(e)
        )
        self.producer.flush(30)
        if got != [None]:
            self.errors.append(f"produce {i}: {got!r}")
            return
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            msg = self.consumer.poll(0.2)
            if msg is None or (msg.error() and msg.error().code() == KafkaError._PARTITION_EOF):
                continue
            if msg.error():
                self.errors.append(f"fetch {i}: {msg.error()}")
                return
            if msg.value() == value:
                self.round_trips += 1
                return
        self.errors.append(f"fetch {i}: record not read back in 30 s")

    def _run(self) -> None:
        # Paced: ~20 round trips a second are mid-flight through every attack; back to back
        # (~300 a second) they cost the broker most of a core.
        i = 1
        while not self._stop.wait(ROUND_TRIP_PAUSE_S):
            try:
                self._round_trip(i)
            except Exception as exc:  # a test that failed first stopped the broker under us
                self.errors.append(f"round trip {i}: {exc!r}")
                return
            i += 1

    def _watch_lease(self) -> None:
        headers = {"authorization": f"Bearer {self.admin_key}"}
        with httpx.Client(
            verify=default_trust(), base_url=self.url, headers=headers, timeout=10
        ) as http:
            while not self._stop.wait(0.2):
                try:
                    doc = http.get("/brokers").json()
                except httpx.HTTPError as exc:
                    self.errors.append(f"/brokers: {exc!r}")
                    continue
                for b in doc["brokers"]:
                    if not (b["alive"] and b["controller"]):
                        self.errors.append(f"broker {b['id']}: {b}")

    def stop(self) -> list[str]:
        self._stop.set()
        for t in self._threads:
            t.join(60)
        self.consumer.close()
        self.producer.flush(10)
        del self.producer  # librdkafka closes its connections when the handle goes
        assert self.round_trips > 0, "the normal client never got a record through"
        return self.errors
