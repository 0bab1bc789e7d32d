"""SASL/PLAIN on the Kafka listener with auth on: API keys as passwords, the same ACLs as
HTTP, and nothing served before authentication but ApiVersions and SASL itself."""

from __future__ import annotations

import shutil
import socket
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
)

from metadata.api_keys import parse_key
from tests.integration.ports import free_port
from tests.integration.secured import Secured, secure_broker, started

Env = tuple[Secured, str]


@pytest.fixture(scope="module")
def env(db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    url = db_factory()
    sec = Secured(url)
    port = free_port()
    data = Path(tmp_path_factory.mktemp("kafka-sasl")) / "data"
    broker = secure_broker(url, data, extra=["--kafka-listen", f"127.0.0.1:{port}"])
    for b in started(broker):
        admin = sec.client(b.url, "admin")
        assert admin.post("/topics", json={"name": "paid"}).status_code == 201
        sec.allow("alice", "topic", "paid", "write", "read", "describe")
        sec.allow("bob", "topic", "paid", "describe")
        sec.allow("alice", "group", "paid-readers", "read", "describe")
        yield sec, f"127.0.0.1:{port}"
    sec.close()


def _sasl(sec: Secured, user: str, password: str | None = None) -> dict[str, Any]:
    key = sec.key(user)
    parsed = parse_key(key)
    assert parsed is not None
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": parsed.key_id,
        "sasl.password": key if password is None else password,
    }


def _produce(bootstrap: str, conf: dict[str, Any]) -> list[Any]:
    p = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10_000, **conf})
    errors: list[Any] = []
    p.produce("paid", value=b"x", partition=0, on_delivery=lambda e, _m: errors.append(e))
    p.flush(20)
    return errors


def test_an_allowed_key_produces_and_consumes(env: Env) -> None:
    """alice may write and read the topic and read the group: she produces, consumes as a
    group member and commits."""
    sec, bootstrap = env
    assert _produce(bootstrap, _sasl(sec, "alice")) == [None]
    conf = {"group.id": "paid-readers", "auto.offset.reset": "earliest", **_sasl(sec, "alice")}
    c = Consumer({"bootstrap.servers": bootstrap, "heartbeat.interval.ms": 100, **conf})
    c.subscribe(["paid"])
    try:
        deadline = time.monotonic() + 20
        msg = None
        while msg is None and time.monotonic() < deadline:
            msg = c.poll(0.5)
        assert msg is not None and msg.error() is None and msg.value() == b"x"
        (committed,) = c.commit(msg, asynchronous=False)
        assert committed.error is None and committed.offset == msg.offset() + 1
    finally:
        c.close()


def test_a_key_without_group_access_is_denied_the_group(env: Env) -> None:
    """bob may describe the topic but has no ACL on the group: FindCoordinator answers
    GROUP_AUTHORIZATION_FAILED, which librdkafka reports as the consumer's error."""
    sec, bootstrap = env
    conf = {"group.id": "paid-readers", **_sasl(sec, "bob")}
    c = Consumer({"bootstrap.servers": bootstrap, **conf})
    c.subscribe(["paid"])
    try:
        deadline = time.monotonic() + 20
        msg = None
        while msg is None and time.monotonic() < deadline:
            msg = c.poll(0.5)
        assert msg is not None and msg.error() is not None
        assert msg.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED, msg.error()
    finally:
        c.close()


def test_a_key_without_write_is_denied(env: Env) -> None:
    sec, bootstrap = env
    (err,) = _produce(bootstrap, _sasl(sec, "bob"))
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_wrong_password_fails_authentication(env: Env) -> None:
    sec, bootstrap = env
    wrong = sec.key("alice")[:-4] + "abcd"
    p = Producer({"bootstrap.servers": bootstrap, **_sasl(sec, "alice", wrong)})
    with pytest.raises(KafkaException) as exc:
        p.list_topics(timeout=2)
    assert exc.value.args[0].code() in (KafkaError._AUTHENTICATION, KafkaError._TRANSPORT)


def _call(bootstrap: str, api_key: int, version: int) -> bytes:
    """A body-less request's answer, or b"" when the broker closed the connection."""
    host, port = bootstrap.split(":")
    frame = struct.pack(">hhih", api_key, version, 1, 1) + b"t" + b"\0\0\0\0"
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        s.shutdown(socket.SHUT_WR)
        return s.recv(4)


def test_nothing_but_api_versions_before_authentication(env: Env) -> None:
    _, bootstrap = env
    assert _call(bootstrap, 18, 0) != b""  # ApiVersions: answered
    assert _call(bootstrap, 3, 1) == b""  # Metadata (all topics) without SASL: closed


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (apt: kcat)")
def test_kcat_authenticates(env: Env) -> None:
    """Debian's kcat (librdkafka 2.0) insists on SaslHandshake v0, whose token comes bare."""
    sec, bootstrap = env
    args = [f"{k}={v}" for k, v in _sasl(sec, "alice").items()]
    cmd = ["kcat", "-b", bootstrap, "-L", "-t", "paid", "-m", "5"]
    for a in args:
        cmd += ["-X", a]
    out = subprocess.run(cmd, capture_output=True, timeout=30)
    assert out.returncode == 0, out.stderr.decode()
    assert 'topic "paid" with 1 partitions' in out.stdout.decode()
    wrong = [*cmd[:-2], "-m", "2", "-X", "sasl.password=" + sec.key("alice")[:-4] + "abcd"]
    assert subprocess.run(wrong, capture_output=True, timeout=30).returncode != 0


def test_admin_apis_apply_the_http_acls(env: Env) -> None:
    """DescribeConfigs needs DESCRIBE, IncrementalAlterConfigs and CreatePartitions ALTER on
    the topic, a broker resource the same on the cluster: as HTTP's topic routes."""
    sec, bootstrap = env
    alice = AdminClient({"bootstrap.servers": bootstrap, **_sasl(sec, "alice")})
    paid = ConfigResource("topic", "paid")
    assert alice.describe_configs([paid])[paid].result(timeout=30)["retention.ms"].value
    entry = ConfigEntry("retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)
    alter = ConfigResource("topic", "paid", incremental_configs=[entry])
    grow = NewPartitions("paid", 2)
    broker = ConfigResource("broker", "1")
    denied = [
        (alice.incremental_alter_configs([alter])[alter], KafkaError.TOPIC_AUTHORIZATION_FAILED),
        (alice.create_partitions([grow])["paid"], KafkaError.TOPIC_AUTHORIZATION_FAILED),
        (alice.describe_configs([broker])[broker], KafkaError.CLUSTER_AUTHORIZATION_FAILED),
    ]
    for future, code in denied:
        with pytest.raises(KafkaException) as got:
            future.result(timeout=30)
        assert got.value.args[0].code() == code
    admin = AdminClient({"bootstrap.servers": bootstrap, **_sasl(sec, "admin")})
    admin.incremental_alter_configs([alter])[alter].result(timeout=30)
    assert admin.describe_configs([paid])[paid].result(timeout=30)["retention.ms"].value == (
        "3600000"
    )
