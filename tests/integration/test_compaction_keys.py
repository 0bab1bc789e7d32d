"""Cold key compaction (cleanup.policy=compact) against a reference model."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from sqlalchemy.engine import Engine

from coldstore.object_store import ObjectStoreConfig
from metadata.types import TopicIdPartition
from tests.integration.s3 import moto_s3_fixture, s3_bucket_fixture  # noqa: F401
from tests.integration.test_compaction_support import ColdEnv, Rec, now_ms

MIN = 60_000
_names = itertools.count()


@pytest.fixture
def cold(db_engine: Engine, s3_bucket: ObjectStoreConfig) -> Iterator[ColdEnv]:
    env = ColdEnv(db_engine, s3_bucket)
    yield env
    env.store.close()


def model(segments: list[list[Rec]], now: int, lag_ms: int, dr_ms: int) -> list[tuple[int, Rec]]:
    """Kafka's cleaner over the cold files: the cleanable prefix (newest record at least
    min.compaction.lag.ms old) keeps each key's latest record, minus tombstones older than
    delete.retention.ms; null keys and everything after the prefix stay."""
    out: list[tuple[int, Rec]] = []
    offset, cleanable = 0, True
    numbered = []
    for seg in segments:
        cleanable = cleanable and max(r["ts"] for r in seg) <= now - lag_ms
        for r in seg:
            numbered.append((offset, r, cleanable))
            offset += 1
    latest = {r["key"]: o for o, r, c in numbered if c and r["key"] is not None}
    for o, r, c in numbered:
        expired_tombstone = r["value"] is None and r["ts"] < now - dr_ms
        if not c or r["key"] is None or (latest[r["key"]] == o and not expired_tombstone):
            out.append((o, r))
    return out


def _check(env: ColdEnv, topic: str, want: list[tuple[int, Rec]], total: int) -> None:
    tid = env.ids[topic]
    got_delta = env.delta_rows(topic)
    got_manifest = env.manifest_rows(topic)
    for got in (got_delta, got_manifest):
        assert [r["offset"] for r in got] == [o for o, _ in want]
        assert [(r["key"], r["value"], r["timestamp"]) for r in got] == [
            (w["key"], w["value"], w["ts"]) for _, w in want
        ]
    files = env.manifest.files(TopicIdPartition(tid, 0))
    if want:  # the committed ranges still cover the whole log, contiguously
        assert files[0].base_offset <= want[0][0] and files[-1].last_offset == total - 1
        assert all(a.last_offset + 1 == b.base_offset for a, b in itertools.pairwise(files))
    assert sum(f.records for f in files) == len(want)


record = st.tuples(
    st.one_of(st.sampled_from([b"a", b"b", b"c", b"d"]), st.just(None)),
    st.booleans(),  # tombstone?
    st.integers(0, 3),  # minutes since the previous record
)


@settings(
    max_examples=8,
    deadline=None,
    # no shrinking: each example tiers a topic through S3; the first failure is clear enough
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    segs=st.lists(st.lists(record, min_size=1, max_size=10), min_size=1, max_size=4),
    lag_min=st.sampled_from([0, 20]),
    dr_min=st.sampled_from([10, 600]),
)
def test_key_compaction_matches_the_model(
    cold: ColdEnv, segs: list[list[tuple[bytes | None, bool, int]]], lag_min: int, dr_min: int
) -> None:
    topic = f"compact{next(_names)}"
    cold.topic(
        topic,
        **{
            "cleanup.policy": "compact",
            "min.compaction.lag.ms": str(lag_min * MIN),
            "delete.retention.ms": str(dr_min * MIN),
            "max.compaction.lag.ms": str(60 * MIN),
        },
    )
    now = now_ms()
    ts = now - 50 * MIN
    segments: list[list[Rec]] = []
    i = 0
    for seg in segs:
        recs = []
        for key, tomb, gap in seg:
            ts += gap * MIN
            value = None if tomb else f"v{i}".encode()
            recs.append({"key": key, "value": value, "headers": None, "ts": ts})
            i += 1
        segments.append(recs)
        cold.tier(topic, 0, recs)
    w = cold.worker()
    w.run_once(now_ms=now)
    _check(cold, topic, model(segments, now, lag_min * MIN, dr_min * MIN), i)
    # a day later everything is cleanable and every tombstone has expired
    later = now + 24 * 60 * MIN
    w.run_once(now_ms=later)
    final = model(segments, later, lag_min * MIN, dr_min * MIN)
    assert all(r["value"] is not None or r["key"] is None for _, r in final)
    _check(cold, topic, final, i)
    w.close()


def test_a_compacted_topics_history_shrinks_to_about_one_record_per_key(cold: ColdEnv) -> None:
    tid = cold.topic("users", **{"cleanup.policy": "compact", "min.compaction.lag.ms": "0"})
    now = now_ms()
    keys = [f"user-{k}".encode() for k in range(10)]
    offset = 0
    for _ in range(5):
        recs: list[dict[str, Any]] = []
        for _i in range(200):
            recs.append(
                {
                    "key": keys[offset % 10],
                    "value": f"state {offset} ".encode() * 20,
                    "headers": [{"key": "seq", "value": str(offset).encode()}],
                    "ts": now - 10 * MIN + offset,
                }
            )
            offset += 1
        cold.tier("users", 0, recs)
    before = sum(f.size_bytes for f in cold.manifest.files(TopicIdPartition(tid, 0)))
    w = cold.worker()
    s = w.run_once()
    assert s.compacted_partitions == 1
    files = cold.manifest.files(TopicIdPartition(tid, 0))
    assert sum(f.records for f in files) == 10
    rows = cold.delta_rows("users")
    assert [r["offset"] for r in rows] == list(range(990, 1000))
    assert rows[0]["headers"] == [{"key": "seq", "value": b"990"}]
    assert sum(f.size_bytes for f in files) < before / 5
    assert (files[0].base_offset, files[-1].last_offset) == (0, 999)
    # nothing dirty is left: a second pass leaves the files alone
    assert w.run_once().compacted_partitions == 0
    assert cold.manifest.files(TopicIdPartition(tid, 0)) == files
    w.close()


def test_compact_delete_expires_old_files_then_compacts_the_rest(cold: ColdEnv) -> None:
    tid = cold.topic(
        "both",
        **{"cleanup.policy": "compact,delete", "retention.ms": str(60 * MIN)},
    )
    now = now_ms()
    for s, age in enumerate((120, 30, 20)):  # the first file is past retention.ms
        recs = [
            {"key": f"k{i % 3}".encode(), "value": f"{s}/{i}".encode(), "ts": now - age * MIN + i}
            for i in range(6)
        ]
        cold.tier("both", 0, recs)
    s = cold.worker().run_once()
    assert s.expired_files == 1 and s.compacted_partitions == 1
    assert cold.manifest.log_start_offset(TopicIdPartition(tid, 0)) == 6
    rows = cold.delta_rows("both")
    assert [(r["offset"], r["value"]) for r in rows] == [(15, b"2/3"), (16, b"2/4"), (17, b"2/5")]
    assert [r["offset"] for r in cold.manifest_rows("both")] == [15, 16, 17]
    files = cold.manifest.files(TopicIdPartition(tid, 0))
    assert (files[0].base_offset, files[-1].last_offset) == (6, 17)
