"""Freed memory goes back to the system: large buffers are mapped, not carved from arenas.

glibc raises its mmap threshold to the size of every mapped block it frees (up to 32 MiB), so
after the first big request body, later ones of the same size come from the heap arenas of
whichever threads decoded them, and stay there once freed: a node that scanned a few 24 MB
JSON bodies on its worker threads kept hundreds of MiB it no longer used. A fixed threshold
keeps every block of 1 MiB or more mapped, so freeing it returns it at once (Redis and many
JVM launchers tune the same knobs). Elsewhere than glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

logger = logging.getLogger("tierlog.process_memory")

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1 << 20  # blocks at least this big are mapped, and unmapped when freed
TRIM_THRESHOLD = 8 << 20  # free heap top beyond this is handed back


def return_freed_memory() -> bool:
    """Fix glibc's thresholds for this process; False where the C library is not glibc."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    ok = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
    if not ok:
        logger.warning("mallopt refused the memory thresholds")
    return ok
