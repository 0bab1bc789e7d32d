"""The seam through which the composition root adds to a node (brokers and fetch nodes import
nothing of what is added).

tierlog/cli/extensions.py passes factories to a node's ``serve``; each gets the node and
returns routes to mount beside the node's own and, optionally, a context to run while the
node runs (entered after it starts, left before it stops): background duties such as the
consumer groups' expiry sweep; and, for a broker's Kafka listener, Kafka's classic group
protocol (cluster/kafka_groups.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import NamedTuple

from starlette.routing import BaseRoute

from cluster.kafka_groups import ClassicGroups

Lifespan = Callable[[object], AbstractAsyncContextManager[None]]


class Extension(NamedTuple):
    routes: Sequence[BaseRoute] = ()
    running: Callable[[], AbstractAsyncContextManager[None]] | None = None
    kafka_groups: ClassicGroups | None = None


@contextlib.asynccontextmanager
async def running(extensions: Sequence[Extension]) -> AsyncIterator[None]:
    """Run every extension's context, leaving them in reverse order."""
    async with contextlib.AsyncExitStack() as stack:
        for ext in extensions:
            if ext.running is not None:
                await stack.enter_async_context(ext.running())
        yield


def kafka_groups_of(extensions: Sequence[Extension]) -> ClassicGroups | None:
    return next((e.kafka_groups for e in extensions if e.kafka_groups is not None), None)


def routes_of(extensions: Sequence[Extension]) -> list[BaseRoute]:
    return [r for ext in extensions for r in ext.routes]


def node_lifespan(
    start: Callable[[], Awaitable[None]],
    stop: Callable[[], Awaitable[None]],
    extensions: Sequence[Extension],
    started: Callable[[], None] = lambda: None,
) -> Lifespan:
    """A node's app lifespan: start the node, then its extensions (`started` runs once all
    are up); on the way out the extensions stop first, then the node, even after an error."""

    @contextlib.asynccontextmanager
    async def lifespan(_app: object) -> AsyncIterator[None]:
        await start()
        try:
            async with running(extensions):
                started()
                yield
        finally:
            await stop()

    return lifespan
