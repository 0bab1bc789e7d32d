"""`tierlog users` / `tierlog acls`, credentials in the CLI and the Python client, and TLS on
a broker's listener (a self-signed certificate, trusted by the client through `verify=`)."""

from __future__ import annotations

import contextlib
import datetime
import io
import ipaddress
import os
import ssl
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple
from unittest import mock

import httpx
import pytest

from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import FAST, wait_for
from tests.integration.secured import Secured, secure_broker, settle
from tierlog import Admin, ApiError, Consumer, Producer
from tierlog.cli.main import main


class Done(NamedTuple):
    returncode: int
    stdout: str
    stderr: str


def tierlog(*args: str, stdin: str | None = None, **env: str) -> Done:
    """`tierlog ARGS` in this process (the same code as the command, without a Python start
    per call), with `env` set and stdin/stdout/stderr captured."""
    out, err = io.StringIO(), io.StringIO()
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    stdin_io = io.TextIOWrapper(io.BytesIO((stdin or "").encode()))
    try:
        with (
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
            mock.patch.object(sys, "stdin", stdin_io),
            mock.patch("faulthandler.register"),  # wants a real stderr
        ):
            code = main(list(args))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return Done(code, out.getvalue(), err.getvalue())


def self_signed(dir: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = dir / "cert.pem", dir / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture
def tls_broker(fresh_db: str, tmp_path: Path) -> Iterator[tuple[BrokerProcess, Path]]:
    cert, key = self_signed(tmp_path)
    b = secure_broker(
        fresh_db, tmp_path / "data", extra=["--tls-cert", str(cert), "--tls-key", str(key)]
    )
    b.url = f"https://127.0.0.1:{b.port}"
    b.start(wait=False)
    deadline = time.monotonic() + 60
    while True:
        try:
            ctx = ssl.create_default_context(cafile=str(cert))
            if httpx.get(f"{b.url}/readyz", verify=ctx, timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert b.proc is not None and b.proc.poll() is None, b.log_tail()
        assert time.monotonic() < deadline, b.log_tail()
        time.sleep(0.1)
    yield b, cert
    b.stop()


def test_users_acls_cli_client_and_tls(
    tls_broker: tuple[BrokerProcess, Path], fresh_db: str
) -> None:
    broker, ca = tls_broker
    db = {"TIERLOG_DATABASE_URL": fresh_db}
    made = tierlog("users", "create", "admin", **db)
    assert made.returncode == 0, made.stderr
    admin_key = made.stdout.strip()
    alice_key = tierlog("users", "create", "alice", "--description", "app", **db).stdout.strip()
    assert alice_key.startswith("tlk_") and alice_key != admin_key
    listed = tierlog("users", "list", **db).stdout
    assert "User:alice" in listed and "active" in listed and alice_key not in listed

    url = ["--url", broker.url, "--ca-file", str(ca)]
    # The admin is a super user (--super-users User:admin); its key comes as a flag.
    done = tierlog("topics", "create", "orders", *url, "--api-key", admin_key)
    assert done.returncode == 0, done.stderr
    # alice has no ACL yet: refused, with Kafka's error name.
    done = tierlog("produce", "orders", *url, stdin="a\n", TIERLOG_API_KEY=alice_key)
    assert done.returncode == 1 and "TOPIC_AUTHORIZATION_FAILED" in done.stderr
    add = tierlog(
        *("acls", "add", "--principal", "User:alice", "--topic", "ord", "--prefixed"),
        *("--operation", "write", "--operation", "read"),
        **db,
    )
    assert add.returncode == 0, add.stderr
    # A new binding says "added"; only the same binding again says "exists" (issue 18 item 2).
    assert [line.split()[0] for line in add.stdout.splitlines()] == ["added", "added"], add
    again = tierlog(
        *("acls", "add", "--principal", "User:alice", "--topic", "ord", "--prefixed"),
        *("--operation", "write"),
        **db,
    )
    assert again.returncode == 0 and again.stdout.split()[0] == "exists", again
    assert "allow\twrite\ttopic:prefixed:ord" in tierlog("acls", "list", **db).stdout
    settle()
    done = tierlog("produce", "orders", *url, stdin="a\nb\n", TIERLOG_API_KEY=alice_key)
    assert done.returncode == 0, done.stderr

    # The Python client: api_key= and verify= (the CA of the self-signed certificate).
    with Producer(broker.url, api_key=alice_key, verify=str(ca), linger_ms=0) as producer:
        producer.send("orders", b"c").result(timeout=30)
    with Consumer(
        broker.url, api_key=alice_key, verify=str(ca), auto_offset_reset="earliest"
    ) as consumer:
        consumer.assign([("orders", 0)])  # type: ignore[list-item]
        got: list[bytes | None] = []
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            got.extend(r.value for r in consumer.poll(0.5))
    assert got == [b"a", b"b", b"c"]
    with Admin(broker.url, api_key=alice_key, verify=str(ca)) as admin, pytest.raises(ApiError):
        admin.delete_topic("orders")
    with pytest.raises(httpx.HTTPError):  # without the CA, the certificate is not trusted
        httpx.get(f"{broker.url}/healthz")

    rm = tierlog(
        *("acls", "remove", "--principal", "User:alice", "--topic", "ord", "--prefixed"),
        *("--operation", "write"),
        **db,
    )
    assert rm.returncode == 0, rm.stderr
    assert tierlog("users", "revoke", "alice", **db).returncode == 0
    assert "revoked" in tierlog("users", "list", **db).stdout
    settle()
    done = tierlog("produce", "orders", *url, stdin="d\n", TIERLOG_API_KEY=alice_key)
    assert done.returncode == 1 and "SASL_AUTHENTICATION_FAILED" in done.stderr


def test_bootstrap_key_from_the_environment_is_idempotent(fresh_db: str) -> None:
    sec = Secured(fresh_db)
    try:
        key = "tlk_00112233aabb_" + "s" * 43
        env = {"TIERLOG_DATABASE_URL": fresh_db, "BOOT": key}
        for _ in range(2):
            done = tierlog("users", "create", "admin", "--key-from-env", "BOOT", **env)
            assert done.returncode == 0, done.stderr
        keys = sec.repo.list_keys()
        assert [(k.key_id, k.principal) for k in keys] == [("00112233aabb", "User:admin")]
        bad = tierlog("users", "create", "x", "--key-from-env", "NOPE", **env)
        assert bad.returncode == 1 and "NOPE" in bad.stderr
    finally:
        sec.close()


def test_a_tls_cluster_with_a_private_ca_replicates_and_forwards(
    fresh_db: str, tmp_path: Path
) -> None:
    """Brokers reach each other over HTTPS (replica fetches, forwarded produce) trusting the
    cluster's CA through --tls-ca, not a public bundle."""
    cert, key = self_signed(tmp_path)
    ca = ssl.create_default_context(cafile=str(cert))
    tls = ["--tls-cert", str(cert), "--tls-key", str(key), "--tls-ca", str(cert)]
    brokers = [BrokerProcess(fresh_db, tmp_path / f"data-{i}", i, [*FAST, *tls]) for i in (1, 2)]
    clients: list[httpx.Client] = []
    try:
        for b in brokers:
            b.url = f"https://127.0.0.1:{b.port}"
            b.start(wait=False)
            clients.append(httpx.Client(base_url=b.url, verify=ca, timeout=30))
        for b, c in zip(brokers, clients, strict=True):
            wait_for(
                f"broker {b.broker_id} ready over TLS",
                lambda c=c: c.get("/readyz").status_code == 200,  # type: ignore[misc]
                timeout=60,
            )
        body = {
            "name": "secret",
            "partitions": 1,
            "replication_factor": 2,
            "configs": {"min.insync.replicas": 2},
        }
        assert clients[0].post("/topics", json=body).status_code == 201
        wait_for("both in sync", lambda: len(_partition(clients[0])["isr"]) == 2)
        leader = _partition(clients[0])["leader"]
        other = clients[2 - leader]  # the broker that does not lead: it forwards over TLS
        records = {"records": [{"value": f"v{i}"} for i in range(5)]}
        r = other.post("/topics/secret/records", params={"acks": "all"}, json=records)
        assert r.status_code == 200, r.text  # acks=all: the follower fetched over HTTPS
        assert r.headers["x-tierlog-leader"].startswith("https://")
        for c in clients:  # and either node answers reads with them
            wait_for(
                "replicated",
                lambda c=c: (
                    len(  # type: ignore[misc]
                        c.get("/topics/secret/partitions/0/records").json()["records"]
                    )
                    == 5
                ),
            )
    finally:
        for c in clients:
            c.close()
        for b in brokers:
            b.stop()


def _partition(c: httpx.Client) -> dict[str, object]:
    return dict(c.get("/topics/secret").json()["partitions"][0])
