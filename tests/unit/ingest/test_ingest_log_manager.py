"""LogManager, Segment and LogIndex pieces."""

from __future__ import annotations

import os
import uuid

import pytest

from ingest.log.index import LogIndex, partition_key
from ingest.log.local_log import LogConfig
from ingest.log.log_manager import LogManager
from ingest.log.segment import Segment, list_segments, segment_name


def test_manager_create_get_drop_and_rediscover(tmp_path, frame):
    mgr = LogManager(str(tmp_path))
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    cfg = LogConfig(segment_bytes=1_000, segment_ms=10)
    logs = [mgr.get_or_create("t.a-b", a, p, cfg) for p in range(3)]
    other = mgr.get_or_create("other", b, 0, cfg)
    assert mgr.get_or_create("t.a-b", a, 1, cfg) is logs[1]
    assert mgr.get("t.a-b", 2) is logs[2] and mgr.get("nope", 0) is None
    logs[0].append([frame(2)], 0, now_ms=100)
    other.append([frame(2)], 0, now_ms=100)
    assert mgr.roll_due(105) == []
    assert set(map(id, mgr.roll_due(110))) == {id(logs[0]), id(other)}
    assert len(mgr.all()) == 4
    assert sorted(mgr.existing()) == sorted(
        [("t.a-b", a, 0), ("t.a-b", a, 1), ("t.a-b", a, 2), ("other", b, 0)]
    )
    mgr.drop("t.a-b", 2)
    assert not os.path.exists(tmp_path / "t.a-b-2")
    mgr.close()

    mgr = LogManager(str(tmp_path))
    assert mgr.all() == []  # discovered, not opened: the broker decides from metadata
    assert sorted(mgr.existing()) == sorted([("t.a-b", a, 0), ("t.a-b", a, 1), ("other", b, 0)])
    mgr.drop("other", 0)  # not open: files and index entries go all the same
    assert mgr.index.partition(b, 0).get_state() is None
    log0 = mgr.get_or_create("t.a-b", a, 0, cfg)
    assert log0.log_end_offset == 2 and len(log0.segments()) == 2
    mgr.close()


def test_recreated_topic_with_new_id_starts_empty(tmp_path, frame):
    mgr = LogManager(str(tmp_path))
    old, new = str(uuid.uuid4()), str(uuid.uuid4())
    log = mgr.get_or_create("t", old, 0, LogConfig())
    log.append([frame(5, ts=50)], 0, 1)
    mgr.drop("t", 0)
    log = mgr.get_or_create("t", new, 0, LogConfig())
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert log.offset_for_timestamp(0) is None and log.read(0, 100) == []
    log.append([frame(1)], 0, 1)
    # Same name, another id while open: the old incarnation is replaced.
    newer = str(uuid.uuid4())
    log2 = mgr.get_or_create("t", newer, 0, LogConfig())
    assert log2 is not log and log2.log_end_offset == 0
    mgr.close()


def test_segment_append_read_truncate(tmp_path):
    seg = Segment.create(str(tmp_path), 42)
    assert os.path.basename(seg.path) == segment_name(42) == f"{42:020d}.log"
    assert seg.append([b"abc", bytearray(b"de"), memoryview(b"f")], 6) == 0
    assert seg.append([b"xyz"], 3) == 6
    assert seg.read(2, 5) == b"cdefx" and seg.size == 9
    seg.truncate(4)
    assert seg.append([b"Q"], 1) == 4  # O_APPEND writes at the new end
    with open(seg.path, "rb") as f:
        assert f.read() == b"abcdQ"
    seg.seal()
    assert seg.sealed
    seg.close()
    reopened = Segment.open(seg.path, 42)
    assert reopened.size == 5 and reopened.read(0, 10) == b"abcdQ"
    reopened.delete()
    assert list_segments(str(tmp_path)) == []


def test_segment_append_rolls_back_a_failed_write(tmp_path, monkeypatch):
    seg = Segment.create(str(tmp_path), 0)
    seg.append([b"good"], 4)

    def short_then_fail(fd, bufs):
        os.write(fd, b"".join(bufs)[:2])  # a torn write, then the disk is full
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "writev", short_then_fail)
    with pytest.raises(OSError):
        seg.append([b"bad", b"data"], 7)
    assert seg.size == 4 and os.path.getsize(seg.path) == 4
    seg.close()


def test_index_keys_are_per_topic_id_and_ordered(tmp_path):
    idx = LogIndex(str(tmp_path / "index"))
    tid = str(uuid.uuid4())
    assert partition_key(tid, 1) != partition_key(str(uuid.uuid4()), 1)
    assert len(partition_key("not-a-uuid", 3)) == 20
    p0, p1 = idx.partition(tid, 0), idx.partition(tid, 1)
    batch = idx.batch()
    for off in (0, 5, 300, 70_000):
        p0.put_frame(batch, off, 0, off * 10, 10, 5, off)
    p1.put_frame(batch, 1, 0, 0, 10, 1, 0)
    for ts, off in ((-5, 0), (7, 5), (1 << 40, 300)):
        p0.put_time(batch, ts, off)
    p0.put_epoch(batch, 1, 0)
    p0.put_epoch(batch, 3, 300)
    p0.put_producer(batch, 9, b"state")
    idx.write(batch)
    assert [e.base_offset for e in p0.frames()] == [0, 5, 300, 70_000]
    assert p0.frame_floor(299).base_offset == 5 and p0.frame_floor(10**9).base_offset == 70_000
    assert p1.frame_floor(0) is None and p0.last_frame(300).base_offset == 5
    assert p0.time_lookup(-100) == 0 and p0.time_lookup(-4) == 5 and p0.time_lookup(8) == 300
    assert p0.time_lookup((1 << 40) + 1) is None
    assert p0.last_time() == (1 << 40, 300)
    assert p0.get_producer(9) == b"state" and list(p0.producers()) == [(9, b"state")]
    batch = idx.batch()
    p0.truncate_epochs_from_start(batch, 10)
    idx.write(batch)
    assert p0.epochs() == [(1, 10), (3, 300)]
    idx.drop_range(tid, 0, 5, 301)
    assert [e.base_offset for e in p0.frames()] == [0, 70_000]
    idx.drop_partition(tid, 0)
    assert list(p0.frames()) == [] and p0.epochs() == [] and p0.get_producer(9) is None
    assert p1.frame_floor(5) is not None
    idx.close()
