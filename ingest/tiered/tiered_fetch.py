"""Fetch and list-offsets across the hot and the cold tier (docs/design.md §4, §5).

The broker reads its own log for offsets at or above its local log start; below it, a
`ColdReader` (implemented in fetch/, handed in by the composition root, tierlog/cli/main.py)
serves the records from the topic's Parquet files in S3. ingest never imports fetch: the
Protocol in cluster/read_contract.py is the seam.

The seam between tiers: local retention deletes only segments that are entirely tiered, so
the cold range always reaches the hot start (cold end >= hot start). A fetch below the hot
start is answered from cold files alone and stops at the cold end, a fetch at or above it from
the hot log alone; both answer `next_offset` = last offset returned + 1, so a consumer
following `next_offset` sees every offset exactly once across the seam.
"""

from __future__ import annotations

from cluster.read_contract import ColdRange, ColdReader, FetchResult
from ingest.replication.partition import Partition
from ingest.tiered.fetch_reader import fetch, out_of_range, require_online
from logformat.errors import ErrorCode, TierlogError


async def cold_range_at(
    cold: ColdReader, state: Partition, offset: int | None = None
) -> ColdRange | None:
    """The cold range, re-read from the manifest when the cached one does not hold `offset`
    (the cache may predate the latest tiered file)."""
    rng = await cold.cold_range(state.topic_id, state.partition)
    if offset is not None and (rng is None or not rng.start <= offset < rng.end):
        rng = await cold.cold_range(state.topic_id, state.partition, fresh=True)
    return rng


def log_start(state: Partition, rng: ColdRange | None) -> int:
    """The log start across tiers."""
    hot = state.log.log_start_offset
    return hot if rng is None else min(hot, rng.start)


async def known_start(state: Partition, cold: ColdReader | None) -> int:
    """The log start across tiers as last known: what hot reads report. They must not
    depend on Postgres, so they wait on it (with its deadline) only before the partition's
    cold range was ever read."""
    if cold is None:
        return state.log.log_start_offset
    known = cold.known_range(state.topic_id, state.partition)
    if known is None:
        return await earliest(state, cold)
    return log_start(state, known[0])


async def earliest(state: Partition, cold: ColdReader | None) -> int:
    """The log start across tiers; the last known one when the manifest cannot be read."""
    if cold is None:
        return state.log.log_start_offset
    try:
        rng = await cold.cold_range(state.topic_id, state.partition)
    except TierlogError:
        known = cold.known_range(state.topic_id, state.partition)
        rng = None if known is None else known[0]
    return log_start(state, rng)


async def fetch_tiered(
    state: Partition,
    cold: ColdReader | None,
    offset: int | None,
    max_records: int,
    max_bytes: int,
    wait_ms: int,
) -> FetchResult:
    """One fetch, from whichever tier holds `offset` (None = the log start across tiers)."""
    require_online(state)
    if cold is None:
        start = state.log.log_start_offset
        return await fetch(
            state, start if offset is None else offset, max_records, max_bytes, wait_ms
        )
    hot_start = state.log.log_start_offset
    if offset is None:
        offset = await earliest(state, cold)
    if offset >= hot_start:
        if offset > state.log.log_end_offset:  # quote the whole log, not the hot range
            raise out_of_range(state, offset, await known_start(state, cold))
        try:
            result = await fetch(state, offset, max_records, max_bytes, wait_ms)
        except TierlogError as exc:  # retention raced the read: name the start across tiers
            if exc.code is ErrorCode.OFFSET_OUT_OF_RANGE:
                exc.extra["log_start_offset"] = await known_start(state, cold)
            raise
        return result._replace(log_start_offset=await known_start(state, cold))
    rng = await cold_range_at(cold, state, offset)
    start = log_start(state, rng)
    hw = state.high_watermark
    if rng is None or not rng.start <= offset < rng.end:
        raise below_log_start(state, offset, start, rng)
    got = await cold.read(
        state.topic,
        state.topic_id,
        state.partition,
        offset,
        min(rng.end, hw),
        max_records,
        max_bytes,
    )
    return FetchResult(got.batch, got.next_offset, hw, start)


def below_log_start(
    state: Partition, offset: int, start: int, rng: ColdRange | None
) -> TierlogError:
    """416 naming the earliest offset across tiers (Kafka's OFFSET_OUT_OF_RANGE)."""
    if rng is None:
        return out_of_range(state, offset, start)
    log = state.log
    return TierlogError(
        ErrorCode.OFFSET_OUT_OF_RANGE,
        f"offset {offset} of {state.topic}-{state.partition} is below the log start {start} "
        f"(cold tier [{rng.start}, {rng.end}), hot tier [{log.log_start_offset}, "
        f"{log.log_end_offset}]); the earliest offset is {start}",
        log_start_offset=start,
        log_end_offset=log.log_end_offset,
        high_watermark=state.high_watermark,
        cold={"start": rng.start, "end": rng.end},
    )


async def offset_for_timestamp(
    state: Partition, cold: ColdReader | None, timestamp: int
) -> int | None:
    """Kafka's ListOffsets by time: the earliest offset whose timestamp is >= `timestamp`.
    The cold tier is asked first (as Kafka's RemoteLogManager does): it holds the older
    records, so an answer there is the earliest one."""
    hw = state.high_watermark
    if cold is not None:
        rng = await cold.cold_range(state.topic_id, state.partition)
        if rng is not None:
            found = await cold.offset_for_timestamp(
                state.topic, state.topic_id, state.partition, timestamp
            )
            if found is not None and found < hw:
                return found
    offset = state.log.offset_for_timestamp(timestamp)
    # Kafka answers "no such offset" when every record is older than the timestamp.
    return offset if offset is not None and offset < hw else None
