"""A byte rate over a sliding window of samples, and the throttle time that brings it back
under a quota: Kafka's `Rate` over `SampledStat` with `quota.window.num` x `quota.window.size`
samples, and `QuotaUtils.throttleTime`.

Pure arithmetic on a clock the caller passes in, so it is unit-tested without sleeping.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

DEFAULT_SAMPLES = 11  # Kafka's quota.window.num
DEFAULT_SAMPLE_S = 1.0  # Kafka's quota.window.size.seconds


@dataclass
class RateWindow:
    """Bytes recorded into fixed, aligned samples of `sample_s` seconds; the last `samples`
    samples (the current one included) make the window."""

    samples: int = DEFAULT_SAMPLES
    sample_s: float = DEFAULT_SAMPLE_S
    # (sample index, bytes), oldest first; only samples that saw bytes are kept.
    _buckets: deque[list[int]] = field(default_factory=deque)

    def record(self, nbytes: int, now: float) -> None:
        index = self._index(now)
        self._purge(index)
        if self._buckets and self._buckets[-1][0] == index:
            self._buckets[-1][1] += nbytes
        else:
            self._buckets.append([index, nbytes])

    def total(self, now: float) -> int:
        self._purge(self._index(now))
        return sum(b for _, b in self._buckets)

    def window_s(self, now: float) -> float:
        """The time the recorded bytes were spread over: from the start of the oldest sample
        still held to now, at least one sample long.

        Kafka floors this at (samples - 1) sample lengths, which lets a new or idle client
        send ten seconds' worth of quota in one burst; one sample's floor keeps bursts to
        about a second's worth, so the rate over any 10 s stays near the quota."""
        self._purge(self._index(now))
        if not self._buckets:
            return self.sample_s
        oldest_start = self._buckets[0][0] * self.sample_s
        return max(self.sample_s, now - oldest_start)

    def rate(self, now: float) -> float:
        """Bytes per second over the window."""
        return self.total(now) / self.window_s(now)

    def throttle_s(self, quota: float, now: float) -> float:
        """How long no more bytes must arrive for the rate to fall back to `quota` (0 when it
        is not above it): Kafka's (rate - quota) / quota x window, i.e. until the window has
        grown to total / quota, measured from the oldest sample's real start (the floor only
        shapes the rate). Capped like Kafka's at the whole window: by then every byte counted
        now has left it."""
        cap = self.samples * self.sample_s
        if quota <= 0:
            return cap
        total = self.total(now)
        if total / self.window_s(now) <= quota:
            return 0.0
        elapsed = now - self._buckets[0][0] * self.sample_s
        return min(cap, max(0.0, total / quota - elapsed))

    def idle(self, now: float) -> bool:
        self._purge(self._index(now))
        return not self._buckets

    def _index(self, now: float) -> int:
        return math.floor(now / self.sample_s)

    def _purge(self, current: int) -> None:
        oldest_kept = current - self.samples + 1
        while self._buckets and self._buckets[0][0] < oldest_kept:
            self._buckets.popleft()
