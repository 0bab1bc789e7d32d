"""The Kafka listener over TLS (issue 26 item 3): SASL_SSL with PLAIN, SCRAM-SHA-256 and
SCRAM-SHA-512, and SSL alone, with the broker's own certificate and key; confluent-kafka and
kcat against them; a wrong password, a plaintext client on the TLS port, and clients that
refuse a self-signed or expired certificate. One broker for the file (restarted once, with an
expired certificate, for the last test)."""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import httpx
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from metadata.api_keys import parse_key
from tests.integration.brokers import BrokerProcess
from tests.integration.ports import free_port
from tests.integration.secured import Secured, eventually, secure_broker
from tests.integration.tls_certs import self_signed

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class Env(NamedTuple):
    sec: Secured
    broker: BrokerProcess
    plain: str  # SASL_PLAINTEXT
    sasl_ssl: str
    ssl_only: str
    cert: Path
    key: Path


def _wait_https(b: BrokerProcess, cert: Path) -> None:
    deadline = time.monotonic() + 90
    ctx = ssl.create_default_context(cafile=str(cert))
    while True:
        try:
            if httpx.get(f"{b.url}/readyz", verify=ctx, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        assert b.proc is not None and b.proc.poll() is None, b.log_tail()
        assert time.monotonic() < deadline, b.log_tail()
        time.sleep(0.2)


def _start(b: BrokerProcess, cert: Path) -> None:
    b.url = f"https://127.0.0.1:{b.port}"
    b.start(wait=False)
    _wait_https(b, cert)


@pytest.fixture(scope="module")
def env(db_factory: Callable[..., str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    url = db_factory()
    sec = Secured(url)
    root = Path(tmp_path_factory.mktemp("kafka-tls"))
    cert, key = self_signed(root / "tls")
    ports = [free_port() for _ in range(3)]
    addrs = [f"127.0.0.1:{p}" for p in ports]
    extra = ["--tls-cert", str(cert), "--tls-key", str(key), "--kafka-listen", addrs[0]]
    extra += ["--kafka-sasl-ssl-listen", addrs[1], "--kafka-ssl-listen", addrs[2]]
    # Every failed login here is free, never made to wait for a turn (this file's wrong
    # passwords are answered at once; throttling is test_kafka_conn_limits.py's).
    extra += ["--failed-auth-free", "1000"]
    b = secure_broker(url, root / "data", extra=extra)
    _start(b, cert)
    try:
        admin = sec.client(b.url, "admin", verify=ssl.create_default_context(cafile=str(cert)))
        assert admin.post("/topics", json={"name": "secure"}).status_code == 201
        sec.allow("alice", "topic", "secure", "write", "read", "describe")
        sec.allow("alice", "group", "tls", "read", "describe")
        sec.allow("User:ANONYMOUS", "topic", "secure", "describe")
        alice = sec.client(b.url, "alice", verify=ssl.create_default_context(cafile=str(cert)))
        eventually(lambda: alice.get("/topics/secure").status_code == 200, 30)  # ACLs loaded
        scram = subprocess.run(
            [sys.executable, "-m", "tierlog", "users", "scram", "--key-from-env", "ALICE"],
            env={**os.environ, "ALICE": sec.key("alice"), "TIERLOG_DATABASE_URL": url},
            capture_output=True,
            timeout=60,
        )
        assert scram.returncode == 0, scram.stderr.decode()
        assert b"SCRAM-SHA-256, SCRAM-SHA-512" in scram.stdout
        yield Env(sec, b, *addrs, cert, key)
    finally:
        b.stop()
        sec.close()


def _conf(env: Env, mechanism: str, password: str | None = None) -> dict[str, Any]:
    key = env.sec.key("alice")
    parsed = parse_key(key)
    assert parsed is not None
    return {
        "bootstrap.servers": env.sasl_ssl,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(env.cert),
        "sasl.mechanism": mechanism,
        "sasl.username": parsed.key_id,
        "sasl.password": key if password is None else password,
    }


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_each_mechanism_produces_and_consumes_over_tls(env: Env, mechanism: str) -> None:
    errors: list[Any] = []
    value = f"over TLS with {mechanism}".encode()
    p = Producer({**_conf(env, mechanism), "message.timeout.ms": 30_000})
    p.produce("secure", value=value, partition=0, on_delivery=lambda e, _m: errors.append(e))
    assert p.flush(60) == 0 and errors == [None]
    c = Consumer({**_conf(env, mechanism), "group.id": "tls", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition("secure", 0, 0)])
        seen: list[bytes] = []
        deadline = time.monotonic() + 30
        while value not in seen and time.monotonic() < deadline:
            msg = c.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.append(msg.value())
        assert value in seen
    finally:
        c.close()


def _refused(conf: dict[str, Any], *expected: int) -> None:
    """Until the client reports one of the `expected` errors through error_cb: librdkafka
    reports a refused handshake or login as it happens (a metadata call would only time out:
    it keeps retrying), though not always first (under load a transport error can precede
    the handshake's own)."""
    seen: list[KafkaError] = []
    p = Producer({**conf, "error_cb": seen.append})
    deadline = time.monotonic() + 60
    while not any(e.code() in expected for e in seen):
        p.poll(0.1)
        assert time.monotonic() < deadline, f"the client reported {seen}, none of {expected}"


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_wrong_password_fails_over_tls(env: Env, mechanism: str) -> None:
    wrong = env.sec.key("alice")[:-4] + "abcd"
    _refused(_conf(env, mechanism, wrong), KafkaError._AUTHENTICATION)


def test_scram_credentials_set_over_http(env: Env) -> None:
    """PUT /security/keys/{id}/scram with the key in the body; a wrong key or field is 400."""
    bob = env.sec.key("bob")
    parsed = parse_key(bob)
    assert parsed is not None
    verify = ssl.create_default_context(cafile=str(env.cert))
    http = env.sec.client(env.broker.url, "bob", verify=verify)
    path = f"/security/keys/{parsed.key_id}/scram"
    assert http.put(path, json={"key": bob[:-4] + "abcd"}).status_code == 400
    assert http.put(path, json={"key": bob, "extra": 1}).status_code == 400
    assert http.put(path, json={"key": bob, "mechanisms": ["MD5"]}).status_code == 400
    done = http.put(path, json={"key": bob, "mechanisms": ["SCRAM-SHA-512"] * 2})
    assert done.status_code == 200, done.text
    assert done.json()["principal"] == "User:bob"
    conf = {**_conf(env, "SCRAM-SHA-512"), "sasl.username": parsed.key_id, "sasl.password": bob}
    assert Producer(conf).list_topics(timeout=20).brokers  # authenticated as bob
    only_512 = {**conf, "sasl.mechanism": "SCRAM-SHA-256"}  # only SHA-512 was set
    _refused(only_512, KafkaError._AUTHENTICATION)


def test_the_ssl_listener_serves_anonymous_under_the_acls(env: Env) -> None:
    """SSL alone: the client is User:ANONYMOUS, who may describe the topic, not write it."""
    conf = {
        "bootstrap.servers": env.ssl_only,
        "security.protocol": "SSL",
        "ssl.ca.location": str(env.cert),
    }
    p = Producer({**conf, "message.timeout.ms": 10_000})
    assert "secure" in p.list_topics("secure", timeout=20).topics
    errors: list[Any] = []
    p.produce("secure", value=b"x", partition=0, on_delivery=lambda e, _m: errors.append(e))
    p.flush(30)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_a_plaintext_client_on_the_tls_port_gets_nowhere(env: Env) -> None:
    before = env.broker.log_path.read_text(errors="replace")
    conf = {**_conf(env, "PLAIN"), "security.protocol": "SASL_PLAINTEXT"}
    conf.pop("ssl.ca.location")
    # The connection is closed in its first request (APIVERSION_QUERY): with one broker to
    # try, librdkafka may report it as all brokers down.
    _refused(conf, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)
    log = env.broker.log_path.read_text(errors="replace")[len(before) :]
    assert "Traceback" not in log
    assert Producer(_conf(env, "PLAIN")).list_topics(timeout=20).topics  # still serving


def test_a_client_that_does_not_trust_the_cert_refuses_it(env: Env) -> None:
    """Self-signed and not in the client's trust store: the TLS handshake fails."""
    conf = _conf(env, "PLAIN")
    conf.pop("ssl.ca.location")
    _refused(conf, KafkaError._SSL)


def _kcat(
    env: Env, mechanism: str, password: str | None = None, wait_s: int = 10
) -> subprocess.CompletedProcess[bytes]:
    conf = _conf(env, mechanism, password)
    cmd = ["kcat", "-b", conf.pop("bootstrap.servers"), "-L", "-t", "secure", "-m", str(wait_s)]
    conf["sasl.mechanisms"] = conf.pop("sasl.mechanism")
    for k, v in conf.items():
        cmd += ["-X", f"{k}={v}"]
    return subprocess.run(cmd, capture_output=True, timeout=60)


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat not installed (apt: kcat)")
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kcat_over_tls(env: Env, mechanism: str) -> None:
    out = _kcat(env, mechanism)
    assert out.returncode == 0, out.stderr.decode()
    assert 'topic "secure" with 1 partitions' in out.stdout.decode()
    # kcat keeps retrying a refused login until its metadata wait (-m) ends: a short one
    # (the first refusal comes within ~50 ms: no login waits for a turn here).
    wrong = _kcat(env, mechanism, env.sec.key("alice")[:-4] + "abcd", wait_s=2)
    assert wrong.returncode != 0
    assert b"SASL authentication error" in wrong.stderr, wrong.stderr.decode()


def test_an_expired_certificate_is_refused_by_the_client(env: Env) -> None:
    """Last (it restarts the broker): the same broker serving an expired certificate."""
    b = env.broker
    b.stop()
    self_signed(env.cert.parent, expired=True)
    b.start(wait=False)
    deadline = time.monotonic() + 90
    while (
        "kafka listener started"
        not in b.log_path.read_text(errors="replace").split("broker stopped")[-1]
    ):
        assert b.proc is not None and b.proc.poll() is None, b.log_tail()
        assert time.monotonic() < deadline, b.log_tail()
        time.sleep(0.2)
    _refused(_conf(env, "PLAIN"), KafkaError._SSL)
