"""The seam through which packages above ingest add to a broker (ingest never imports them).

The composition root (tierlog/cli.py) passes factories to ``serve``; each gets the Broker and
returns routes to mount beside the broker's own and, optionally, a context to run while the
broker runs (entered after ``Broker.start``, left before ``Broker.stop``): background duties
such as the consumer groups' expiry sweep.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, NamedTuple

from starlette.routing import BaseRoute

if TYPE_CHECKING:
    from ingest.broker import Broker


class Extension(NamedTuple):
    routes: Sequence[BaseRoute] = ()
    running: Callable[[], AbstractAsyncContextManager[None]] | None = None


ExtensionFactory = Callable[["Broker"], Extension]


@contextlib.asynccontextmanager
async def running(extensions: Sequence[Extension]) -> AsyncIterator[None]:
    """Run every extension's context, leaving them in reverse order."""
    async with contextlib.AsyncExitStack() as stack:
        for ext in extensions:
            if ext.running is not None:
                await stack.enter_async_context(ext.running())
        yield
