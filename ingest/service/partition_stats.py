"""What a partition's leader knows of it for describe: its offsets, its hot bytes, and how far
tiering lags in bytes and seconds (the sealed segments above the cold tier's end, as
Kafka's RemoteCopyLagBytes counts them; the active segment is tiered once it rolls). Computed
where the partition is led: by describe itself, or by /internal/topics/{t}/led for the other
nodes' describe."""

from __future__ import annotations

import time
from typing import Any

from ingest.log.log_types import SegmentInfo
from ingest.replication.partition import Partition
from ingest.tiered.tier_status import TierStatus
from ingest.tiered.untiered_bound import Untiered


def open_segment_records(segments: list[SegmentInfo], hw: int, tiered_end: int | None) -> int:
    """Records of the tiering lag that sit in the active (open) segment: they wait for it to
    roll (segment.ms / segment.bytes), not for the tiering worker, so the sealed lag in bytes
    and seconds does not count them (issue 27 S8: "2 records" beside "0 bytes, 0 s")."""
    active = segments[-1] if segments and not segments[-1].sealed else None
    if active is None:
        return 0
    return max(0, hw - max(active.base_offset, tiered_end or 0))


def led_stats(
    state: Partition, tiering: bool, tier: TierStatus | None, stable: int | None
) -> dict[str, Any]:
    """`tiering`: the topic has a cold tier; `tier`: what the manifest says (None: unread);
    `stable`: the last stable offset (transactions; None: unknown)."""
    segments = state.log.segments()
    stats: dict[str, Any] = {
        "log_start_offset": state.log.log_start_offset,
        "high_watermark": state.high_watermark,
        "last_stable_offset": stable,
        "log_end_offset": state.log.log_end_offset,
        "hot_bytes": sum(s.size for s in segments),
        "tiering_lag_bytes": 0,
        "tiering_lag_seconds": 0.0,
        "tiering_lag_open_records": 0,
    }
    if tiering:
        if tier is None:  # the manifest could not be read: unknown, not zero
            stats["tiering_lag_bytes"] = stats["tiering_lag_seconds"] = None
            stats["tiering_lag_open_records"] = None
        else:
            waiting = Untiered(segments, tier.tiered_end)
            stats["tiering_lag_bytes"] = waiting.bytes
            stats["tiering_lag_seconds"] = round(waiting.age_s(int(time.time() * 1000)), 3)
            hw = state.high_watermark
            stats["tiering_lag_open_records"] = open_segment_records(segments, hw, tier.tiered_end)
    return stats
