"""One segment file of frames, Kafka's LogSegment minus its index files (docs/design.md §3).

A segment is `{base_offset:020d}.log` in a partition directory: frames back to back, written
with os.write on an O_APPEND descriptor. There is no user-space buffer, so once a write returns
the bytes are in the page cache and survive a kill -9 of the broker; fsync happens at seal
(and on close), which is what protects sealed segments against power loss.
"""

from __future__ import annotations

import contextlib
import json
import logging
import mmap
import os
import shutil
import uuid
from collections.abc import Sequence

import google_crc32c

from logformat.frame import (
    CRC_START,
    HEADER,
    HEADER_SIZE,
    MAGIC,
    CorruptFrameError,
    FrameHeader,
    scan,
)

BytesLike = bytes | bytearray | memoryview
log = logging.getLogger(__name__)

SUFFIX = ".log"
PARTITION_FILE = "partition.json"
_NAME_DIGITS = 20
_IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024
_FLAGS = os.O_RDWR | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
NO_TIMESTAMP = -1


def segment_name(base_offset: int) -> str:
    return f"{base_offset:0{_NAME_DIGITS}d}{SUFFIX}"


def list_segments(directory: str) -> list[tuple[int, str]]:
    """(base_offset, path) of the segment files in `directory`, by base offset.

    A `.log` file whose name is not 20 digits is ignored with a warning (never deleted: it is
    not ours to judge).
    """
    found: list[tuple[int, str]] = []
    for name in os.listdir(directory):
        if not name.endswith(SUFFIX):
            continue
        stem = name[: -len(SUFFIX)]
        if len(stem) != _NAME_DIGITS or not stem.isdigit():
            log.warning(
                "ignoring an unparsable segment file", extra={"dir": directory, "file": name}
            )
            continue
        found.append((int(stem), os.path.join(directory, name)))
    found.sort()
    return found


