"""Producer and consumer settings: Kafka's names and defaults, checked once up front."""

from __future__ import annotations

from dataclasses import dataclass

ACKS = {"all": "all", "-1": "all", "1": "1", "0": "0"}
COMPRESSION = (None, "none", "zstd", "lz4")
OFFSET_RESETS = ("earliest", "latest", "none")
ASSIGNORS = (None, "range", "roundrobin", "sticky", "cooperative-sticky", "uniform")


def _positive(name: str, value: float, allow_zero: bool = False) -> None:
    if value < 0 or (value == 0 and not allow_zero):
        raise ValueError(f"{name} must be {'>= 0' if allow_zero else '> 0'}, got {value}")


@dataclass(frozen=True)
class ProducerConfig:
    acks: str | int = "all"
    # The linger_ms / batch_size trade-off: a batch is sent when it holds batch_size bytes,
    # or linger_ms after its first record, or at once on flush(); while its leader has
    # max_in_flight requests out it keeps filling. Larger values mean fewer, bigger requests
    # (throughput: one HTTP produce request costs the broker ~2 ms whatever its size) and
    # more delay for a lone record; smaller values the reverse. linger_ms is Kafka's 5;
    # batch_size is 256 KiB (~2,000 records of 100 B), not Kafka's 16 KiB, for that cost.
    linger_ms: float = 5
    batch_size: int = 256 * 1024
    max_request_size: int = 1048576
    compression_type: str | None = None
    # None: on unless acks or retries rule it out, as in Kafka 3+.
    enable_idempotence: bool | None = None
    # Requests in flight per leader (Kafka's max.in.flight.requests.per.connection): at
    # most 5 with idempotence, the batches a leader remembers per producer and partition.
    max_in_flight: int = 5
    retries: int = 2**31 - 1
    retry_backoff_ms: int = 100
    retry_backoff_max_ms: int = 1000
    request_timeout_ms: int = 30000
    delivery_timeout_ms: int = 120000
    max_block_ms: int = 60000
    buffer_memory: int = 32 * 1024 * 1024
    metadata_max_age_ms: int = 300000

    def __post_init__(self) -> None:
        acks = ACKS.get(str(self.acks))
        if acks is None:
            raise ValueError(f"acks must be 'all', -1, 1 or 0; got {self.acks!r}")
        object.__setattr__(self, "acks", acks)
        idempotent = self.enable_idempotence
        if idempotent is None:
            idempotent = acks == "all" and self.retries > 0 and self.max_in_flight <= 5
        elif idempotent and (acks != "all" or self.retries <= 0):
            raise ValueError("enable_idempotence needs acks='all' and retries > 0")
        object.__setattr__(self, "enable_idempotence", idempotent)
        if self.compression_type not in COMPRESSION:
            raise ValueError(
                f"compression_type must be zstd, lz4 or none; got {self.compression_type!r}"
            )
        if not 1 <= self.max_in_flight <= (5 if idempotent else 1000):
            raise ValueError("max_in_flight must be 1..5 with idempotence (>= 1 otherwise)")
        _positive("linger_ms", self.linger_ms, allow_zero=True)
        _positive("batch_size", self.batch_size)
        _positive("max_request_size", self.max_request_size)
        _positive("retries", self.retries, allow_zero=True)
        _positive("retry_backoff_ms", self.retry_backoff_ms, allow_zero=True)
        _positive("request_timeout_ms", self.request_timeout_ms)
        _positive("max_block_ms", self.max_block_ms, allow_zero=True)
        _positive("buffer_memory", self.buffer_memory)
        if self.delivery_timeout_ms < self.linger_ms + self.request_timeout_ms:
            raise ValueError("delivery_timeout_ms must be >= linger_ms + request_timeout_ms")

    @property
    def compression(self) -> str | None:
        return None if self.compression_type in (None, "none") else self.compression_type


@dataclass(frozen=True)
class ConsumerConfig:
    group_id: str | None = None
    auto_offset_reset: str = "latest"
    enable_auto_commit: bool = True
    auto_commit_interval_ms: int = 5000
    fetch_max_wait_ms: int = 500
    max_partition_fetch_bytes: int = 1048576
    max_poll_records: int = 500
    max_poll_interval_ms: int = 300000
    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 3000  # until the group says otherwise
    group_assignor: str | None = None
    request_timeout_ms: int = 30000
    retry_backoff_ms: int = 100
    metadata_max_age_ms: int = 300000
    max_concurrent_fetches: int = 64

    def __post_init__(self) -> None:
        if self.auto_offset_reset not in OFFSET_RESETS:
            raise ValueError(
                "auto_offset_reset must be earliest, latest or none; "
                f"got {self.auto_offset_reset!r}"
            )
        if self.group_assignor not in ASSIGNORS:
            raise ValueError(f"unknown group_assignor {self.group_assignor!r}")
        for name in (
            "auto_commit_interval_ms",
            "max_partition_fetch_bytes",
            "max_poll_records",
            "max_poll_interval_ms",
            "session_timeout_ms",
            "heartbeat_interval_ms",
            "request_timeout_ms",
            "max_concurrent_fetches",
        ):
            _positive(name, getattr(self, name))
        _positive("fetch_max_wait_ms", self.fetch_max_wait_ms, allow_zero=True)
        if self.fetch_max_wait_ms >= self.request_timeout_ms:
            raise ValueError("fetch_max_wait_ms must be below request_timeout_ms")
