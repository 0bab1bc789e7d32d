"""Brokers follow whole-log retention: after the cold tier's log start moves (the compaction
worker expired cold files), every replica raises its log start and deletes the hot segments
below it; topics without tiering get retention.ms on their hot log. Real broker processes."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from functools import partial

import pytest
from sqlalchemy.engine import Engine

from compaction.manifest_ops import CompactionManifest
from metadata.cold_manifest import ColdManifest
from metadata.db import make_engine
from metadata.types import TopicIdPartition
from tests.integration.cluster import Cluster, wait_for
from tests.integration.test_tiering_broker import (
    _create,
    _files,
    _files_are,
    _produce_frames,
    _registered,
    _tier,
)

HOUR_MS = 3600 * 1000


# One cluster and database for the file (each test has a topic of its own): a cluster start
# costs more than either check.
@pytest.fixture(scope="module")
def retention_db(db_factory: Callable[..., str]) -> str:
    return db_factory()


@pytest.fixture(scope="module")
def engine(retention_db: str) -> Iterator[Engine]:
    e = make_engine(retention_db)
    yield e
    e.dispose()


@pytest.fixture(scope="module")
def cluster(retention_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(retention_db, tmp_path_factory.mktemp("retention"), 2).start()
    yield c
    c.stop()


def _start(c: Cluster, topic: str) -> int:
    return int(c.partition(topic)["log_start_offset"])


def test_replicas_follow_the_cold_log_start(cluster: Cluster, engine: Engine) -> None:
    topic_id = _create(cluster, "cr", rf=2, segment_bytes=1024)
    _produce_frames(cluster, "cr", 6)
    bases = sorted(_files(cluster.leader("cr"), "cr"))
    wait_for("registered", lambda: len(_registered(engine, topic_id)) == len(bases) - 1)
    _tier(engine, topic_id, len(bases) - 1)
    for b in cluster.brokers.values():  # local retention is a week: the hot copy stays
        assert sorted(_files(b, "cr")) == bases
    # the compaction worker expires the three oldest cold files
    files = ColdManifest(engine).files(TopicIdPartition(topic_id, 0))
    CompactionManifest(engine).retire([f.id for f in files[:3]], 60_000)
    assert ColdManifest(engine).log_start_offset(TopicIdPartition(topic_id, 0)) == bases[3]
    for b in cluster.brokers.values():
        wait_for("segments below the log start deleted", partial(_files_are, b, "cr", bases[3:]))
    wait_for("describe", lambda: _start(cluster, "cr") == bases[3])
    for b in cluster.brokers.values():
        r = b.http.get("/topics/cr/partitions/0/records", params={"offset": 0})
        assert r.status_code == 416, r.text
        r = b.http.get("/topics/cr/partitions/0/offsets", params={"at": "earliest"})
        assert r.json()["offset"] == bases[3]
    assert cluster.any().fetch("cr", offset=bases[3])["records"][0]["offset"] == bases[3]


def test_untiered_topics_apply_retention_ms_to_the_hot_log(cluster: Cluster) -> None:
    _create(
        cluster,
        "plain",
        rf=2,
        segment_bytes=1024,
        remote_storage_enable="false",
        retention_ms=HOUR_MS,
    )
    now = int(time.time() * 1000)
    _produce_frames(cluster, "plain", 4, ts=now - 2 * HOUR_MS)
    _produce_frames(cluster, "plain", 2, ts=now)
    leader = cluster.leader("plain")
    bases = sorted(_files(leader, "plain"))
    # each frame (2 records) filled a segment: the four old ones go, on every replica
    keep = [b for b in bases if b >= 8]
    for b in cluster.brokers.values():
        wait_for("expired segments deleted", partial(_files_are, b, "plain", keep))
    wait_for("describe", lambda: _start(cluster, "plain") == 8)
    r = leader.http.get("/topics/plain/partitions/0/records", params={"offset": 0})
    assert r.status_code == 416
    assert [x["offset"] for x in cluster.any().fetch_all("plain", offset=8)] == [8, 9, 10, 11]
