"""What an idle tiering worker costs Postgres: statements per minute while there is no work.

    .venv/bin/python -m bench.idle_tiering --smoke      # 10 partitions, 3 s
    .venv/bin/python -m bench.idle_tiering              # 100 partitions, 60 s

A topic of N partitions whose sealed segments are all tiered (one per partition), and one
tiering worker run as `tierlog tiering` runs it (run_forever at the role's default poll) for
the given time. Counted client-side on the worker's engine: every statement it executes and
every pooled connection it checks out (each costs a pre-ping `SELECT 1`), and transactions
as Postgres counts them for the database (pg_stat_database: commits + rollbacks). No S3 is
touched: with no work the worker never reaches the bucket.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from sqlalchemy import event, insert, text
from sqlalchemy.engine import Engine

from bench.servers import bench_postgres
from coldstore.object_store import ObjectStoreConfig
from metadata.brokers import BrokerRepo
from metadata.db import make_engine, migrate
from metadata.schema import hot_segments
from metadata.topics import TopicRepo
from tiering.settings import TIERING
from tiering.worker import TieringWorker


class Counts:
    def __init__(self, engine: Engine) -> None:
        self.statements = self.checkouts = 0
        event.listen(engine, "before_cursor_execute", self._statement)
        event.listen(engine.pool, "checkout", self._checkout)

    def _statement(self, *_: Any) -> None:
        self.statements += 1

    def _checkout(self, *_: Any) -> None:
        self.checkouts += 1


def transactions(url: str) -> int:
    engine = make_engine(url, poolclass=None)
    with engine.connect() as conn:
        conn.execute(text("SELECT pg_stat_clear_snapshot()"))
        n = conn.execute(
            text(
                "SELECT xact_commit + xact_rollback FROM pg_stat_database"
                " WHERE datname = current_database()"
            )
        ).scalar_one()
    engine.dispose()
    return int(n)


def seed(url: str, partitions: int) -> None:
    engine = make_engine(url)
    migrate(engine)
    BrokerRepo(engine).register(1, "http://127.0.0.1:1", 600_000)
    info = TopicRepo(engine).create("idle", partitions, 1, {"remote.storage.enable": "true"})
    with engine.begin() as conn:
        conn.execute(
            insert(hot_segments),
            [
                {
                    "topic_id": info.id,
                    "partition": p,
                    "base_offset": 0,
                    "end_offset": 100,
                    "size_bytes": 1000,
                    "state": "tiered",
                }
                for p in range(partitions)
            ],
        )
    engine.dispose()


def measure(url: str, seconds: float) -> dict[str, float]:
    engine = make_engine(url)
    counts = Counts(engine)
    poll_ms = TIERING.defaults().values["poll_ms"]
    worker = TieringWorker(engine, ObjectStoreConfig(endpoint_url="http://127.0.0.1:1"), "idle")
    stop = threading.Event()
    thread = threading.Thread(target=worker.run_forever, args=(poll_ms, stop), daemon=True)
    time.sleep(0.5)  # stats of the seeding settle before the first reading
    xacts = transactions(url)
    started = time.monotonic()
    thread.start()
    time.sleep(seconds)
    stop.set()
    thread.join(timeout=60)
    elapsed = time.monotonic() - started
    time.sleep(0.6)  # pg_stat_database is flushed about every 0.5 s
    xacts = transactions(url) - xacts - 2  # the two readings' own
    worker.close()
    engine.dispose()
    per_min = 60 / elapsed
    return {
        "poll_ms": poll_ms,
        "seconds": round(elapsed, 1),
        "statements/min": round(counts.statements * per_min, 1),
        "checkouts/min": round(counts.checkouts * per_min, 1),
        "transactions/min": round(xacts * per_min, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--smoke", action="store_true", help="10 partitions, 3 s")
    args = parser.parse_args()
    if args.smoke:
        args.partitions, args.seconds = 10, 3.0
    with tempfile.TemporaryDirectory(prefix="tierlog-bench-") as tmp:
        os.chmod(tmp, 0o755)  # as root, Postgres runs as the postgres user
        pg = bench_postgres(Path(tmp) / "pg", fast=True)
        url = pg.start()
        try:
            seed(url, args.partitions)
            result = measure(url, args.seconds)
        finally:
            pg.stop()
    print(f"idle tiering worker, {args.partitions} partitions, load {os.getloadavg()[0]:.1f}")
    for k, v in result.items():
        print(f"  {k:>18}: {v}")


if __name__ == "__main__":
    main()
