"""The producer's partitioner: Kafka's default, so a key lands where a Kafka client puts it.

Explicit partition wins; a key goes to `toPositive(murmur2(key)) % n` (logformat's murmur2,
bit-for-bit Kafka's); null keys stick to one partition per topic until that partition's batch
is closed (full, or sent after linger_ms), then move to another (KIP-480 / KIP-794).
"""

from __future__ import annotations

import random
import threading

from logformat.partitioner import StickyPartitioner, murmur2, partition_for_key, to_positive

# The switch is driven by batch completion, not by a record count.
_NEVER = 2**62
# Keys repeat (users, devices, orders): their hashes are remembered, up to this many.
HASH_CACHE_SIZE = 1 << 16


class Partitioner:
    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()
        self._sticky: dict[str, StickyPartitioner] = {}
        self._lock = threading.Lock()
        self._hashes: dict[bytes, int] = {}

    def _for(self, topic: str) -> StickyPartitioner:
        sticky = self._sticky.get(topic)
        if sticky is None:
            with self._lock:
                sticky = self._sticky.setdefault(
                    topic, StickyPartitioner(records_per_stick=_NEVER, rng=self._rng)
                )
        return sticky

    def partition(
        self, topic: str, key: bytes | None, num_partitions: int, explicit: int | None = None
    ) -> int:
        if explicit is not None:
            if not 0 <= explicit < num_partitions:
                raise ValueError(
                    f"partition {explicit} does not exist: {topic!r} has {num_partitions}"
                )
            return explicit
        if key is not None:
            return partition_for_key(key, num_partitions)
        return self._for(topic).partition(num_partitions)

    def for_key(self, key: bytes, num_partitions: int) -> int:
        """`partition_for_key`, with recent keys' hashes remembered."""
        h = self._hashes.get(key)
        if h is None:
            h = to_positive(murmur2(key))
            if len(self._hashes) >= HASH_CACHE_SIZE:
                self._hashes.clear()
            self._hashes[key] = h
        return h % num_partitions

    def sticky(self, topic: str, num_partitions: int) -> int:
        """The partition for a null-key record (KIP-480)."""
        return self._for(topic).partition(num_partitions)

    def batch_closed(self, topic: str, partition: int) -> None:
        """A batch of `topic`/`partition` will take no more records: if null keys were
        sticking to it, the next null-key record picks another partition."""
        sticky = self._sticky.get(topic)
        if sticky is not None and sticky.current == partition:
            sticky.on_batch_done()
