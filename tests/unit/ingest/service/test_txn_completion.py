"""A transaction's Complete* rides with its markers' span changes (ingest/service/txn_log.py):
never written when one of those went in an earlier run that failed (the row stays prepared,
for the client's retry or the sweeper)."""

from __future__ import annotations

import asyncio

from ingest.service.txn_log import TxnLog
from metadata.txn_spans import Closed, Completed


def test_a_completion_after_a_failed_span_change_is_left_out() -> None:
    closed = Closed("t", 0, 1, True, 5)

    async def runs_take() -> tuple[list[object], list[object]]:
        loop = asyncio.get_running_loop()
        written, failed, in_this_run = (loop.create_future() for _ in range(3))
        written.set_result(True)
        failed.set_exception(OSError("Postgres away"))
        failed.exception()  # retrieved: no warning
        kept = Completed("a", 1, "PrepareCommit", "CompleteCommit", (written, in_this_run))
        dropped = Completed("b", 2, "PrepareCommit", "CompleteCommit", (written, failed))
        return [closed, kept, None], list(TxnLog._completable([closed, kept, dropped]))

    expected, got = asyncio.run(runs_take())
    assert got == expected
