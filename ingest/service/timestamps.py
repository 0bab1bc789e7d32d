"""Which record timestamps a topic accepts, for both protocols.

Every stored timestamp is in [0, MAX_TIMESTAMP_MS] (HTTP's rule since the start: Delta,
Parquet and the console read them as dates). Under message.timestamp.type=CreateTime the
topic's message.timestamp.after.max.ms and message.timestamp.before.max.ms bound how far a
record's time may lie ahead of or behind the broker's clock (Kafka's KIP-937 names and
defaults: 1 hour ahead, any time behind). LogAppendTime topics keep the broker's time, so
only the range applies to what the producer sent. A refusal is INVALID_TIMESTAMP (HTTP 422)
naming the first offending record's index (`record_index`), as Kafka's record_errors do.

Kafka sends each time as base + delta: `combine` adds them without the int64 wrap that once
stored now+2^62 or -2^63 as an ordinary date."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from logformat.arrow_records import MAX_TIMESTAMP_MS
from logformat.errors import ErrorCode, TierlogError
from metadata.configs import TopicConfig

Ints = npt.NDArray[np.int64]


def _refused(index: int, stamp: int, lo: int, hi: int, why: str) -> TierlogError:
    return TierlogError(
        ErrorCode.INVALID_TIMESTAMP,
        f"record {index}: timestamp {stamp} is out of range [{lo}, {hi}] ({why})",
        record_index=index,
    )


_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def combine(base: int, deltas: Ints) -> Ints:
    """Kafka's base timestamp plus each record's delta, refused where the sum leaves the
    range. The bounds are moved onto the deltas (in Python ints, clipped to int64), so
    nothing is added before it is known not to wrap."""
    lo = max(-base, _INT64_MIN)
    hi = min(MAX_TIMESTAMP_MS - base, _INT64_MAX)
    bad = (deltas < lo) | (deltas > hi)
    if bad.any():
        i = int(np.argmax(bad))
        stamp = base + int(deltas[i])  # Python ints: the true sum, as the client meant it
        raise _refused(i, stamp, 0, MAX_TIMESTAMP_MS, "timestamps are dates from 1970 to 9999")
    return base + deltas


def _bounds(config: TopicConfig, now_ms: int) -> tuple[tuple[int, str], tuple[int, str]]:
    """(lowest, why), (highest, why) of the times the topic accepts now."""
    low = (0, "timestamps are dates from 1970 to 9999")
    high = (MAX_TIMESTAMP_MS, low[1])
    if config.message_timestamp_type != "CreateTime":
        return low, high
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    if now_ms - before > 0:
        low = (now_ms - before, f"message.timestamp.before.max.ms={before}")
    if now_ms + after < MAX_TIMESTAMP_MS:
        high = (now_ms + after, f"message.timestamp.after.max.ms={after}")
    return low, high


def check_timestamps(stamps: Ints, config: TopicConfig, now_ms: int) -> None:
    """The range, and under CreateTime the topic's skew bounds around `now_ms`."""
    (lo, why_lo), (hi, why_hi) = _bounds(config, now_ms)
    bad = (stamps < lo) | (stamps > hi)
    if bad.any():
        i = int(np.argmax(bad))
        stamp = int(stamps[i])
        raise _refused(i, stamp, lo, hi, why_lo if stamp < lo else why_hi)
