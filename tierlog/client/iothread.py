"""One asyncio event loop on a daemon thread: where a client's network I/O happens.

Producers, consumers and admins do all their HTTP through it, so one thread serves any number
of concurrent requests (long-polls, in-flight batches, heartbeats) while user threads block
only where the API says they do.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from tierlog.client.errors import ClientTimeoutError

T = TypeVar("T")


class IOThread:
    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            pending = asyncio.all_tasks(self.loop)
            for task in pending:
                task.cancel()
            if pending:
                self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    @property
    def in_loop(self) -> bool:
        return threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run `coro` on the loop and wait for it (from any thread but the loop's own)."""
        if self.in_loop:
            coro.close()
            # Waiting here would deadlock: the loop would wait for itself.
            raise RuntimeError("blocking client call from a client callback (the I/O thread)")
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise ClientTimeoutError(f"no result within {timeout:.3f}s") from None

    def call_soon(self, fn: Callable[..., object], *args: object) -> None:
        if self.loop.is_closed():
            return
        # The loop may close in between: then there is nothing left to wake.
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(fn, *args)

    def stop(self, timeout: float | None = 10.0) -> None:
        if self.in_loop:
            raise RuntimeError("cannot stop the client's I/O thread from inside it")
        if not self.loop.is_closed():
            self.call_soon(self.loop.stop)
        self._thread.join(timeout)
