"""tierlog: a Kafka-style commit log whose history lives in object storage.

    from tierlog import Producer, Consumer, Admin

The client classes load on first use (PEP 562), so the `tierlog` command's server roles do
not pay for importing them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tierlog.client import (
        Admin,
        ApiError,
        CommitFailedError,
        Consumer,
        ConsumerRebalanceListener,
        ConsumerRecord,
        NoOffsetForPartition,
        OffsetAndMetadata,
        OffsetAndTimestamp,
        Producer,
        RecordMetadata,
        TopicPartition,
    )

__all__ = [
    "Admin",
    "ApiError",
    "CommitFailedError",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "NoOffsetForPartition",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "Producer",
    "RecordMetadata",
    "TopicPartition",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("tierlog.client"), name)
    raise AttributeError(f"module 'tierlog' has no attribute {name!r}")
