"""A full disk, in-process (issue 26 item 5): every failed write takes the log offline with a
reason an operator acts on, and the broker's RocksDB, which takes no write after one failed
on a full disk, takes them again once reopened with space back.
(tests/integration/test_disk_full.py runs the same on real brokers.)"""

from __future__ import annotations

import errno
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.log import segment as segment_module
from ingest.log import storage_errors
from ingest.log.index import LogIndex
from ingest.log.local_log import LogConfig
from ingest.log.storage_errors import IndexWriteError, describe, has_room, reason
from logformat.errors import ErrorCode, TierlogError
from tests.integration.disk_full import fill, free
from tests.unit.ingest.conftest import FrameFactory, LogEnv


def test_a_storage_error_is_named_for_what_the_operator_does() -> None:
    assert reason(OSError(errno.ENOSPC, "No space left on device")) == storage_errors.DISK_FULL
    assert reason(OSError(errno.EDQUOT, "Disk quota exceeded")) == storage_errors.DISK_FULL
    rocks = IndexWriteError("IO error: No space left on device: While appending to file")
    assert rocks.errno == errno.ENOSPC and reason(rocks) == storage_errors.DISK_FULL
    assert reason(OSError(errno.EPERM, "Operation not permitted")) == storage_errors.NOT_WRITABLE
    assert reason(OSError(errno.EIO, "Input/output error")) == storage_errors.IO_ERROR
    try:  # the cause counts: a wrapped ENOSPC is still a full disk
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError as inner:
            raise RuntimeError("append failed") from inner
    except RuntimeError as outer:
        assert reason(outer) == storage_errors.DISK_FULL
        assert describe(outer).startswith("disk full (ENOSPC)")


def test_room_is_the_file_systems_free_space(tmp_path: Path) -> None:
    assert has_room(str(tmp_path), 1)
    assert has_room(str(tmp_path / "not" / "yet"), 1)  # its nearest existing parent
    assert not has_room(str(tmp_path), 1 << 62)


def test_a_roll_whose_fsync_meets_a_full_disk_takes_the_log_offline(
    env: LogEnv, frame: FrameFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = env.open(LogConfig(segment_bytes=1 << 20))
    log.append([frame()], 0, 1_000)

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(segment_module.os, "fsync", full)
    with pytest.raises(TierlogError) as refused:
        log.roll()  # seal = fsync: on a full disk (delayed allocation) it is what fails
    assert refused.value.code is ErrorCode.KAFKA_STORAGE_ERROR
    assert "disk full" in refused.value.message
    # Offline: no more writes (the files and index may disagree), but reads go on.
    assert log.failure is not None and reason(log.failure) == storage_errors.DISK_FULL
    with pytest.raises(TierlogError):
        log.append([frame()], 0, 1_000)
    assert env.read_all(log) == [(0, 3)]


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs (root only: skipped elsewhere)."""
    where = tmp_path / "small"
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(where)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_the_index_takes_writes_again_once_reopened_with_space_back(small_fs: Path) -> None:
    index = LogIndex(str(small_fs / "index"))
    part = index.partition("00000000-0000-0000-0000-000000000001", 0)

    def put(n: int) -> None:
        batch = index.batch()
        part.put_epoch(batch, n, n * 10)
        index.write(batch)

    put(1)
    fill(small_fs)
    with pytest.raises(IndexWriteError) as failed:
        for n in range(2, 5000):  # the WAL's last page may take a few
            put(n)
    assert failed.value.errno == errno.ENOSPC
    assert index.failure is not None
    assert (1, 10) in part.epochs()  # reads go on
    free(small_fs)
    with pytest.raises(IndexWriteError):
        put(9000)  # RocksDB does not recover by itself: it must be reopened
    index.reopen()
    assert index.failure is None
    put(9001)
    assert (9001, 90010) in part.epochs() and (1, 10) in part.epochs()
    index.close()
    assert os.path.isdir(small_fs / "index")


def test_reads_while_the_index_is_reopened_get_a_storage_error_never_a_500(
    tmp_path: Path,
) -> None:
    """The 30-minute soak (seed 2911): the index was reopened in a worker thread while the
    event loop served followers' fetches from it, and rocksdict raised "Already mutably
    borrowed" (a 500). A read meanwhile is answered KAFKA_STORAGE_ERROR, retriable."""
    index = LogIndex(str(tmp_path / "index"))
    part = index.partition("00000000-0000-0000-0000-000000000001", 0)
    for chunk in range(40):  # a memtable worth flushing: the close takes a while
        batch = index.batch()
        for n in range(chunk * 5000, (chunk + 1) * 5000):
            part.put_frame(batch, n, 0, n * 100, 100, 1, n)
        index.write(batch)
    batch = index.batch()
    for epoch in range(10):
        part.put_epoch(batch, epoch, epoch * 10)
    index.write(batch)
    failures: list[BaseException] = []
    for _ in range(5):
        index._store.failure = IndexWriteError("No space left on device")  # as a full disk
        reopening = threading.Thread(target=index.reopen)
        reopening.start()
        while reopening.is_alive():
            try:
                part.frame_floor(123_456)
            except Exception as exc:
                failures.append(exc)
        reopening.join()
        assert index.failure is None
    assert part.end_offset_for_epoch(7, 1_000_000) == (7, 80)
    floor = part.frame_floor(123_456)
    assert floor is not None and floor.base_offset == 123_456
    wrong = [f for f in failures if not isinstance(f, TierlogError)]
    assert wrong == [], wrong[:3]
    assert all(f.code is ErrorCode.KAFKA_STORAGE_ERROR for f in failures)
    index.close()
