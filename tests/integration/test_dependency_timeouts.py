"""A frozen dependency never hangs a read (issue 13 item 4), on real broker processes.

- Postgres frozen (SIGSTOP of a private server's postmaster and backends: never the shared
  test server): hot fetches keep answering from the broker's log, because they no longer
  consult the cold manifest on their path (its boundary is cached and refreshed aside).
- S3 frozen (every request to the fault proxy stalls): a cold replay from offset 0 gets a
  prompt 503 REQUEST_TIMED_OUT naming S3, from a broker and from the fetch node, instead of
  waiting for minutes of socket timeouts and retries.
- Postgres frozen before the first cold read (issue 26): the broker (HTTP and Kafka Fetch)
  and the fetch node answer REQUEST_TIMED_OUT naming Postgres within the manifest deadline,
  hot reads go on, and cold reads work again once it thaws.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kio.schema.errors import ErrorCode as KafkaError
from sqlalchemy import text
from sqlalchemy.engine import Engine, make_url

from coldstore.object_store import ObjectStoreConfig
from metadata.cold_manifest import ColdManifest
from metadata.db import make_engine, migrate
from metadata.types import TopicIdPartition
from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import FAST, wait_for
from tests.integration.fetch_nodes import FetchNodeProcess, s3_env
from tests.integration.kafka_wire import call, fetch_request, fetch_response
from tests.integration.ports import free_port
from tests.integration.s3 import moto_s3_fixture, s3_bucket_fixture  # noqa: F401
from tests.integration.s3_faults import FaultyS3Proxy
from tiering.worker import TieringWorker
from tierlog.devstack.localpg import LocalPostgres

# A broker fences itself once its lease lapses (no reads, no writes: docs/operations.md), and
# a frozen Postgres lets the lease lapse. These tests hold Postgres frozen for several
# deadlines in a row, so their brokers get a lease far longer than the freeze: what they
# prove is the answer while the broker still leads, not what fencing does after.
LONG_LEASE = [*FAST, "--lease-ms", "60000"]
N = 60


def _postgres_pids(pgdata: Path) -> list[int]:
    postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])
    children = Path(f"/proc/{postmaster}/task/{postmaster}/children").read_text().split()
    return [postmaster, *map(int, children)]


@pytest.fixture(scope="module")
def _private_server() -> Iterator[tuple[str, Path]]:
    """A Postgres of this module's own (its migrated database's URL, pgdata): the shared one
    is never frozen. A test freezes it whole, and thaws it before it ends."""
    # Not tmp_path: as root, the postgres user cannot traverse /tmp/pytest-of-root (mode 700).
    base = Path(tempfile.mkdtemp(prefix="tierlog-frozen-pg-"))
    base.chmod(0o755)
    try:
        with LocalPostgres(base / "pg", fast=True) as pg:
            engine = make_engine(pg.url)
            try:
                migrate(engine)
            finally:
                engine.dispose()  # a template has no connections while it is copied
            yield pg.url, pg.pgdata
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def private_pg(_private_server: tuple[str, Path]) -> Iterator[tuple[str, Path]]:
    """A database of this test's own (a copy of the migrated one) on the module's private
    Postgres, and that server's pgdata: (URL, pgdata). One server start for the module."""
    url, pgdata = _private_server
    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = make_engine(
        make_url(url).set(database="postgres").render_as_string(hide_password=False),
        isolation_level="AUTOCOMMIT",
    )
    try:
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}" TEMPLATE "{make_url(url).database}"'))
        yield make_url(url).set(database=name).render_as_string(hide_password=False), pgdata
        with admin.connect() as conn:  # FORCE: a broker killed by a failure may hold some
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


