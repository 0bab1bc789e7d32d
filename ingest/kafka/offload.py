"""Worker threads for the Kafka listener's heavy steps (decompressing, walking and framing a
produce's records, parsing big frames, encoding fetched records and Fetch answers): a pool of
their own, so that a burst of them never queues the broker's other blocking calls (the lease
heartbeat's Postgres call runs in the default executor) behind it. zstd, lz4, CRC-32C, numpy
and Arrow release the GIL, so the event loop keeps running beside them."""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

_POOL = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2), thread_name_prefix="kafka-data")


async def offload(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`fn(*args, **kwargs)` in the listener's worker pool."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_POOL, functools.partial(fn, *args, **kwargs))
