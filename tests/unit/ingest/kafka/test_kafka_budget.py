"""The Kafka listener's in-flight budget: each reservation given back exactly once, waiting
for room and giving up, and a release of what is not held is a bug, not a clamp."""

from __future__ import annotations

import asyncio

import pytest

from ingest.kafka.budget import RequestBudget


def test_release_is_exact_and_idempotent() -> None:
    async def go() -> None:
        b = RequestBudget(100)
        r1 = await b.acquire(60, 0)
        r2 = await b.acquire(40, 0)
        assert r1 is not None and r2 is not None and (b.used, b.held) == (100, 2)
        r1.release()
        r1.release()  # twice: given back once
        assert (b.used, b.held) == (40, 1)
        r2.release()
        assert (b.used, b.held) == (0, 0)
        with pytest.raises(RuntimeError):
            b.give_back(1)

    asyncio.run(go())


def test_a_waiter_gets_room_when_freed_or_gives_up() -> None:
    async def go() -> None:
        b = RequestBudget(100)
        big = await b.acquire(100, 0)
        assert big is not None
        assert await b.acquire(10, 0.05) is None  # no room within its wait
        waiter = asyncio.ensure_future(b.acquire(10, 5))
        await asyncio.sleep(0)
        big.release()
        got = await waiter
        assert got is not None and b.used == 10
        got.release()
        assert (b.used, b.held) == (0, 0)

    asyncio.run(go())


def test_a_reservation_is_given_back_by_a_task_cancelled_before_it_ran() -> None:
    """The drift: a request task cancelled before its first step never ran its finally.
    Released by the task's done callback, its bytes come back all the same."""

    async def go() -> None:
        b = RequestBudget(100)
        held = await b.acquire(30, 0)
        assert held is not None

        async def request() -> None:
            try:
                await asyncio.sleep(10)
            finally:
                pass

        task = asyncio.ensure_future(request())
        task.add_done_callback(lambda _t: held.release())
        task.cancel()  # before its first step
        await asyncio.gather(task, return_exceptions=True)
        assert (b.used, b.held) == (0, 0)

    asyncio.run(go())