def test_hot_reads_do_not_wait_on_a_frozen_postgres(
    private_pg: tuple[str, Path],
    tmp_path: Path,
    s3_bucket: ObjectStoreConfig,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for k, v in s3_env(s3_bucket).items():  # S3 configured: the broker has a cold reader
        monkeypatch.setenv(k, v)
    url, pgdata = private_pg
    broker = BrokerProcess(url, tmp_path / "data-1", 1, LONG_LEASE).start()
    try:
        broker.create_topic("hot")
        offsets = broker.produce("hot", [{"value": f"v{i}"} for i in range(5)])
        assert broker.fetch("hot", 0, 0)["records"]
        pids = _postgres_pids(pgdata)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            with httpx.Client(base_url=broker.url, timeout=3) as http:
                for round_ in range(5):  # the last ones past the boundary's 1 s freshness
                    if round_:
                        time.sleep(0.3)
                    r = http.get(
                        "/topics/hot/partitions/0/records",
                        params={"offset": round_, "max_records": 1},
                    )
                    assert r.status_code == 200, r.text
                    doc = r.json()
                    assert doc["records"][0]["value"] == f"v{round_}"
                    assert doc["log_start_offset"] == 0
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
        assert offsets[0]["offset"] == 0
    finally:
        broker.stop()


@pytest.fixture
def frozen_s3_setup(
    fresh_db: str,
    tmp_path: Path,
    s3_bucket: ObjectStoreConfig,
    engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[BrokerProcess, FetchNodeProcess, FaultyS3Proxy]]:
    """One broker and a fetch node reading S3 through the fault proxy; the first half of a
    topic tiered (straight to moto) and deleted from the broker's disk."""
    assert s3_bucket.endpoint_url is not None
    proxy = FaultyS3Proxy(s3_bucket.endpoint_url, error_rate=0, stall_rate=1.0, stall_s=30)
    proxy.start()
    proxy.set_enabled(False)
    env = {
        **s3_env(s3_bucket._replace(endpoint_url=proxy.endpoint)),
        "TIERLOG_COLD_S3_TIMEOUT_MS": "2000",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    broker = BrokerProcess(fresh_db, tmp_path / "data-1", 1, FAST)
    node = FetchNodeProcess(fresh_db, tmp_path / "fetch.log", env)
    try:
        # Both start at once (each takes seconds); the node is needed only at the end.
        broker.start(wait=False)
        node.launch()
        broker.wait_ready()
        r = broker.http.post(
            "/topics",
            json={
                "name": "cold",
                "partitions": 1,
                "configs": {"segment.bytes": 2048, "local.retention.ms": 1000},
            },
        )
        assert r.status_code == 201, r.text
        tid = str(r.json()["id"])
        for i in range(0, N, 3):
            broker.produce("cold", [{"value": f"value-{j:04d}" * 10} for j in range(i, i + 3)])
        manifest = ColdManifest(engine)
        worker = TieringWorker(engine, s3_bucket, "cold-worker")
        try:

            def tiered_far() -> bool:
                worker.run_once()
                return (manifest.tiered_end_offset(TopicIdPartition(tid, 0)) or 0) >= N // 2

            wait_for("half the topic tiered", tiered_far, timeout=90, every=0.3)
        finally:
            worker.close()
        wait_for(
            "tiered segments deleted locally",
            lambda: int(broker.http.get("/topics/cold").json()["partitions"][0]["hot"]["start"]),
        )
        yield broker, node.wait_ready(), proxy
    finally:
        node.stop()
        broker.stop()
        proxy.stop()


def test_cold_reads_fail_fast_naming_s3_when_s3_is_frozen(
    frozen_s3_setup: tuple[BrokerProcess, FetchNodeProcess, FaultyS3Proxy],
) -> None:
    broker, node, proxy = frozen_s3_setup
    proxy.set_enabled(True)  # every S3 request now stalls for 30 s, then is dropped
    for http in (broker.http, node.http):
        r = http.get("/topics/cold/partitions/0/records", params={"offset": 0}, timeout=15)
        assert r.status_code == 503, r.text
        doc = r.json()
        assert doc["error_code"] == "REQUEST_TIMED_OUT", doc
        assert doc["dependency"] == "s3", doc
        assert "S3" in doc["message"], doc
        # Hot reads are not affected.
        hot = http.get("/topics/cold/partitions/0/records", params={"offset": N - 1})
        assert hot.status_code == 200, hot.text
    assert proxy.counts().get("stall", 0) > 0, proxy.counts()
    proxy.set_enabled(False)
    for http in (broker.http, node.http):  # and when S3 is back, the replay works
        r = http.get("/topics/cold/partitions/0/records", params={"offset": 0})
        assert r.status_code == 200, r.text
        assert r.json()["records"][0]["offset"] == 0


# The documented 5 s default, shortened: the test waits out one deadline per cold read and
# per hot read made before the partition's cold range was ever read (seven in all).
MANIFEST_TIMEOUT_MS = 1000
COLD_ENV = {"TIERLOG_COLD_MANIFEST_TIMEOUT_MS": str(MANIFEST_TIMEOUT_MS)}


@pytest.fixture
def cold_on_private_pg(
    private_pg: tuple[str, Path],
    tmp_path: Path,
    s3_bucket: ObjectStoreConfig,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[BrokerProcess, FetchNodeProcess, str, Path]]:
    """A broker (HTTP and Kafka) and a fetch node on a Postgres of the test's own, the first
    half of a topic tiered and gone from the broker's disk, and no cold read made yet: the
    first cold read has to ask the manifest (nothing of it is cached)."""
    url, pgdata = private_pg
    env = {**s3_env(s3_bucket), **COLD_ENV}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    kafka = f"127.0.0.1:{free_port()}"
    broker = BrokerProcess(url, tmp_path / "data-1", 1, [*LONG_LEASE, "--kafka-listen", kafka])
    node = FetchNodeProcess(url, tmp_path / "fetch.log", env)
    engine = make_engine(url)
    try:
        broker.start(wait=False)
        node.launch()
        broker.wait_ready()
        r = broker.http.post(
            "/topics",
            json={
                "name": "cold",
                "partitions": 1,
                "configs": {"segment.bytes": 2048, "local.retention.ms": 1000},
            },
        )
        assert r.status_code == 201, r.text
        tid = str(r.json()["id"])
        for i in range(0, N, 3):
            broker.produce("cold", [{"value": f"value-{j:04d}" * 10} for j in range(i, i + 3)])
        _tier_half(engine, s3_bucket, tid)
        wait_for(
            "tiered segments deleted locally",
            lambda: int(broker.http.get("/topics/cold").json()["partitions"][0]["hot"]["start"]),
        )
        yield broker, node.wait_ready(), kafka, pgdata
    finally:
        engine.dispose()
        node.stop()
        broker.stop()


def _tier_half(engine: Engine, bucket: ObjectStoreConfig, tid: str) -> None:
    manifest = ColdManifest(engine)
    worker = TieringWorker(engine, bucket, "cold-worker")
    try:

        def tiered_far() -> bool:
            worker.run_once()
            return (manifest.tiered_end_offset(TopicIdPartition(tid, 0)) or 0) >= N // 2

        wait_for("half the topic tiered", tiered_far, timeout=90, every=0.3)
    finally:
        worker.close()


def _timed_out_on_postgres(r: httpx.Response) -> None:
    assert r.status_code == 503, r.text
    doc = r.json()
    assert doc["error_code"] == "REQUEST_TIMED_OUT", doc
    assert doc["dependency"] == "postgres", doc
    assert f"within {MANIFEST_TIMEOUT_MS // 1000} s" in doc["message"], doc


def _kafka_fetch_error(bootstrap: str, offset: int) -> int:
    resp = fetch_response(call(bootstrap, fetch_request("cold", offset, 0)))
    return int(resp.responses[0].partitions[0].error_code)


def test_cold_reads_answer_in_time_naming_postgres_when_it_freezes_mid_read(
    cold_on_private_pg: tuple[BrokerProcess, FetchNodeProcess, str, Path],
) -> None:
    broker, node, kafka, pgdata = cold_on_private_pg
    pids = _postgres_pids(pgdata)
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        # The client waits far longer than the deadline: the answer is the server's, and a
        # read that hangs fails here as httpx.ReadTimeout, never as a pass.
        for http in (broker.http, node.http):
            r = http.get("/topics/cold/partitions/0/records", params={"offset": 0}, timeout=60)
            _timed_out_on_postgres(r)
            hot = http.get(
                "/topics/cold/partitions/0/records", params={"offset": N - 1}, timeout=60
            )
            assert hot.status_code == 200, hot.text  # hot reads do not wait on the manifest
            assert hot.json()["records"][0]["offset"] == N - 1
        # Kafka's Fetch: the same error, by its Kafka code (7), for the partition.
        assert _kafka_fetch_error(kafka, 0) == KafkaError.request_timed_out.value
        assert _kafka_fetch_error(kafka, N - 1) == KafkaError.none.value
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)

    def replayed(http: httpx.Client) -> bool:  # thawed: the stuck queries free themselves
        r = http.get("/topics/cold/partitions/0/records", params={"offset": 0}, timeout=60)
        return r.status_code == 200 and r.json()["records"][0]["offset"] == 0

    for http in (broker.http, node.http):
        wait_for("cold reads back after the thaw", lambda http=http: replayed(http))
    wait_for("Kafka cold reads back", lambda: _kafka_fetch_error(kafka, 0) == 0)
