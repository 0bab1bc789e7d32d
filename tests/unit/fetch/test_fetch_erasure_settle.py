"""An erasure is `done` only once no reader can still serve a file list cached before its cold
rewrite: the fetch node's window of cold files (fetch/cold/cold_index.py) and the settle rule
(metadata/erasures.py's cold_done) share one setting, so they cannot drift apart.

One manual clock drives both: a reader caches a window holding a replaced file just before the
rewrite finishes; at every moment cold_done answers True, that window must be unusable."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import pytest

from fetch.cold import cold_index
from fetch.cold.cold_index import ColdIndex, _Window
from metadata.erasures import Erasure, cold_done
from metadata.types import ColdFile, PartitionRecord, TopicIdPartition

TP = TopicIdPartition("t-id", 0)


class Clock:
    def __init__(self) -> None:
        self.s = 1_000.0

    def monotonic(self) -> float:
        return self.s


def _erasure(finished_at_ms: int) -> Erasure:
    now = datetime.now(UTC)
    cold = {"0": {"done": True, "finished_at_ms": finished_at_ms}}
    return Erasure("e", "t-id", "t", "running", None, "User:a", now, now, None, 1, {}, {}, cold)


def test_done_never_while_a_window_from_before_the_rewrite_is_usable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = Clock()
    monkeypatch.setattr(cold_index.time, "monotonic", clock.monotonic)
    index = ColdIndex(cast(Any, None), cast(Any, None))  # the defaults the fetch node runs
    replaced = cast(ColdFile, type("F", (), {"base_offset": 0, "last_offset": 99})())
    index._windows[TP] = _Window([replaced])  # cached just before the rewrite's swap
    part = PartitionRecord("t", "t-id", 0, 1, 0, [1], [1], 0)
    finished_ms = 5_000_000  # the wall clock when the rewrite finished (cached window: before)
    saw_done = False
    for step in range(0, 30_000, 50):  # 30 s after the rewrite, in 50 ms steps
        clock.s = 1_000.0 + step / 1000
        usable = index._from_window(index._windows[TP], 10) is not None
        if cold_done(_erasure(finished_ms), [part], tiered=True, now_ms=finished_ms + step):
            saw_done = True
            assert not usable, f"done {step} ms after the rewrite, a stale window still serves"
    assert saw_done  # and the request does end
