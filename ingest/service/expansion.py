"""What a produce request may decode to, for both protocols: the broker's expansion limits
(--max-request-records, --max-request-decoded-bytes, --max-compression-ratio), enforced by
logformat/expansion.py's checks. HTTP measures an Arrow body's declared sizes before decoding;
a Kafka batch declares none, so its decompressor is given `decode_budget`: it stops one byte
past it, and a small compressed batch never becomes a big one in memory (a 17 KiB zstd bomb
is refused after 1.7 MiB, not 128 MiB)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from logformat.expansion import RATIO_EXEMPT_BYTES, ExpansionLimits, check_decoded

if TYPE_CHECKING:
    from ingest.broker_config import BrokerConfig

__all__ = ["check_decoded", "decode_budget", "expansion_limits"]


def expansion_limits(config: BrokerConfig) -> ExpansionLimits:
    return ExpansionLimits(
        config.max_request_records, config.max_request_decoded_bytes, config.max_compression_ratio
    )


def decode_budget(wire_bytes: int, limits: ExpansionLimits) -> int:
    """The most bytes `wire_bytes` of compressed data may decode to: the byte limit, and
    past RATIO_EXEMPT_BYTES the ratio cap (the rule check_decoded applies afterwards)."""
    by_ratio = limits.max_ratio * max(1, wire_bytes)
    if by_ratio >= limits.max_decoded_bytes:  # also an infinite ratio: no cap
        return limits.max_decoded_bytes
    return min(limits.max_decoded_bytes, max(RATIO_EXEMPT_BYTES, int(by_ratio)))
