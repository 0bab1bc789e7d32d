"""Bytes that rot on disk: reads check each frame's CRC and offset, never serve a bad frame;
the frame is put back in place from a whole copy of the same frame only, and a follower
truncates below it only when its leader's copy is other bytes (real files + RocksDB)."""

from __future__ import annotations

import asyncio
import os

import pytest

from ingest.log.frame_repair import FrameMismatch
from ingest.log.local_log import LocalLog, LogConfig
from ingest.log.log_read import CorruptLogError
from ingest.replication import corruption
from ingest.replication.partition import Partition, Role
from ingest.tiered.fetch_reader import fetch
from logformat.errors import ErrorCode
from logformat.frame import HEADER_SIZE, assign, decode_header
from metadata.types import PartitionRecord


def _frames_at(log: LocalLog) -> list[tuple[str, int, int, int]]:
    """(segment path, position, base offset, size) of every stored frame."""
    out = []
    for seg in log.segments():
        with open(seg.path, "rb") as f:
            data = f.read()
        pos = 0
        while pos < len(data):
            h = decode_header(data, pos)
            out.append((seg.path, pos, h.base_offset, h.size))
            pos += h.size
    return out


def _flip(path: str, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0xFF]))
        f.flush()
        os.fsync(f.fileno())


def _log_of_sealed_segments(env, frame) -> LocalLog:  # type: ignore[no-untyped-def]
    log = env.open(LogConfig(segment_bytes=2_400))  # three frames of ~760 bytes a segment
    for _ in range(12):
        log.append([frame(3)], leader_epoch=1, now_ms=1_000)
    assert len(log.segments()) >= 3
    return log


