"""Small per-broker file systems a test can fill: each broker's data dir is a size-limited
tmpfs of its own (we run as root), so ENOSPC hits one broker's segments, index and fsyncs at
once, as on a real full disk, and freeing the filler gives the space back."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path

FILLER = "zz-disk-filler"  # not a partition dir (no "-<n>" suffix a broker would load)
_CHUNKS = (1 << 20, 1 << 12, 1)


class MountError(RuntimeError):
    """The small file system could not be mounted (not root, no mount permission)."""


def mount_small(path: Path, size_mib: int) -> None:
    """A tmpfs of `size_mib` MiB at `path` (created if missing)."""
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mib}m,mode=0755", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise MountError(f"mount -t tmpfs failed: {done.stderr.strip()}")


def unmount(path: Path) -> None:
    subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def fill(path: Path) -> int:
    """Fill `path`'s file system to the last byte (a file of its own); returns its size."""
    written = 0
    fd = os.open(path / FILLER, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for chunk in _CHUNKS:
            block = b"\0" * chunk
            with contextlib.suppress(OSError):  # ENOSPC: on to the next, smaller chunk
                while True:
                    n = os.write(fd, block)
                    written += n
                    if n < chunk:
                        break
    finally:
        os.close(fd)
    return written


def free(path: Path) -> None:
    (path / FILLER).unlink(missing_ok=True)
