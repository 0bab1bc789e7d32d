"""What the group routes need from the node that mounts them, as plain callables."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Executor
from typing import Any

from metadata.types import TopicNamePartition

# The high watermark of each partition asked for (None: unknown right now).
HighWatermarks = Callable[
    [Sequence[TopicNamePartition]], Awaitable[Mapping[TopicNamePartition, int | None]]
]
# The offset of a partition at "earliest", "latest" or a timestamp in ms (None: no record at
# or after that timestamp).
OffsetResolver = Callable[[TopicNamePartition, str | int], Awaitable[int | None]]
# The timestamp (ms) of the partition's record at an offset, or of the first one after it when
# that offset is gone (None: no such record, or unknown right now).
RecordTimestamp = Callable[[TopicNamePartition, int], Awaitable[int | None]]
# Runs a blocking call (the repository's) off the event loop.
Blocking = Callable[..., Awaitable[Any]]


def blocking(executor: Executor | None) -> Blocking:
    """Run blocking calls in ``executor`` (None: asyncio's default pool)."""

    async def run(fn: Callable[..., Any], *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(executor, functools.partial(fn, *args))

    return run
