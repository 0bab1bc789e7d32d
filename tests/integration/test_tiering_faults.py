"""Tiering through a faulty S3: 500/503 answers, stalled requests, responses lost after the fact.

Two workers tier segments of several partitions through FaultyS3Proxy (in front of moto's
server); boto3 (the data files) and deltalake (the Delta log) both talk to S3 through it.
Retries happen at two levels: the S3 clients' own (boto3's standard mode with backoff; the
object_store crate's under deltalake), and the worker's: a step that still fails releases
the claim, and the registry backs the segment off before another attempt. Whatever failed
on the way, everything must end up tiered once, with the table, the manifest and the bucket
in agreement.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy.engine import Engine

from coldstore.delta_table import DeltaTopicTable
from coldstore.layout import table_uri
from coldstore.object_store import MiB, ObjectStoreConfig
from metadata.segment_registry import SegmentRegistry
from metadata.types import TopicIdPartition
from tests.integration.s3 import MotoServer, moto_s3_fixture, s3_bucket_fixture  # noqa: F401
from tests.integration.s3_faults import FaultyS3Proxy
from tests.integration.tiering_consistency import assert_consistent, files_per_commit
from tests.integration.tiering_env import Env, rec
from tiering.worker import TieringWorker

PARTITIONS = 4
SEGMENTS = 4  # per partition
READ_TIMEOUT_S = 1.0  # both S3 clients' request timeout; stalls last longer
DEADLINE_S = 180  # a bound for a hang (a batch that fails retries all its segments; 77 s seen
# with three test workers on two cores)


@pytest.fixture
def env(db_engine: Engine, s3_bucket: ObjectStoreConfig) -> Iterator[Env]:
    e = Env(db_engine, s3_bucket)  # checks go to moto directly, never through the faults
    yield e
    for r in e.replicas.values():
        r.server.shutdown()


@pytest.fixture
def proxy(moto_s3: MotoServer, request: pytest.FixtureRequest) -> Iterator[FaultyS3Proxy]:
    # Batched commits make few requests: a test that needs some step to fail outright (both
    # of its attempts) asks for a higher error rate.
    with FaultyS3Proxy(
        moto_s3.endpoint,
        error_rate=getattr(request, "param", 0.12),
        stall_rate=0.02,
        stall_s=3 * READ_TIMEOUT_S,
        lost_rate=0.02,
        seed=4,
    ) as p:
        yield p


def _value(i: int) -> bytes:
    return (f'{{"order": {i}, "item": "sku-{i % 97:03d}", "note": "' + "x" * 900 + '"}').encode()


class _Shortened(ObjectStoreConfig):
    """deltalake's S3 client (object_store) times a request out as boto3 does here: with its
    default (30 s) a stall lasted stall_s, the proxy closing the connection."""

    def storage_options(self) -> dict[str, str]:
        return {**super().storage_options(), "timeout": f"{READ_TIMEOUT_S:g}s"}


class _FewRetries(_Shortened):
    """deltalake's S3 client (object_store) gives up after one retry, as boto3 does here."""

    def storage_options(self) -> dict[str, str]:
        return {**super().storage_options(), "max_retries": "1"}


def _segments(env: Env) -> str:
    """Sealed segments of a topic "orders": returns its id."""
    tid = env.topic("orders", PARTITIONS)
    # One big segment, so a multipart upload (two 5 MiB parts) goes through the faults too.
    end = env.add_segment(
        "orders", 0, 0, [rec(i, value=os.urandom(MiB)) for i in range(6)], per_frame=1
    )
    bases = {0: end} | {p: 0 for p in range(1, PARTITIONS)}
    for s in range(SEGMENTS):
        for p in range(PARTITIONS):
            if p == 0 and s == 0:
                continue
            b = bases[p]
            bases[p] = env.add_segment(
                "orders", p, b, [rec(i, value=_value(i)) for i in range(b, b + 20 + s)], 5
            )
    return tid


