"""Bytes flipped inside a sealed segment file of a real broker process: no corrupted value is
ever served (JSON or Arrow, broker or fetch node), the error is a 503 with a Kafka error name,
a replica puts its bad frame back from a peer's whole copy, and tiering takes another
replica's copy."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pyarrow as pa
import pytest
from sqlalchemy.engine import Engine

from cluster.http.fetch_response import FRAMES_METADATA_KEY, REPLICA_READ_HEADER
from cluster.internal_http import CLUSTER_TOKEN_HEADER
from coldstore.object_store import ObjectStoreConfig
from logformat.frame import HEADER_SIZE, decode_header
from metadata.db import make_engine
from metadata.partition_state import PartitionStateRepo
from metadata.segment_registry import SegmentRegistry
from metadata.topics import TopicRepo
from metadata.types import TopicIdPartition
from tests.integration.brokers import BrokerProcess
from tests.integration.cluster import Cluster, wait_for
from tests.integration.fetch_nodes import FetchNodeProcess, s3_env
from tests.integration.s3 import MotoServer, moto_s3_fixture, new_bucket  # noqa: F401
from tiering.worker import TieringWorker

ARROW = "application/vnd.apache.arrow.stream"
FRAMES = 24  # of 3 records each; segment.bytes=4096 seals a segment every few frames
N = FRAMES * 3


def _value(i: int) -> str:
    return f"value-{i:05d}-" + "x" * 100


# One cluster, fetch node, database and bucket for the file (each test has a topic of its
# own): three brokers and a fetch node per test cost more than the checks.
@pytest.fixture(scope="module")
def corrupt_db(db_factory: Callable[..., str]) -> str:
    return db_factory()


@pytest.fixture(scope="module")
def engine(corrupt_db: str) -> Iterator[Engine]:
    e = make_engine(corrupt_db)
    yield e
    e.dispose()


@pytest.fixture(scope="module")
def s3_bucket(moto_s3: MotoServer) -> ObjectStoreConfig:
    return new_bucket(moto_s3)


@pytest.fixture(scope="module")
def cluster(corrupt_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(corrupt_db, tmp_path_factory.mktemp("corruption"), 3).start()
    yield c
    c.stop()


@pytest.fixture(scope="module")
def fetch_node(
    cluster: Cluster,
    corrupt_db: str,
    tmp_path_factory: pytest.TempPathFactory,
    s3_bucket: ObjectStoreConfig,
) -> Iterator[FetchNodeProcess]:
    log = tmp_path_factory.mktemp("corruption-fetch") / "fetch.log"
    node = FetchNodeProcess(corrupt_db, log, s3_env(s3_bucket)).start()
    yield node
    node.stop()


def _topic(c: Cluster, name: str) -> str:
    created = c.create_topic(name, segment_bytes=4096, min_insync_replicas=2)
    for f in range(FRAMES):
        c.produce(name, [{"key": f"k{i}", "value": _value(i)} for i in range(f * 3, f * 3 + 3)])
    # Every replica has every record and knows it is committed.
    wait_for(
        "replicas identical",
        lambda: len({c.segment_bytes(b, name) for b in c.brokers.values()}) == 1,
    )
    return str(created["id"])


def _flip(b: BrokerProcess, topic: str, frame_index: int = 1) -> int:
    """Flip one payload byte of a frame in the broker's first (sealed) segment; its offset."""
    path = b.data_dir / f"{topic}-0" / f"{0:020d}.log"
    data = bytearray(path.read_bytes())
    pos = 0
    for _ in range(frame_index):
        pos += decode_header(data, pos).size
    header = decode_header(data, pos)
    data[pos + HEADER_SIZE + header.payload_length // 2] ^= 0x5A
    with open(path, "r+b") as f:  # in place: the broker's descriptor sees it
        f.seek(pos)
        f.write(data[pos : pos + header.size])
    return header.base_offset


def _read_json(http: httpx.Client, topic: str, **headers: str) -> list[str] | httpx.Response:
    """Every value from offset 0 (JSON), or the first answer that is not a 200."""
    values: list[str] = []
    offset, deadline = 0, time.monotonic() + 30
    while offset < N:
        assert time.monotonic() < deadline, f"stuck at offset {offset}"
        r = http.get(
            f"/topics/{topic}/partitions/0/records", params={"offset": offset}, headers=headers
        )
        if r.status_code != 200:
            return r
        doc = r.json()
        if not doc["records"]:  # an in-sync follower not yet told the newest watermark
            time.sleep(0.1)
            continue
        values += [rec["value"] for rec in doc["records"]]
        frames = doc["frames"]  # hot reads name their frames and CRCs
        assert frames and frames[0]["base_offset"] <= offset and "crc32c" in frames[0]
        offset = doc["next_offset"]
    return values


def _read_arrow(http: httpx.Client, topic: str, hot: bool = True) -> list[str] | httpx.Response:
    values: list[str] = []
    offset, deadline = 0, time.monotonic() + 30
    while offset < N:
        assert time.monotonic() < deadline, f"stuck at offset {offset}"
        r = http.get(
            f"/topics/{topic}/partitions/0/records",
            params={"offset": offset},
            headers={"accept": ARROW},
        )
        if r.status_code != 200:
            return r
        table = pa.ipc.open_stream(r.content).read_all()
        if not table.num_rows:
            time.sleep(0.1)
            continue
        if hot:  # hot reads name their frames and CRCs (cold ones, from Parquet, cannot)
            assert table.schema.metadata and FRAMES_METADATA_KEY in table.schema.metadata
        values += [v.decode() for v in table.column("value").to_pylist()]
        offset = int(r.headers["x-tierlog-next-offset"])
    return values


def _storage_error(r: Any) -> None:
    assert isinstance(r, httpx.Response), "a corrupt frame was served"
    assert r.status_code == 503, r.text
    body = r.json()
    assert body["error_code"] == "KAFKA_STORAGE_ERROR" and "corrupt" in body["message"], body


def _token(engine: Engine) -> str:
    return PartitionStateRepo(engine).cluster_secret()


def _follower_read(b: BrokerProcess, topic: str, token: str, offset: int) -> httpx.Response:
    """What a fetch node asks an in-sync follower (KIP-392 follower fetching)."""
    return b.http.get(
        f"/topics/{topic}/partitions/0/records",
        params={"offset": offset, "max_records": N},
        headers={CLUSTER_TOKEN_HEADER: token, REPLICA_READ_HEADER: "1"},
    )


def _follower_tail(b: BrokerProcess, topic: str, token: str, offset: int) -> httpx.Response:
    """A follower read from `offset`, again while its answer stops short of the last record:
    an in-sync follower serves up to the watermark it was last told, and its next fetch of
    the leader (a long poll of up to 500 ms) brings the newest. The last answer, as it is."""
    deadline = time.monotonic() + 10
    while True:
        r = _follower_read(b, topic, token, offset)
        if r.status_code != 200 or r.json()["next_offset"] >= N or time.monotonic() > deadline:
            return r
        time.sleep(0.1)


def _isr(engine: Engine, topic: str) -> list[int]:
    """The ISR as the tiering worker reads it (from Postgres) when it picks a replica."""
    return TopicRepo(engine).partitions(topic)[0].isr


def _repaired(c: Cluster, b: BrokerProcess, topic: str) -> bool:
    return c.segment_bytes(b, topic) == c.segment_bytes(c.leader(topic), topic)


def test_corrupt_follower_copies_are_never_served_and_are_repaired(
    cluster: Cluster, fetch_node: FetchNodeProcess, engine: Engine, s3_bucket: ObjectStoreConfig
) -> None:
    expected = [_value(i) for i in range(N)]
    _topic(cluster, "fol")
    leader = cluster.leader("fol")
    followers = [b for b in cluster.brokers.values() if b is not leader]
    token = _token(engine)

    # Both followers corrupt: the fetch node's first choice is always a bad copy.
    bad = {b.broker_id: _flip(b, "fol") for b in followers}
    assert _read_json(fetch_node.http, "fol") == expected
    for b in followers:  # each one refuses the bad frame (or has already repaired it)
        r = _follower_tail(b, "fol", token, bad[b.broker_id])
        if r.status_code != 200:
            _storage_error(r)
        else:
            values = [rec["value"] for rec in r.json()["records"]]
            assert values == expected[bad[b.broker_id] :]
    for b in followers:
        wait_for(
            f"broker {b.broker_id} refetched its copy", lambda b=b: _repaired(cluster, b, "fol")
        )
    assert _read_arrow(fetch_node.http, "fol") == expected
    assert _read_json(cluster.any().http, "fol") == expected

    # Again, then tier: the worker takes the leader's copy when the followers' fail the CRC.
    # It downloads from in-sync replicas only, and a repaired follower has its bytes back
    # before the leader re-admits it: until metadata lists both followers in the ISR again,
    # the worker would skip one, and nothing would ever read (and so repair) its bad copy.
    wait_for("both followers back in the ISR", lambda: len(_isr(engine, "fol")) == 3)
    for b in followers:
        _flip(b, "fol")
    topic_id = cluster.describe("fol")["id"]
    wait_for(
        "segments registered",
        lambda: SegmentRegistry(engine).segments(TopicIdPartition(topic_id, 0)),
    )
    worker = TieringWorker(engine, s3_bucket, "crc-worker")
    try:
        assert worker.run_once() >= 1, "no segment was tiered"
    finally:
        worker.close()
    segs = SegmentRegistry(engine).segments(TopicIdPartition(topic_id, 0))
    assert segs[0].base_offset == 0 and segs[0].state == "tiered", segs[0]
    for b in followers:  # the downloads found the bad copies: they are repaired too
        wait_for(f"broker {b.broker_id} repaired", lambda b=b: _repaired(cluster, b, "fol"))
    assert _read_arrow(fetch_node.http, "fol", hot=False) == expected


def test_a_corrupt_leader_serves_no_bad_byte_and_takes_the_frame_back(
    cluster: Cluster, fetch_node: FetchNodeProcess
) -> None:
    expected = [_value(i) for i in range(N)]
    _topic(cluster, "led")
    leader = cluster.leader("led")
    follower = next(b for b in cluster.brokers.values() if b is not leader)
    _flip(leader, "led")
    # The leader's own answer: a clear 503 with a Kafka error name, never the bytes.
    _storage_error(_read_json(leader.http, "led"))
    # The fetch node reads in-sync followers first, whose copies are whole.
    assert _read_json(fetch_node.http, "led") == expected
    assert _read_arrow(fetch_node.http, "led") == expected
    # It puts the frame back from a follower's whole copy of it (the same bytes), cutting
    # nothing and keeping the partition: waited for on the files, not by reads of the leader
    # (which would report the frame again).
    wait_for(
        "the leader's copy repaired in place",
        lambda: cluster.segment_bytes(leader, "led") == cluster.segment_bytes(follower, "led"),
    )
    assert cluster.partition("led")["leader"] == leader.broker_id
    assert _read_json(leader.http, "led") == expected
    assert _read_arrow(leader.http, "led") == expected  # whole values
