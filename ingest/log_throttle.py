"""Log lines that can repeat many times a second (a fetch loop meeting the same condition on
every round) are written at most once per interval per key, saying how many were left out:
one stuck partition must not fill the disk or hide every other line."""

from __future__ import annotations

import time
from collections.abc import Hashable


class LogThrottle:
    def __init__(self, every_s: float, max_keys: int = 1024) -> None:
        self.every_s = every_s
        self._max_keys = max_keys
        self._last: dict[Hashable, tuple[float, int]] = {}  # key → (last written, skipped since)

    def allow(self, key: Hashable) -> int | None:
        """None: leave this line out. Else write it: the number of lines left out since the
        last one written for `key`."""
        now = time.monotonic()
        last, skipped = self._last.get(key, (-self.every_s, 0))
        if now - last < self.every_s:
            self._last[key] = (last, skipped + 1)
            return None
        if key not in self._last and len(self._last) >= self._max_keys:
            self._last.clear()  # bounded; at worst a line is written once more
        self._last[key] = (now, 0)
        return skipped
