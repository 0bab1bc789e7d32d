"""Erasing keys from a hot log (ingest/cleaner/key_erasure.py, issue 31): only the named
keys below the end offset go; offsets, frame headers, producer state and the log's bounds stay;
two replicas with different segment layouts end with the same frames; a crash mid-swap and a
second pass change nothing more."""

from __future__ import annotations

import uuid
from pathlib import Path

from ingest.cleaner.key_erasure import erase_keys, key_set
from ingest.log.index import LogIndex
from ingest.log.local_log import LocalLog, LogConfig
from ingest.unified.producer_state import ProducerStateManager
from logformat.frame import decode_records, encode_frame
from tests.unit.ingest.conftest import LogEnv
from tests.unit.ingest.test_ingest_log_cleaner import NOW, keyed, records

ALICE = key_set([b"alice", b"\x00bin"])


def fill(log: LocalLog, rounds: int) -> None:
    """Frames of 4 (some of an idempotent producer), alice in every third frame."""
    for i in range(rounds):
        rows = [(b"k%d" % i, b"v"), (b"alice" if i % 3 == 0 else b"bob", b"x%d" % i)]
        rows += [(None, b"n"), (b"\x00bin" if i % 5 == 0 else b"carol", b"y")]
        frame = keyed(rows, ts=NOW + i)
        if i % 2:
            batch = decode_records(frame)
            frame = encode_frame(batch, producer_id=7, producer_epoch=0, base_sequence=4 * i)
        log.append([frame], 0, NOW)


def headers(log: LocalLog) -> list[tuple[int, int, int, int, int, int]]:
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        for h, _ in log.read(offset, 1 << 20):
            out.append(
                (
                    h.base_offset,
                    h.record_count,
                    h.leader_epoch,
                    h.producer_id,
                    h.base_sequence,
                    h.max_timestamp,
                )
            )
            offset = h.next_offset
    return out


def frame_bytes(log: LocalLog) -> bytes:
    out, offset = bytearray(), log.log_start_offset
    while offset < log.log_end_offset:
        for h, data in log.read(offset, 1 << 20):
            out += data
            offset = h.next_offset
    return bytes(out)


def test_erases_named_keys_only_and_keeps_offsets_headers_and_bounds(env: LogEnv) -> None:
    log = env.open(LogConfig(segment_bytes=2048))
    fill(log, 60)
    before, hdrs = records(log), headers(log)
    start, end = log.log_start_offset, log.log_end_offset
    assert not log.segments()[-1].sealed and log.segments()[-1].size  # some in the active one

    r = erase_keys(log, ALICE, end)
    assert r is not None
    gone = [x for x in before if x[1] in (b"alice", b"\x00bin")]
    assert r.records_removed == len(gone) == 20 + 12
    assert records(log) == [x for x in before if x not in gone]  # every other at its offset
    assert headers(log) == hdrs  # spans, epochs, producer fields: gaps as after compaction
    assert (log.log_start_offset, log.log_end_offset) == (start, end)
    assert not any(b"alice" in p.read_bytes() for p in env.segment_files())  # on disk too

    # producer state rebuilt from the erased segments still deduplicates the last batch
    psm = ProducerStateManager(env.index, env.topic_id, env.partition)
    psm.rebuild(log)
    assert psm.check(7, 0, 4 * 59, 4).duplicate

    again = erase_keys(log, ALICE, end)
    assert again is not None and again.records_removed == 0 and again.segments_rewritten == 0


def test_records_at_or_after_the_end_offset_are_kept(env: LogEnv) -> None:
    log = env.open(LogConfig(segment_bytes=2048))
    fill(log, 12)
    end = 4 * 9 + 1  # inside frame 9 (alice at offset 37): records from 37 on stay
    before = records(log)
    r = erase_keys(log, ALICE, end)
    assert r is not None
    assert [x for x in records(log) if x[1] == b"alice"] == [(37, b"alice", b"x9")]
    assert [x for x in before if x[0] >= end] == [x for x in records(log) if x[0] >= end]
    assert erase_keys(log, ALICE, log.log_end_offset + 1) is None  # not reached yet: later


def test_replicas_with_other_segment_layouts_end_byte_identical(tmp_path: Path) -> None:
    logs = []
    for i, segment_bytes in enumerate((1500, 4096, 1 << 20)):
        root = tmp_path / f"r{i}"
        index = LogIndex(str(root / "index"))
        log = LocalLog.open(
            str(root / "t-0"),
            "t",
            str(uuid.uuid4()),
            0,
            index,
            LogConfig(segment_bytes=segment_bytes),
        )
        fill(log, 40)
        logs.append((log, index))
    assert len({len(log.segments()) for log, _ in logs}) == 3
    for log, _ in logs:
        assert erase_keys(log, ALICE, log.log_end_offset) is not None
    assert len({frame_bytes(log) for log, _ in logs}) == 1
    for log, index in logs:
        log.close()
        index.close()


def test_crash_after_the_swap_commit_recovers_erased(env: LogEnv) -> None:
    log = env.open(LogConfig(segment_bytes=2048))
    fill(log, 30)
    want = [x for x in records(log) if x[1] not in (b"alice", b"\x00bin")]
    assert erase_keys(log, ALICE, log.log_end_offset) is not None
    log = env.reopen(LogConfig(segment_bytes=2048), clean=False)
    assert records(log) == want
    r = erase_keys(log, ALICE, log.log_end_offset)
    assert r is not None and r.records_removed == 0
