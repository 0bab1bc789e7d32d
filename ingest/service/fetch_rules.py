"""How much one fetch may answer, for both protocols (Kafka's fetch.max.bytes rules).

- The response is capped at the broker's fetch.max.bytes (--fetch-max-bytes, Kafka's 55 MiB),
  whatever the request asks: a Kafka Fetch's max_bytes and an HTTP fetch's max_bytes are
  lowered to it.
- Within a Kafka Fetch each partition gets at most its partition_max_bytes and what is left
  of the response's budget. As in Kafka, the first partition with records may exceed both by
  its first batch (so a consumer always makes progress), and once the budget is spent the
  remaining partitions are answered without records (their watermarks only).
- A partition named twice in one Fetch is served once (Kafka keys the request's partitions
  by topic-partition: the later entry's fields win, the first one's position stays).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from ingest.broker_config import BrokerConfig

T = TypeVar("T")


def capped_max_bytes(asked: int, config: BrokerConfig) -> int:
    return max(1, min(asked, config.data_limits.fetch_max_bytes))


def merged(entries: Iterable[tuple[str, int, T]]) -> list[tuple[str, list[tuple[int, T]]]]:
    """(topic, partition, entry) in request order -> per topic (in order of first mention),
    its partitions, each once: a later duplicate's entry replaces the earlier one."""
    topics: dict[str, dict[int, T]] = {}
    for topic, partition, entry in entries:
        topics.setdefault(topic, {})[partition] = entry
    return [(topic, list(parts.items())) for topic, parts in topics.items()]


class ResponseBudget:
    """The bytes a Fetch response may still carry, spent partition by partition."""

    def __init__(self, asked: int, config: BrokerConfig) -> None:
        self.left = capped_max_bytes(asked, config)

    def limit(self, partition_max_bytes: int) -> int:
        """The max bytes to read for the next partition; 0: read nothing."""
        if self.left <= 0 or partition_max_bytes <= 0:
            return 0
        return min(partition_max_bytes, self.left)

    def spend(self, nbytes: int) -> None:
        self.left -= nbytes
