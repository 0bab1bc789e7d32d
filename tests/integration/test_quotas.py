"""Byte-rate quotas on a real broker (issue 8 item 4): the `<default>` entity applies to the
anonymous principal of an --insecure broker, so these tests need no API keys."""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from logformat.errors import TierlogError
from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import wait_for
from tests.integration.secured import Secured, secure_broker
from tierlog.cli.quotas_cmd import add_quotas
from tierlog.client import Producer
from tierlog.client.errors import retry_after_s

Factory = Callable[..., BrokerProcess]


def _quotas(db: str, *args: str, expect: int = 0) -> str:
    """`tierlog quotas …` as a user runs it (in-process: the same parser, less startup)."""
    parser = argparse.ArgumentParser(prog="tierlog")
    add_quotas(parser.add_subparsers(dest="command", required=True))
    parsed = parser.parse_args(["quotas", *args, "--database-url", db])
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            code = parsed.func(parsed)
        except TierlogError:
            code = 1  # what `tierlog` exits with
    assert code == expect
    return out.getvalue()


def _quotas_loaded(http: httpx.Client) -> bool:
    """The broker's cached quota table holds an entity (its load landed): /metrics says."""
    for line in http.get("/metrics").text.splitlines():
        if line.startswith("tierlog_quota_entities "):
            return float(line.split()[1]) > 0
    return False


def _warm(http: httpx.Client, topic: str) -> None:
    """A first quota-checked request starts the broker's quota load; wait until it landed
    (until then every principal is unlimited)."""
    http.get(f"/topics/{topic}/partitions/0/records", params={"offset": 0})
    wait_for("the quota table loaded", lambda: _quotas_loaded(http), timeout=30)


def _value(size: int, i: int) -> str:
    return f"{i:08d}" + "v" * (size - 8)


def test_producer_over_its_byte_rate_is_throttled_to_the_quota(
    fresh_db: str, broker_factory: Factory
) -> None:
    quota = 200_000  # bytes/s
    _quotas(fresh_db, "set", "--default", "--producer-byte-rate", str(quota))
    broker = broker_factory()
    broker.create_topic("rated")
    _warm(broker.http, "rated")
    accepted = throttled = 0
    with httpx.Client(base_url=broker.url, timeout=30) as http:
        start = time.monotonic()
        i = 0
        while time.monotonic() - start < 10.0:
            body = httpx.Request("POST", "/", json={"records": [{"value": _value(8000, i)}]})
            content = body.read()
            r = http.post(
                "/topics/rated/records",
                content=content,
                headers={"content-type": "application/json"},
            )
            if r.status_code == 429:
                throttled += 1
                time.sleep(retry_after_s(r.headers))  # the client that respects Retry-After
                continue
            assert r.status_code == 200, r.text
            accepted += len(content)
            i += 1
    assert throttled > 0
    expected = quota * 10
    assert abs(accepted - expected) <= 0.2 * expected, (accepted, expected)
    # Everything accepted is there, in order, once.
    values = [rec["value"] for rec in broker.fetch_all("rated")]
    assert values == [_value(8000, n) for n in range(i)]


def test_python_client_honours_429_without_duplicates(
    fresh_db: str, broker_factory: Factory
) -> None:
    _quotas(fresh_db, "set", "--default", "--producer-byte-rate", "100000")
    broker = broker_factory()
    broker.create_topic("client-rated")
    _warm(broker.http, "client-rated")
    # Three seconds' worth of the quota in ~5 requests of 64 KiB: over it however slowly the
    # machine sends (in 2.5 KB requests a slow machine's client once stayed under it).
    n, size = 60, 5000
    with Producer(broker.url, linger_ms=20, batch_size=65536) as producer:
        futures = [
            producer.send("client-rated", value=_value(size, i).encode(), partition=0)
            for i in range(n)
        ]
        producer.flush(60)
        offsets = [f.result(30).offset for f in futures]
    assert sorted(offsets) == list(range(n))
    values = [rec["value"] for rec in broker.fetch_all("client-rated")]
    assert sorted(values) == [_value(size, i) for i in range(n)]  # each once
    metrics = broker.http.get("/metrics").text
    assert 'tierlog_quota_throttled_requests_total{kind="produce"' in metrics


