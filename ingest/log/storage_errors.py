"""What a storage failure was, in words an operator acts on, and whether the disk has room
again: a full disk (ENOSPC) heals by itself once space is freed, so a log taken offline by
one is reopened only when there is room to write (else it would go offline again at its
next append, and its retry backoff would grow to a minute for nothing)."""

from __future__ import annotations

import errno
import os
import shutil

from failures.families import StorageError

# Free bytes a data dir needs before a log that failed on a full disk is reopened: room for
# the index's WAL and a few produce batches, so the first appends after healing succeed.
MIN_FREE_BYTES = 1 << 20

DISK_FULL = "disk_full"
NOT_WRITABLE = "not_writable"
IO_ERROR = "io_error"
REASONS = (DISK_FULL, NOT_WRITABLE, IO_ERROR)
_WORDS = {
    DISK_FULL: "disk full (ENOSPC): free space in the data dir; the log comes back by itself",
    NOT_WRITABLE: "data dir not writable (permissions, read-only file system)",
    IO_ERROR: "I/O error on the data dir",
}


class IndexWriteError(OSError):
    """A RocksDB write failed (rocksdict raises a plain Exception; its text names the cause).
    An OSError, with ENOSPC when the disk was full, so callers treat it as the file errors
    it stands for."""

    def __init__(self, message: str) -> None:
        code = errno.ENOSPC if "No space left" in message else errno.EIO
        super().__init__(code, f"index write failed: {message}")


def reason(exc: BaseException) -> str:
    """DISK_FULL, NOT_WRITABLE or IO_ERROR for a storage failure (its cause chain included)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return DISK_FULL
        if isinstance(seen, OSError) and seen.errno in (errno.EPERM, errno.EACCES, errno.EROFS):
            return NOT_WRITABLE
        if "No space left" in str(seen):
            return DISK_FULL
        seen = seen.__cause__ or seen.__context__
    return IO_ERROR


def describe(exc: BaseException) -> str:
    return f"{_WORDS[reason(exc)]}: {exc}"


def storage_error(exc: BaseException) -> StorageError:
    """What a client is answered for a write the storage failed: retriable, and saying why."""
    return StorageError(describe(exc))


def has_room(path: str, need: int = MIN_FREE_BYTES) -> bool:
    """Whether the file system holding `path` has `need` bytes free for an unprivileged
    writer (a missing path: its nearest existing parent)."""
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    try:
        return shutil.disk_usage(path).free >= need
    except OSError:
        return False
