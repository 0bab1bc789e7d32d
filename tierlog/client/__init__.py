"""The Python client: Producer, Consumer and Admin over tierlog's HTTP API.

It imports only the shared record format (logformat) and third-party libraries, never
server code (an import-linter contract checks it), so applications need no server packages.
"""

from tierlog.client.admin import (
    Admin,
    BrokerInfo,
    GroupDescription,
    GroupListing,
    GroupOffset,
    MemberDescription,
    OffsetReset,
    PartitionDescription,
    TopicDescription,
    TopicListing,
)
from tierlog.client.consumer import Consumer
from tierlog.client.consumer_records import ConsumerRecord
from tierlog.client.errors import (
    ApiError,
    ClientClosedError,
    ClientTimeoutError,
    CommitFailedError,
    NetworkError,
    NoOffsetForPartition,
    OffsetOutOfRange,
)
from tierlog.client.producer import Producer
from tierlog.client.rebalance import ConsumerRebalanceListener
from tierlog.client.types import (
    OffsetAndMetadata,
    OffsetAndTimestamp,
    RecordMetadata,
    TopicPartition,
)

__all__ = [
    "Admin",
    "ApiError",
    "BrokerInfo",
    "ClientClosedError",
    "ClientTimeoutError",
    "CommitFailedError",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "GroupDescription",
    "GroupListing",
    "GroupOffset",
    "MemberDescription",
    "NetworkError",
    "NoOffsetForPartition",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "OffsetOutOfRange",
    "OffsetReset",
    "PartitionDescription",
    "Producer",
    "RecordMetadata",
    "TopicDescription",
    "TopicListing",
    "TopicPartition",
]
