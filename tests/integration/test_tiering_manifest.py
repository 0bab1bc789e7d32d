"""SegmentRegistry + ColdManifest against a real Postgres: the segment and cold-file state
machines, claim semantics (skip locked, lowest-first, leases, fencing, backoff)."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine

from metadata.brokers import BrokerRepo
from metadata.cold_manifest import ColdManifest
from metadata.db_errors import ConstraintViolation
from metadata.segment_registry import ClaimLostError, FileSpec, SegmentRegistry
from metadata.topics import TopicRepo
from metadata.types import TopicIdPartition
from tests.integration.schema_head import HEAD

LEASE = 60_000


@pytest.fixture
def topic_id(db_engine: Engine) -> str:
    BrokerRepo(db_engine).register(1, "http://127.0.0.1:9001", 60_000)
    return TopicRepo(db_engine).create("t", 4, 1).id


@pytest.fixture
def reg(db_engine: Engine) -> SegmentRegistry:
    # Backoffs a loaded machine cannot sleep through between two statements (200 ms did).
    return SegmentRegistry(db_engine, backoff_ms=2000, max_backoff_ms=10_000)


def spec(key: str, records: int = 10) -> FileSpec:
    return FileSpec(key, 1234, records, 1000, 2000)


def test_schema_is_at_head_with_tiering_tables(db_engine: Engine) -> None:
    with db_engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == HEAD
        assert conn.execute(text("SELECT count(*) FROM hot_segments")).scalar() == 0
        assert conn.execute(text("SELECT count(*) FROM cold_files")).scalar() == 0


def test_register_is_idempotent_and_claim_takes_lowest_per_partition(
    reg: SegmentRegistry, topic_id: str
) -> None:
    for base in (0, 100, 200):
        reg.register_sealed(TopicIdPartition(topic_id, 0), base, base + 100, 5000)
        reg.register_sealed(
            TopicIdPartition(topic_id, 0), base, base + 100, 5000
        )  # a broker restart
    reg.register_sealed(TopicIdPartition(topic_id, 1), 50, 80, 10)
    claims = reg.claim("w1", LEASE, limit=10)
    assert sorted((c.partition, c.base_offset) for c in claims) == [(0, 0), (1, 50)]
    assert all(c.topic == "t" and c.attempt == 1 for c in claims)
    assert reg.claim("w2", LEASE, limit=10) == []  # the next of partition 0 waits for 0
    c0 = next(c for c in claims if c.partition == 0)
    reg.mark_tiered(c0, spec("k0"), delta_version=1)
    (nxt,) = reg.claim("w2", LEASE, limit=10)
    assert (nxt.partition, nxt.base_offset, nxt.end_offset) == (0, 100, 200)


def test_two_workers_never_claim_the_same_segment(reg: SegmentRegistry, topic_id: str) -> None:
    for p in range(4):
        for base in range(0, 500, 100):
            reg.register_sealed(TopicIdPartition(topic_id, p), base, base + 100, 1)
    seen: Counter[tuple[int, int]] = Counter()
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def work(name: str) -> None:
        barrier.wait()
        for _ in range(200):
            claims = reg.claim(name, LEASE, limit=2)
            if not claims:
                time.sleep(0.01)
                with lock:
                    if len(seen) == 20:
                        return
                continue
            for c in claims:
                with lock:
                    seen[(c.partition, c.base_offset)] += 1
                    # lowest-first: every lower segment of the partition is already tiered
                    assert all(seen[(c.partition, b)] == 1 for b in range(0, c.base_offset, 100))
                reg.mark_tiered(c, spec(f"{name}-{c.partition}-{c.base_offset}"), 1)

    threads = [threading.Thread(target=work, args=(f"w{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 20 and set(seen.values()) == {1}


def _lapse(engine: Engine, worker_id: str) -> None:
    """A worker's claims run out now: set in Postgres, not raced against the wall clock (a
    100 ms lease lapsed between two calls on a loaded machine)."""
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE hot_segments SET claim_expires_at = now() - interval '1 second'"
                " WHERE claimed_by = :w"
            ),
            {"w": worker_id},
        )


def test_expired_claim_is_taken_over_and_the_old_claim_is_fenced(
    reg: SegmentRegistry, db_engine: Engine, topic_id: str
) -> None:
    reg.register_sealed(TopicIdPartition(topic_id, 0), 0, 10, 1)
    (old,) = reg.claim("crashed", LEASE)
    assert reg.claim("w2", LEASE) == []
    _lapse(db_engine, "crashed")
    (new,) = reg.claim("w2", LEASE)
    assert (new.base_offset, new.attempt) == (0, 2)
    manifest = ColdManifest(db_engine)
    with pytest.raises(ClaimLostError):
        manifest.start_copy(old, spec("old"))
    assert not reg.extend(old, LEASE)
    assert not reg.release(old, "late")
    with pytest.raises(ClaimLostError):
        reg.mark_tiered(old, spec("old"), 1)
    assert reg.extend(new, LEASE)
    reg.mark_tiered(new, spec("new"), 3)
    assert [f.object_key for f in manifest.files(TopicIdPartition(topic_id, 0))] == ["new"]


def test_a_batch_claim_is_bounded_by_bytes_and_marked_tiered_in_one_transaction(
    reg: SegmentRegistry, db_engine: Engine, topic_id: str
) -> None:
    for p in range(4):
        reg.register_sealed(TopicIdPartition(topic_id, p), 0, 10, 400)
    assert len(reg.claim("w1", LEASE, limit=4, max_bytes=900)) == 2  # 3 x 400 > 900
    (big,) = reg.claim("w2", LEASE, limit=4, max_bytes=10)  # the first is claimed however big
    (last,) = reg.claim("w3", LEASE, limit=4)
    _lapse(db_engine, "w2")  # w2's lease lapses: w4 takes its segment over
    (taken,) = reg.claim("w4", LEASE)
    assert (taken.partition, taken.base_offset) == (big.partition, 0)
    manifest = ColdManifest(db_engine)
    manifest.start_copy(last, spec("last-abandoned"))
    orphans, lost = reg.mark_all_tiered([(big, spec("w2")), (last, spec("w3"))], 7)
    assert lost == [big]  # skipped: its new owner records the file from the table
    assert [o.object_key for o in orphans] == ["last-abandoned"]
    assert [f.object_key for f in manifest.files(last.tp)] == ["w3"]
    assert manifest.files(big.tp) == []
    states = {
        s.partition: s.state for p in range(4) for s in reg.segments(TopicIdPartition(topic_id, p))
    }
    assert states[last.partition] == "tiered" and states[big.partition] == "tiering"


def test_a_consecutive_claim_takes_the_run_after_the_lowest_segment(
    reg: SegmentRegistry, topic_id: str
) -> None:
    tp0, tp1 = TopicIdPartition(topic_id, 0), TopicIdPartition(topic_id, 1)
    for base in (0, 10, 20, 40):  # a gap before 40 (a segment not registered yet)
        reg.register_sealed(tp0, base, base + 10 if base < 20 else base + 20, 100)
    reg.register_sealed(tp1, 0, 10, 100)
    claims = reg.claim("w1", LEASE, limit=4, consecutive=True)
    # the lowest of each partition first, then what follows partition 0's without a gap
    assert [(c.partition, c.base_offset) for c in claims] == [(0, 0), (1, 0), (0, 10), (0, 20)]
    assert reg.claim("w2", LEASE, limit=4, consecutive=True) == []  # 40 waits for 0..40
    for c in claims:
        reg.release(c)
    small = reg.claim("w3", LEASE, limit=4, max_bytes=300, consecutive=True)
    assert [(c.partition, c.base_offset) for c in small] == [(0, 0), (1, 0), (0, 10)]
    (late,) = [c for c in small if c.base_offset == 10]
    reg.release(late, "boom")  # backing off: the run stops before it
    reg.release(next(c for c in small if c.partition == 0 and c.base_offset == 0))
    again = reg.claim("w4", LEASE, limit=4, consecutive=True)
    assert [(c.partition, c.base_offset) for c in again] == [(0, 0)]


def test_release_records_error_and_backs_off(reg: SegmentRegistry, topic_id: str) -> None:
    reg.register_sealed(TopicIdPartition(topic_id, 2), 0, 10, 1)
    (c,) = reg.claim("w", LEASE)
    assert reg.release(c, "boom: replica unreachable")
    (seg,) = reg.segments(TopicIdPartition(topic_id, 2))
    assert (seg.state, seg.attempts, seg.last_error) == ("sealed", 1, "boom: replica unreachable")
    assert reg.claim("w", LEASE) == []  # backing off
    deadline = time.monotonic() + 30
    while not (claims := reg.claim("w", LEASE)):  # claimable again once the backoff is over
        assert time.monotonic() < deadline, "still backing off after 30 s"
        time.sleep(0.1)
    (again,) = claims
    assert again.attempt == 2


def test_cold_file_state_machine_and_ranges(
    reg: SegmentRegistry, db_engine: Engine, topic_id: str
) -> None:
    manifest = ColdManifest(db_engine)
    for base in (0, 10, 20):
        reg.register_sealed(TopicIdPartition(topic_id, 0), base, base + 10, 1)
    assert manifest.tiered_end_offset(TopicIdPartition(topic_id, 0)) is None
    assert manifest.lag(TopicIdPartition(topic_id, 0), 25) == 25

    # attempt 1 crashes after the upload (copied, never committed)
    (c1,) = reg.claim("w1", 100)
    crashed = manifest.start_copy(c1, spec("a1"))
    manifest.mark_copied(crashed)
    time.sleep(0.2)
    # attempt 2 commits; attempt 1's file is superseded
    (c2,) = reg.claim("w2", LEASE)
    fid = manifest.start_copy(c2, spec("a2", records=10))
    assert manifest.files(TopicIdPartition(topic_id, 0)) == []  # invisible before the commit
    manifest.mark_copied(fid)
    assert manifest.files(TopicIdPartition(topic_id, 0)) == []
    orphans = reg.mark_tiered(c2, spec("a2", records=10), delta_version=7)
    assert [(o.object_key, o.state) for o in orphans] == [("a1", "delete_started")]
    (f,) = manifest.files(TopicIdPartition(topic_id, 0))
    assert (f.id, f.state, f.delta_version, f.base_offset, f.last_offset, f.records) == (
        fid,
        "committed",
        7,
        0,
        9,
        10,
    )
    manifest.mark_deleted([orphans[0].id])
    deleted = manifest.get(orphans[0].id)
    assert deleted is not None and deleted.state == "deleted"
    with pytest.raises(ClaimLostError):
        manifest.mark_copied(orphans[0].id)  # a superseded attempt cannot move on
    assert manifest.cold_range(TopicIdPartition(topic_id, 0)) == (0, 10)
    assert manifest.lag(TopicIdPartition(topic_id, 0), 25) == 15

    (c3,) = reg.claim("w", LEASE)
    reg.mark_tiered(c3, spec("b"), 8)  # the Delta file may be another attempt's: upserted
    assert manifest.tiered_end_offset(TopicIdPartition(topic_id, 0)) == 20
    assert [s.state for s in reg.segments(TopicIdPartition(topic_id, 0))] == [
        "tiered",
        "tiered",
        "sealed",
    ]

    # retention: committed -> delete_started -> deleted; the range shrinks from the front
    manifest.start_delete([fid], grace_ms=60_000)
    assert manifest.cold_range(TopicIdPartition(topic_id, 0)) == (10, 20)
    assert reg.untiered() == [("t", 0, 1, 10, 1)]


def test_states_are_checked_by_the_database(db_engine: Engine, topic_id: str) -> None:
    with pytest.raises(ConstraintViolation), db_engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO hot_segments (topic_id, partition, base_offset, end_offset,"
                " size_bytes, state) VALUES (:t, 0, 0, 1, 1, 'bogus')"
            ),
            {"t": topic_id},
        )
    with pytest.raises(ConstraintViolation), db_engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO cold_files (topic_id, partition, base_offset, last_offset,"
                " min_timestamp, max_timestamp, object_key, size_bytes, records, state)"
                " VALUES (:t, 0, 0, 0, 0, 0, 'k', 1, 1, 'committed')"  # no delta_version
            ),
            {"t": topic_id},
        )


def test_topic_delete_cascades(reg: SegmentRegistry, db_engine: Engine, topic_id: str) -> None:
    reg.register_sealed(TopicIdPartition(topic_id, 0), 0, 10, 1)
    (c,) = reg.claim("w", LEASE)
    reg.mark_tiered(c, spec("k"), 1)
    TopicRepo(db_engine).delete("t")
    with db_engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM hot_segments")).scalar() == 0
        assert conn.execute(text("SELECT count(*) FROM cold_files")).scalar() == 0
