"""Byte ranges of cold objects in memory: one ranged GET per missing range, shared by every
reader that wants bytes inside it (single flight), kept in an LRU bounded in bytes.

Readers ask for [start, end) of an object and get the cached ranges that cover it, fetching
only the gaps. The prefetcher asks for big aligned ranges ahead of sequential readers, but
only while the budget has room without evicting anything a reader has not consumed yet, so
prefetch never pushes out data about to be read. Bytes a sequential reader is done with are
marked consumed and are the first to go.
"""

from __future__ import annotations

import asyncio
import bisect
from collections import OrderedDict

from fetch.cold import metrics
from fetch.cold.store import RangeStore


class ShortReadError(OSError):
    """The object is shorter than the manifest says (or changed under us)."""


class _Range:
    __slots__ = ("consumed", "end", "future", "key", "prefetched", "start", "used")

    def __init__(self, key: str, start: int, end: int, prefetched: bool) -> None:
        self.key, self.start, self.end = key, start, end
        self.prefetched = prefetched
        self.used = False  # a reader asked for it (counts prefetch hits once)
        self.consumed = False
        self.future: asyncio.Future[bytes] | None = None

    @property
    def size(self) -> int:
        return self.end - self.start


def join_range(pieces: list[tuple[int, bytes]], start: int, end: int) -> bytes:
    """Bytes [start, end) out of fetched pieces that cover it."""
    out = []
    pos = start
    for p_start, data in sorted(pieces, key=lambda p: p[0]):
        p_end = p_start + len(data)
        if p_end <= pos or p_start > pos:
            continue
        take = min(end, p_end)
        out.append(memoryview(data)[pos - p_start : take - p_start])
        pos = take
        if pos >= end:
            break
    if pos < end:
        raise ShortReadError(f"bytes [{pos}, {end}) are missing from the fetched ranges")
    return out[0].tobytes() if len(out) == 1 else b"".join(out)


class RangeCache:
    def __init__(self, store: RangeStore, capacity: int) -> None:
        self._store = store
        self.capacity = capacity
        self.used = 0
        self._by_key: dict[str, list[_Range]] = {}
        self._lru: OrderedDict[int, _Range] = OrderedDict()  # front: evicted first

    # -- lookups -----------------------------------------------------------------------------

    def _plan(self, key: str, start: int, end: int) -> tuple[list[_Range], list[tuple[int, int]]]:
        """Cached ranges covering [start, end), and the gaps between them."""
        entries = self._by_key.get(key, [])
        use: list[_Range] = []
        gaps: list[tuple[int, int]] = []
        pos = start
        while pos < end:
            best = None
            for e in entries:
                if e.start <= pos < e.end and (best is None or e.end > best.end):
                    best = e
            if best is not None:
                use.append(best)
                pos = best.end
                continue
            gap_end = min([e.start for e in entries if e.start > pos] + [end])
            gaps.append((pos, gap_end))
            pos = gap_end
        return use, gaps

    def covered(self, key: str, start: int, end: int) -> bool:
        return not self._plan(key, start, end)[1]

    async def read(
        self, key: str, start: int, end: int, kind: str = "demand"
    ) -> list[tuple[int, bytes]]:
        """(start, bytes) pieces that together cover [start, end) of the object."""
        use, gaps = self._plan(key, start, end)
        cache = "footer" if kind == "footer" else "range"
        (metrics.CACHE_MISSES if gaps else metrics.CACHE_HITS).labels(cache).inc()
        entries = use + [self._start(key, s, e, kind) for s, e in gaps]
        for e in entries:
            self._touch(e)
        # Shielded: one reader going away (a client disconnect) must not cancel a GET that
        # other readers share.
        datas = await asyncio.gather(*(asyncio.shield(self._future(e)) for e in entries))
        self._evict(0, keep_unread=False)
        return [(e.start, d) for e, d in zip(entries, datas, strict=True)]

    def prefetch(self, key: str, start: int, end: int) -> bool:
        """Start fetching the uncached parts of [start, end) if the budget has room; False
        when it had not (nothing started)."""
        _, gaps = self._plan(key, start, end)
        if not gaps:
            return True
        size = sum(e - s for s, e in gaps)
        self._evict(size, keep_unread=True)
        if self.used + size > self.capacity:
            metrics.PREFETCH_SKIPPED.inc()
            return False
        for s, e in gaps:
            self._start(key, s, e, "prefetch")
        return True

    def consume(self, key: str, upto: int) -> None:
        """A sequential reader is past byte `upto` of the object: evict what lies before first."""
        for e in self._by_key.get(key, []):
            if e.end <= upto and not e.consumed:
                e.consumed = True
                if id(e) in self._lru:
                    self._lru.move_to_end(id(e), last=False)

    def forget(self, key: str) -> None:
        """Drop every range of an object (it vanished or changed)."""
        for e in list(self._by_key.get(key, [])):
            self._drop(e)

    # -- entries ------------------------------------------------------------------------------

    def _future(self, e: _Range) -> asyncio.Future[bytes]:
        assert e.future is not None
        return e.future

    def _start(self, key: str, start: int, end: int, kind: str) -> _Range:
        e = _Range(key, start, end, prefetched=kind == "prefetch")
        entries = self._by_key.setdefault(key, [])
        bisect.insort(entries, e, key=lambda x: x.start)
        self._lru[id(e)] = e
        self.used += e.size
        e.future = asyncio.ensure_future(self._get(e, kind))
        e.future.add_done_callback(_retrieve)
        metrics.CACHE_BYTES.labels("range").set(self.used)
        return e

    async def _get(self, e: _Range, kind: str) -> bytes:
        try:
            data = await self._store.get_range(e.key, e.start, e.end)
            if len(data) != e.size:
                raise ShortReadError(
                    f"{e.key}: asked for bytes [{e.start}, {e.end}), got {len(data)}"
                )
        except BaseException:
            metrics.GET_ERRORS.inc()
            self._drop(e)
            raise
        metrics.GET_REQUESTS.labels(kind).inc()
        metrics.GET_BYTES.labels(kind).inc(len(data))
        if kind == "prefetch":
            metrics.PREFETCH_BYTES.inc(len(data))
        return data

    def _touch(self, e: _Range) -> None:
        if id(e) in self._lru:
            self._lru.move_to_end(id(e))
        if e.prefetched and not e.used:
            metrics.PREFETCH_USED_BYTES.inc(e.size)
        e.used = True
        e.consumed = False

    def _drop(self, e: _Range) -> None:
        if self._lru.pop(id(e), None) is None:
            return
        self.used -= e.size
        entries = self._by_key.get(e.key, [])
        if e in entries:
            entries.remove(e)
        if not entries:
            self._by_key.pop(e.key, None)
        metrics.CACHE_BYTES.labels("range").set(self.used)

    def _evict(self, room_for: int, keep_unread: bool) -> None:
        """Drop finished ranges from the LRU front until `room_for` more bytes fit; with
        `keep_unread` (prefetch making room) never a prefetched range no reader has used yet:
        prefetch must not push out what is about to be read."""
        if self.used + room_for <= self.capacity:
            return
        for e in list(self._lru.values()):
            if self.used + room_for <= self.capacity:
                return
            if e.future is None or not e.future.done():
                continue  # in flight: its readers are waiting for it
            if keep_unread and e.prefetched and not e.used and not e.consumed:
                continue
            self._drop(e)


def _retrieve(future: asyncio.Future[bytes]) -> None:
    """Mark a failed prefetch's exception as seen (its reader, if any, gets it too)."""
    if not future.cancelled():
        future.exception()