def _throttled_doc(r: httpx.Response) -> dict[str, object]:
    assert r.status_code == 429, r.text
    retry_after = r.headers["retry-after"]
    throttle_ms = int(r.headers["x-tierlog-throttle-ms"])
    assert retry_after.isdigit() and int(retry_after) == max(1, math.ceil(throttle_ms / 1000))
    doc = r.json()
    assert doc["error_code"] == "THROTTLING_QUOTA_EXCEEDED"
    assert isinstance(doc["message"], str) and doc["message"]
    assert doc["throttle_time_ms"] == throttle_ms > 0
    return dict(doc)


def test_429_follows_the_principal_with_retry_after_and_a_kafka_error(
    fresh_db: str, tmp_path: Path
) -> None:
    """Auth on: alice's own rates apply to her key only; bob falls back to <default> (unset:
    unlimited); the cluster credential is never throttled."""
    _quotas(
        fresh_db,
        "set",
        *("--principal", "User:alice", "--producer-byte-rate", "2000"),
        *("--consumer-byte-rate", "2000"),
    )
    listed = _quotas(fresh_db, "list")
    assert listed == "User:alice\tproducer_byte_rate=2000\tconsumer_byte_rate=2000\n"
    sec = Secured(fresh_db)
    broker = secure_broker(fresh_db, tmp_path / "data-1")
    try:
        broker.start()
        admin = sec.client(broker.url, "admin")
        assert admin.post("/topics", json={"name": "q"}).status_code == 201
        for user in ("alice", "bob"):
            sec.allow(user, "topic", "q", "write", "read")
        alice, bob = sec.client(broker.url, "alice"), sec.client(broker.url, "bob")
        cluster = sec.client(broker.url, None, {"x-tierlog-cluster-token": sec.cluster_secret()})
        alice.get("/topics/q/partitions/0/records", params={"offset": 0})  # starts the load
        wait_for("the quota table loaded", lambda: _quotas_loaded(admin), timeout=30)
        big = {"records": [{"value": "x" * 10_000}]}
        assert alice.post("/topics/q/records", json=big).status_code == 200
        _throttled_doc(alice.post("/topics/q/records", json=big))
        latest = admin.get("/topics/q/partitions/0/offsets", params={"at": "latest"})
        assert latest.json()["offset"] == 1  # the refused request wrote nothing
        for client in (bob, bob, cluster, cluster):
            assert client.post("/topics/q/records", json=big).status_code == 200
        # Fetch counts response bytes: a 10 KB answer puts alice's next fetch over 2 KB/s.
        params = {"offset": 0, "max_records": 1}
        assert alice.get("/topics/q/partitions/0/records", params=params).is_success
        _throttled_doc(alice.get("/topics/q/partitions/0/records", params=params))
        # A search's hits are reads too: the same quota, refused before it scans.
        _throttled_doc(alice.get("/topics/q/search", params={"value": "x"}))
        metrics = admin.get("/metrics").text
        assert 'kind="produce",principal="User:alice"' in metrics
        # Removing the quota lifts it within the broker's refresh interval.
        _quotas(fresh_db, "remove", "--principal", "User:alice")
        deadline = time.monotonic() + 10
        while alice.post("/topics/q/records", json=big).status_code == 429:
            assert time.monotonic() < deadline, "quota removal never reached the broker"
            time.sleep(0.3)
    finally:
        broker.stop()
        sec.close()


def test_quota_command_rejects_bad_input(fresh_db: str) -> None:
    _quotas(fresh_db, "set", "--principal", "alice", "--producer-byte-rate", "10", expect=1)
    _quotas(fresh_db, "set", "--principal", "User:alice", "--producer-byte-rate", "0", expect=1)
    _quotas(fresh_db, "remove", "--principal", "User:bob", expect=1)  # nothing to remove
    _quotas(
        fresh_db,
        "set",
        *("--principal", "User:alice", "--producer-byte-rate", "10", "--consumer-byte-rate", "20"),
    )
    _quotas(fresh_db, "remove", "--principal", "User:alice", "--producer-byte-rate")
    listed = _quotas(fresh_db, "list")
    assert listed == "User:alice\tconsumer_byte_rate=20\n"  # the producer rate unset
