"""An event loop on a thread of its own, so synchronous tests (and module-scoped fixtures)
can drive brokers that live on it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        # Every broker runs its blocking calls (Postgres, RocksDB) through to_thread: as many
        # threads as a few broker processes would have between them, not one process's share.
        self._executor = ThreadPoolExecutor(max_workers=48, thread_name_prefix="harness")
        self.loop.set_default_executor(self._executor)
        self._thread = threading.Thread(target=self._run, name="harness-loop", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        """Run `coro` on the loop and wait for its result (at most `timeout` seconds)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        async def drain() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self.run(drain(), timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()
        self._executor.shutdown(wait=False, cancel_futures=True)
