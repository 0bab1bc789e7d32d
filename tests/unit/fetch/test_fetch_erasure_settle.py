"""An erasure is `done` only once no reader can still serve a file list cached before its cold
rewrite. Readers are told at once (NOTIFY → ColdIndex.invalidate_all) and trust their cached
windows only while their listener holds; `done` (metadata/erasures.py's cold_done) waits just
long enough for a listener whose connection died silently to stop trusting them.

One manual clock drives the index and the rule: a reader caches a window holding a replaced
file just before the rewrite finishes; at every moment cold_done answers True, that window must
be unusable, whether the NOTIFY arrived or was lost with a dead connection."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from fetch.cold import cold_index
from fetch.cold.cold_index import ColdIndex, _Window
from metadata.erasures import READER_LISTEN_DEAD_S, Erasure, cold_done
from metadata.types import ColdFile, PartitionRecord, TopicIdPartition

TP = TopicIdPartition("t-id", 0)
PART = PartitionRecord("t", "t-id", 0, 1, 0, [1], [1], 0)
REPLACED = cast(ColdFile, type("F", (), {"base_offset": 0, "last_offset": 99})())


class Clock:
    def __init__(self) -> None:
        self.s = 1_000.0

    def monotonic(self) -> float:
        return self.s


@pytest.fixture(name="clock")
def clock_fixture(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(cold_index.time, "monotonic", clock.monotonic)
    return clock


def _erasure(finished_at_ms: int) -> Erasure:
    now = datetime.now(UTC)
    cold = {"0": {"done": True, "finished_at_ms": finished_at_ms}}
    return Erasure("e", "t-id", "t", "running", None, "User:a", now, now, None, 1, {}, {}, cold)


def _index(listening: Callable[[], bool]) -> ColdIndex:
    index = ColdIndex(cast(Any, None), cast(Any, None), listening=listening)  # node defaults
    index._windows[TP] = _Window([REPLACED])  # cached just before the rewrite's swap
    return index


def _usable(index: ColdIndex) -> bool:
    return index._from_window(index._windows[TP], 10) is not None


def test_a_notified_rewrite_spoils_every_cached_window_at_once(clock: Clock) -> None:
    index = _index(lambda: True)
    assert _usable(index) and index.peek_after(TP, REPLACED, 1) == []
    index.invalidate_all()  # the NOTIFY of the erasure's cold commit
    assert not _usable(index)


def test_a_window_whose_query_began_before_the_notify_is_stale() -> None:
    class Queries:
        def __init__(self) -> None:
            self.index: ColdIndex | None = None

        def window(self, tp: TopicIdPartition, offset: int, ahead: int) -> list[ColdFile]:
            assert self.index is not None
            self.index.invalidate_all()  # told while the (old) answer is on its way
            return [REPLACED]

    async def go() -> None:
        q = Queries()
        with ThreadPoolExecutor(1) as pool:
            index = ColdIndex(cast(Any, q), pool)
            q.index = index
            assert await index.file_at(TP, 10) is REPLACED  # this read may use it
            assert not _usable(index)  # the next one asks again

    asyncio.run(go())


def test_no_cached_window_is_trusted_while_the_listener_is_down(clock: Clock) -> None:
    up = [False]
    index = _index(lambda: up[0])
    assert not _usable(index)
    up[0] = True
    assert _usable(index)


@pytest.mark.parametrize("notified", [True, False], ids=["notify-arrives", "notify-lost"])
def test_done_never_while_a_window_from_before_the_rewrite_is_usable(
    clock: Clock, notified: bool
) -> None:
    # notify-lost: the listener's connection died silently just before the rewrite; its
    # keepalives notice within READER_LISTEN_DEAD_S, and only then does it stop trusting.
    died_at = clock.s
    index = _index(lambda: notified or clock.s < died_at + READER_LISTEN_DEAD_S)
    finished_ms = 5_000_000  # the wall clock when the rewrite finished (cached window: before)
    if notified:
        index.invalidate_all()
    saw_done = False
    for step in range(0, 30_000, 50):  # 30 s after the rewrite, in 50 ms steps
        clock.s = died_at + step / 1000
        if cold_done(_erasure(finished_ms), [PART], tiered=True, now_ms=finished_ms + step):
            saw_done = True
            assert not _usable(index), f"done {step} ms after the rewrite, a stale window serves"
    assert saw_done  # and the request does end


def test_done_follows_the_rewrite_within_seconds_not_the_cache_ttl() -> None:
    finished_ms = 5_000_000
    first = next(
        step
        for step in range(0, 30_000, 50)
        if cold_done(_erasure(finished_ms), [PART], tiered=True, now_ms=finished_ms + step)
    )
    assert first < cold_index.READER_FILE_LIST_TTL_S * 1000