def _tier_all(env: Env, tid: str, config: ObjectStoreConfig, proxy: FaultyS3Proxy) -> int:
    """Two workers (threads) tier everything through the proxy; returns the claims made."""
    stop = threading.Event()
    workers = []
    for name in ("w1", "w2"):
        w = TieringWorker(env.engine, config, name, lease_ms=30_000)
        # Worker-level retries paced for a test (production backs off up to a minute): a
        # segment's retry waits 50, 100, 200, then 400 ms, so a partition whose segment failed
        # several times does not hold its later segments back for seconds.
        w.registry = SegmentRegistry(env.engine, backoff_ms=50, max_backoff_ms=400)
        workers.append(w)
    threads = [threading.Thread(target=w.run_forever, args=(100, stop)) for w in workers]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            segs = [
                s
                for p in range(PARTITIONS)
                for s in env.registry.segments(TopicIdPartition(tid, p))
            ]
            if all(s.state == "tiered" for s in segs):
                break
            assert time.monotonic() < deadline, (
                f"not tiered in {DEADLINE_S}s: {[s for s in segs if s.state != 'tiered']}, "
                f"faults {proxy.counts()}"
            )
            time.sleep(0.2)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
        for w in workers:
            w.close()
    proxy.set_enabled(False)  # the checks below read S3 directly; the proxy just counts
    # The workers committed batches: some commit carried several partitions' segments.
    assert max(files_per_commit(env.config, "orders")) > 1
    counts = proxy.counts()
    claims = sum(
        s.attempts
        for p in range(PARTITIONS)
        for s in env.registry.segments(TopicIdPartition(tid, p))
    )
    print(f"faults injected: {counts}; claims: {claims} for {len(segs)} segments")
    assert counts.get("error_500", 0) + counts.get("error_503", 0) > 0, counts
    assert counts.get("stall", 0) + counts.get("lost_response", 0) > 0, counts
    return claims


def _faulty(config: ObjectStoreConfig, proxy: FaultyS3Proxy) -> ObjectStoreConfig:
    return _Shortened(*config)._replace(
        endpoint_url=proxy.endpoint,
        read_timeout_s=READ_TIMEOUT_S,
        connect_timeout_s=READ_TIMEOUT_S,
        multipart_threshold=5 * MiB,
        multipart_chunksize=5 * MiB,
    )


def test_tiering_converges_through_s3_errors_and_stalls(
    env: Env, proxy: FaultyS3Proxy, s3_bucket: ObjectStoreConfig
) -> None:
    """The production retry settings (only the timeout shortened): the S3 clients' own
    retries with backoff absorb the faults."""
    tid = _segments(env)
    _tier_all(env, tid, _faulty(s3_bucket, proxy), proxy)
    # Every segment tiered exactly once; table, manifest and bucket agree; byte-exact rows.
    assert_consistent(env.engine, env.config, "orders", tid, PARTITIONS)
    env.assert_exact("orders")


@pytest.mark.parametrize("proxy", [0.18], indirect=True, ids=["errors-18pct"])
def test_when_s3_client_retries_run_out_the_worker_retries_the_segment(
    env: Env, proxy: FaultyS3Proxy, s3_bucket: ObjectStoreConfig
) -> None:
    """Two attempts per S3 request: some steps fail outright (upload, Delta commit, reads of
    the table, clean-up); the worker releases the claim and the segment is tiered later."""
    tid = _segments(env)
    config = _FewRetries(*_faulty(s3_bucket, proxy)._replace(max_attempts=2))
    claims = _tier_all(env, tid, config, proxy)
    assert claims > PARTITIONS * SEGMENTS  # some segments needed another claim
    # A failed clean-up leaves a superseded object for retention's sweep, recorded as such.
    assert_consistent(env.engine, env.config, "orders", tid, PARTITIONS, deletes_may_fail=True)
    env.assert_exact("orders")


def test_a_stalled_s3_does_not_freeze_the_workers_other_threads(
    moto_s3: MotoServer, s3_bucket: ObjectStoreConfig
) -> None:
    """Checking for the Delta table while S3 does not answer must leave the GIL to the
    process's other threads (/healthz, /metrics, other workers): deltalake's is_deltatable
    held it through all its requests and retries."""
    with FaultyS3Proxy(moto_s3.endpoint, error_rate=0, stall_rate=1, stall_s=30) as proxy:
        opts = {
            **s3_bucket._replace(endpoint_url=proxy.endpoint).storage_options(),
            "timeout": "2s",
            "max_retries": "0",
        }
        table = DeltaTopicTable(table_uri(s3_bucket, "t"), opts, topic="t")
        ticks: list[float] = []
        done = threading.Event()

        def tick() -> None:
            while not done.is_set():
                ticks.append(time.monotonic())
                time.sleep(0.05)

        ticker = threading.Thread(target=tick)
        ticker.start()
        try:
            with pytest.raises(OSError):
                table.exists()  # times out: S3 never answers
        finally:
            done.set()
            ticker.join()
        assert proxy.counts().get("stall", 0) >= 1
    # ~40 ticks in the 2 s the request took; a held GIL allows one or two
    assert len(ticks) >= 10, len(ticks)