def test_a_flipped_payload_byte_fails_the_read_at_that_frame(env, frame) -> None:  # type: ignore[no-untyped-def]
    log = _log_of_sealed_segments(env, frame)
    stored = _frames_at(log)
    path, pos, bad, size = stored[1]  # the second frame of the first (sealed) segment
    assert log.segments()[0].sealed and path == log.segments()[0].path
    _flip(path, pos + HEADER_SIZE + size // 3)
    # A read that meets it after whole frames serves those and stops before it (issue 26: a
    # consumer or follower gets everything up to the bad frame) ...
    [(header, _)] = log.read(0, 1 << 20)
    assert header.base_offset == 0
    # ... and a read from it fails, naming it.
    with pytest.raises(CorruptLogError) as e:
        log.read(bad, 1 << 20)
    assert e.value.offset == bad == 3
    assert e.value.code is ErrorCode.KAFKA_STORAGE_ERROR and e.value.http_status == 503
    assert e.value.to_json()["corrupt_offset"] == 3
    # Everything after it is whole and readable.
    after = stored[2][2]
    assert log.read(after, 1 << 20)[0][0].base_offset == after


def test_a_changed_base_offset_outside_the_crc_is_caught(env, frame) -> None:  # type: ignore[no-untyped-def]
    """The header's base offset is not under the CRC (the leader patches it in place): the
    read checks it against the offsets the index promises."""
    log = _log_of_sealed_segments(env, frame)
    path, pos, bad, _ = _frames_at(log)[2]
    _flip(path, pos + 4)  # the low byte of base_offset
    with pytest.raises(CorruptLogError, match="says offset") as e:
        log.read(bad, 1 << 20)
    assert e.value.offset == bad


def test_time_lookup_does_not_decode_a_corrupt_frame(env, frame) -> None:  # type: ignore[no-untyped-def]
    log = env.open()
    log.append([frame(3, ts=1_000)], leader_epoch=1, now_ms=1)
    log.append([frame(3, ts=5_000)], leader_epoch=1, now_ms=1)
    path, pos, _, size = _frames_at(log)[1]
    _flip(path, pos + size - 20)
    with pytest.raises(CorruptLogError):
        log.offset_for_timestamp(4_000)


def test_a_follower_truncates_only_when_the_leaders_copy_is_other_bytes(env, frame) -> None:  # type: ignore[no-untyped-def]
    async def run() -> None:
        log = _log_of_sealed_segments(env, frame)
        state = Partition(log, me=2)
        state.apply(PartitionRecord("orders", env.topic_id, 0, 1, 5, [1, 2, 3], [1, 2, 3], 7))
        assert state.role is Role.FOLLOWER
        state.high_watermark = log.log_end_offset
        path, pos, bad, size = _frames_at(log)[4]
        _flip(path, pos + HEADER_SIZE + size // 2)
        with pytest.raises(CorruptLogError):
            await fetch(state, bad, 1_000, 1 << 20, 0)  # a fetch node's follower read
        assert state.repair_from == bad
        end = log.log_end_offset
        assert corruption.repair(state)  # fetches on: the frame is put back in place ...
        assert log.log_end_offset == end and state.repair_from == bad
        state.refetch_wanted = True  # ... unless the leader's copy is other bytes (compacted)
        # In the ISR it never cuts below the high watermark (elected, it would lose committed
        # records): it does not fetch, so its leader drops it, and then it cuts.
        assert not corruption.repair(state)  # what the replica fetcher does before a fetch
        assert state.repair_from == bad and log.log_end_offset > bad
        state.apply(PartitionRecord("orders", env.topic_id, 0, 1, 5, [1, 2, 3], [1, 3], 8))
        assert corruption.repair(state)
        assert state.repair_from is None
        assert log.log_end_offset == bad and state.high_watermark == bad
        got = await fetch(state, 0, 1_000, 1 << 20, 0)  # the whole frames below it still serve
        assert got.batch.column(0).to_pylist() == list(range(bad))

    asyncio.run(run())


def test_a_leader_answers_errors_and_keeps_its_log_whole_as_a_follower(env, frame) -> None:  # type: ignore[no-untyped-def]
    async def run() -> None:
        log = _log_of_sealed_segments(env, frame)
        state = Partition(log, me=1)
        state.apply(PartitionRecord("orders", env.topic_id, 0, 1, 5, [1], [1], 7))
        assert state.role is Role.LEADER
        state.high_watermark = log.log_end_offset
        path, pos, bad, size = _frames_at(log)[1]
        _flip(path, pos + HEADER_SIZE + size // 2)
        end = log.log_end_offset
        for _ in range(2):
            with pytest.raises(CorruptLogError):
                await fetch(state, bad, 1_000, 1 << 20, 0)
        corruption.repair(state)  # a leader has no one to fetch from: its log stays whole
        assert state.handoff_wanted and log.log_end_offset == end
        # Handed off, it remembers the bad frame it found as leader (no second read needed)
        # and puts it back from a peer; its fetches cut nothing (the frames above it stay).
        state.apply(PartitionRecord("orders", env.topic_id, 0, 2, 6, [2, 1], [2], 8))
        assert state.role is Role.FOLLOWER
        assert corruption.repair(state)
        assert state.repair_from == bad and log.log_end_offset == end

    asyncio.run(run())


def test_a_whole_copy_of_the_same_frame_is_put_back_in_place(env, frame) -> None:  # type: ignore[no-untyped-def]
    log = _log_of_sealed_segments(env, frame)
    path, pos, bad, size = _frames_at(log)[4]
    with open(path, "rb") as f:
        f.seek(pos)
        whole = f.read(size)
    end, files = log.log_end_offset, [s.size for s in log.segments()]
    assert not log.replace_frame(bad, whole)  # whole already: nothing written
    _flip(path, pos + HEADER_SIZE + size // 2)
    with pytest.raises(CorruptLogError):
        log.read(bad, 1)
    assert log.replace_frame(bad, whole)
    assert bytes(log.read(bad, 1)[0][1]) == whole
    assert log.log_end_offset == end and [s.size for s in log.segments()] == files
    assert log.read(0, 1 << 20)  # every frame from the start reads again


@pytest.mark.parametrize("change", ["epoch", "offset", "crc", "size", "not_a_frame_start"])
def test_a_copy_that_is_not_the_same_whole_frame_is_refused(env, frame, change) -> None:  # type: ignore[no-untyped-def]
    log = _log_of_sealed_segments(env, frame)
    path, pos, bad, size = _frames_at(log)[4]
    with open(path, "rb") as f:
        f.seek(pos)
        copy = bytearray(f.read(size))
    _flip(path, pos + HEADER_SIZE + size // 2)
    at = bad
    if change == "epoch":  # another leader's frame at this offset (a diverged replica)
        assign(copy, bad, 2)
    elif change == "offset":
        assign(copy, bad + 3, 1)
    elif change == "crc":  # the peer's copy is bad as well
        copy[HEADER_SIZE + 5] ^= 0x01
    elif change == "size":
        copy += b"\0"
    else:
        at = bad + 1
    with pytest.raises(FrameMismatch):
        log.replace_frame(at, bytes(copy))
    with pytest.raises(CorruptLogError):  # nothing was written over the bad frame
        log.read(bad, 1)


def test_hot_fetches_name_each_frame_and_its_crc(env, frame) -> None:  # type: ignore[no-untyped-def]
    async def run() -> None:
        log = env.open()
        for n in (2, 3, 4):
            log.append([frame(n)], leader_epoch=1, now_ms=1)
        state = Partition(log, me=1)
        state.apply(PartitionRecord("orders", env.topic_id, 0, 1, 5, [1], [1], 7))
        state.high_watermark = log.log_end_offset
        stored = {h.base_offset: h for h, _ in log.read(0, 1 << 20)}
        got = await fetch(state, 1, 4, 1 << 20, 0)
        assert got.batch.column(0).to_pylist() == [1, 2, 3, 4] and got.next_offset == 5
        # The frames served from (the third, not reached, is not listed), with their CRCs.
        assert [(f.base_offset, f.last_offset, f.crc) for f in got.frames] == [
            (0, 1, stored[0].crc),
            (2, 4, stored[2].crc),
        ]

    asyncio.run(run())


def test_check_segment_finds_the_first_bad_frame(env, frame) -> None:  # type: ignore[no-untyped-def]
    log = _log_of_sealed_segments(env, frame)
    seg = log.segments()[0]
    fd = os.open(seg.path, os.O_RDONLY)
    try:
        assert corruption.check_segment(fd, seg.size, seg.base_offset) is None
        assert corruption.check_segment(fd, seg.size, seg.base_offset + 1) == seg.base_offset + 1
        path, pos, bad, _ = _frames_at(log)[2]
        assert path == seg.path
        _flip(path, pos + HEADER_SIZE + 1)
        assert corruption.check_segment(fd, seg.size, seg.base_offset) == bad
    finally:
        os.close(fd)
