"""What a partition's leader knows of it for describe: its offsets, its hot bytes, and how far
tiering lags in bytes and seconds (the sealed segments above the cold tier's end, as
Kafka's RemoteCopyLagBytes counts them; the active segment is tiered once it rolls). Computed
where the partition is led: by describe itself, or by /internal/topics/{t}/led for the other
nodes' describe."""

from __future__ import annotations

import time
from typing import Any

from ingest.replication.partition import Partition
from ingest.tiered.tier_status import TierStatus
from ingest.tiered.untiered_bound import Untiered


def led_stats(state: Partition, tiering: bool, tier: TierStatus | None) -> dict[str, Any]:
    """`tiering`: the topic has a cold tier; `tier`: what the manifest says (None: unread)."""
    segments = state.log.segments()
    stats: dict[str, Any] = {
        "log_start_offset": state.log.log_start_offset,
        "high_watermark": state.high_watermark,
        "log_end_offset": state.log.log_end_offset,
        "hot_bytes": sum(s.size for s in segments),
        "tiering_lag_bytes": 0,
        "tiering_lag_seconds": 0.0,
    }
    if tiering:
        if tier is None:  # the manifest could not be read: unknown, not zero
            stats["tiering_lag_bytes"] = stats["tiering_lag_seconds"] = None
        else:
            waiting = Untiered(segments, tier.tiered_end)
            stats["tiering_lag_bytes"] = waiting.bytes
            stats["tiering_lag_seconds"] = round(waiting.age_s(int(time.time() * 1000)), 3)
    return stats