def fsync_dir(directory: str) -> None:
    """Make a created/removed directory entry durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Segment:
    """A file of frames. The owning LocalLog keeps next_offset/max_timestamp/created_ms."""

    __slots__ = (
        "_fd",
        "base_offset",
        "created_ms",
        "max_timestamp",
        "next_offset",
        "path",
        "sealed",
        "size",
    )

    def __init__(self, path: str, base_offset: int, size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.size = size
        self.next_offset = base_offset
        self.created_ms = NO_TIMESTAMP  # wall clock of the first append; -1 while empty
        self.max_timestamp = NO_TIMESTAMP
        self.sealed = False
        self._fd: int | None = None

    @classmethod
    def create(cls, directory: str, base_offset: int) -> Segment:
        path = os.path.join(directory, segment_name(base_offset))
        seg = cls(path, base_offset, 0)
        # O_EXCL: a stale file with this name would mean the caller lost track of the log.
        seg._fd = os.open(path, _FLAGS | os.O_CREAT | os.O_EXCL, 0o644)
        fsync_dir(directory)
        return seg

    @classmethod
    def open(cls, path: str, base_offset: int) -> Segment:
        return cls(path, base_offset, os.stat(path).st_size)

    @property
    def fd(self) -> int:
        # Opened lazily so that old sealed segments cost no descriptor until someone reads them.
        if self._fd is None:
            self._fd = os.open(self.path, _FLAGS)
        return self._fd

    def append(self, bufs: Sequence[BytesLike], total: int) -> int:
        """Write `bufs` (total bytes) at the end in one system call; returns their position."""
        pos = self.size
        fd = self.fd
        try:
            if len(bufs) == 1:
                written = os.write(fd, bufs[0])
            elif len(bufs) <= _IOV_MAX:
                written = os.writev(fd, bufs)  # one syscall, no join copy
            else:
                written = os.write(fd, b"".join(bufs))
            if written < total:  # short write (disk nearly full, signal): finish or fail
                rest = memoryview(b"".join(bufs))[written:]
                while rest:
                    n = os.write(fd, rest)
                    rest = rest[n:]
        except OSError:
            # Never leave a partial group behind: recovery would keep its whole frames although
            # nobody was acknowledged for them, and offsets would no longer match the index.
            try:
                os.ftruncate(fd, pos)
            except OSError:
                log.exception("could not roll back a failed append", extra={"path": self.path})
            raise
        self.size = pos + total
        return pos

    def read(self, position: int, size: int) -> bytes:
        return os.pread(self.fd, size, position)

    def flush(self) -> None:
        if self._fd is not None:
            os.fdatasync(self._fd)

    def seal(self) -> None:
        """fsync, then immutable: from here on the segment may be tiered."""
        os.fsync(self.fd)
        self.sealed = True

    def truncate(self, position: int) -> None:
        os.ftruncate(self.fd, position)
        os.fsync(self.fd)
        self.size = position

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        self.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def read_frames(
        self,
        position: int,
        size: int,
        limit: int,
        offset: int,
        out: list[tuple[FrameHeader, memoryview]],
        expected: int,
    ) -> tuple[int, int, int]:
        """Append to `out` the whole frames in `size` bytes at `position` that hold offsets
        >= offset and start below limit; the first must start at offset `expected`, the rest
        follow densely. Returns (bytes consumed, then 0 if the caller may go on, -1 if it
        reached `limit`, or the size of a frame the read cut short, then the base offset of
        the next frame).

        Every frame appended passed its CRC check (one CRC-32C per frame body), and every
        frame walked its magic and offset check: raises CorruptFrameError (with the offset
        the bad frame should start at) rather than return bytes that rotted on disk."""
        chunk = os.pread(self.fd, size, position)
        view, p, end = memoryview(chunk), 0, len(chunk)
        while end - p >= HEADER_SIZE:
            h = FrameHeader._make(HEADER.unpack_from(chunk, p))
            where = f"at byte {position + p} of segment {self.base_offset}"
            if h.magic != MAGIC:
                raise CorruptFrameError(f"bad magic {where}", offset=expected)
            if h.base_offset != expected or h.record_count <= 0:
                raise CorruptFrameError(
                    f"the frame {where} says offset {h.base_offset}", offset=expected
                )
            if h.base_offset >= limit:
                return p, -1, expected
            if end - p < h.size:
                return p, h.size, expected
            if h.next_offset > offset:
                if google_crc32c.value(chunk[p + CRC_START : p + h.size]) != h.crc:
                    raise CorruptFrameError(f"CRC-32C mismatch {where}", offset=expected)
                out.append((h, view[p : p + h.size]))
            p += h.size
            expected = h.next_offset
        return p, (HEADER_SIZE if p < end else 0), expected

    def mtime_ms(self) -> int:
        return int(os.stat(self.path).st_mtime * 1000)

    def recover(self, *, verify: bool) -> tuple[list[tuple[int, FrameHeader]], int]:
        """Rescan the file, cut it after its last whole valid frame and set next_offset and
        max_timestamp from what remains: (position, header) of each frame, bytes cut."""
        frames, end = self.scan(verify=verify)
        cut = self.size - end
        if cut:
            self.truncate(end)
        self.next_offset = frames[-1][1].next_offset if frames else self.base_offset
        self.max_timestamp = max((h.max_timestamp for _, h in frames), default=NO_TIMESTAMP)
        return frames, cut

    def scan(self, *, verify: bool) -> tuple[list[tuple[int, FrameHeader]], int]:
        """Whole, valid frames from the start of the file and the byte position after them.

        Beyond logformat.frame.scan (short/bad magic/CRC) this also stops at a frame whose base
        offset does not continue the previous one: offsets in a segment are dense.
        """
        if self.size == 0:
            return [], 0
        with (
            open(self.path, "rb") as f,
            mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m,
            memoryview(m) as view,
        ):
            result = scan(view, 0, verify=verify)
        frames: list[tuple[int, FrameHeader]] = []
        expected, end = self.base_offset, result.valid_end
        for pos, header in result.frames:
            if header.base_offset != expected:
                end = pos
                break
            frames.append((pos, header))
            expected = header.next_offset
        return frames, end

    def unlink(self) -> None:
        """Remove the file's name but keep (or first take) a descriptor: readers that hold
        this segment keep reading the old bytes until `close` (see Graveyard)."""
        with contextlib.suppress(OSError):
            _ = self.fd
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def __repr__(self) -> str:
        return f"Segment({self.path!r}, base={self.base_offset}, size={self.size})"


class Graveyard:
    """Segments deleted while lock-free readers may still hold them: their files are unlinked
    at once, their descriptors closed after a grace period (so a descriptor number is never
    reused under a reader in flight)."""

    def __init__(self, grace_s: float = 10.0) -> None:
        self.grace_s = grace_s
        self._dead: list[tuple[float, Segment]] = []

    def bury(self, segments: Sequence[Segment], now: float) -> None:
        for seg in segments:
            seg.unlink()
            self._dead.append((now + self.grace_s, seg))

    def retire(self, segments: Sequence[Segment], now: float) -> None:
        """Like bury, for segments whose files were already replaced (a cleaner swap): their
        names may now be the new files', so nothing is unlinked, only closed later."""
        self._dead.extend((now + self.grace_s, seg) for seg in segments)

    def reap(self, now: float) -> None:
        keep = []
        for deadline, seg in self._dead:
            if deadline <= now:
                seg.close()
            else:
                keep.append((deadline, seg))
        self._dead = keep

    def close_all(self) -> None:
        for _, seg in self._dead:
            seg.close()
        self._dead = []


def read_partition_file(directory: str) -> dict[str, object] | None:
    try:
        with open(os.path.join(directory, PARTITION_FILE)) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def write_partition_file(directory: str, meta: dict[str, object]) -> None:
    """Atomically (tmp + rename + fsyncs), so the file is either whole or absent."""
    path = os.path.join(directory, PARTITION_FILE)
    with open(path + ".tmp", "w") as f:
        json.dump(meta, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)
    fsync_dir(directory)
    fsync_dir(os.path.dirname(os.path.abspath(directory)))


def remove_dir(directory: str) -> None:
    """Rename first (atomic), then delete: a crash mid-way leaves no half log that looks live."""
    if not os.path.isdir(directory):
        return
    doomed = f"{directory}.{uuid.uuid4().hex[:8]}.deleted"
    os.rename(directory, doomed)
    shutil.rmtree(doomed, ignore_errors=True)
