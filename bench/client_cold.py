"""The consumer cases of bench/client.py over cold data: records only in S3 (Delta/Parquet).

The cold topic is set up as bench/replay.py does it, with its own helpers: its own Postgres
and S3 endpoint (`replay.setup`, caches smaller than the data so reads go to S3), one broker,
and replay's deterministic single-partition topic produced with Arrow, tiered by a tiering
worker and deleted from the hot tier by local retention (`replay.load_topic`), so every read
below the active segment is served by the broker's cold path. Then the same raw Arrow fetch
baseline, poll() and poll_arrow() as the hot cases (bench/client_consume.py), cold only.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from bench import replay
from bench.client_consume import Row, consume_cases
from bench.replay_check import ProducedDigests
from tests.integration.brokers import BrokerProcess

SEGMENT_MB = 8  # sealed segments tier; several of them make a realistic cold range
CACHE_MB = 16  # below the data: the cases read S3, not a warm cache


def cold_cases(records: int, smoke: bool) -> list[Row]:
    """Rows for the cold tier: `records` ~100 B records, all cold but the active segment."""
    args = argparse.Namespace(
        records=records,
        value_bytes=100,
        segment_mb=1 if smoke else SEGMENT_MB,
        cache_mb=2 if smoke else CACHE_MB,
        smoke=smoke,
    )
    with tempfile.TemporaryDirectory(prefix="tierlog-bench-cold-") as tmp_name:
        tmp = Path(tmp_name)
        tmp.chmod(0o755)
        pg, s3, url = replay.setup(args, tmp)
        try:
            broker = BrokerProcess(url, tmp / "broker").start()
            try:
                replay.load_topic(args, broker, url, ProducedDigests())
                rows = consume_cases(broker.url, "replay", records, smoke, tiers=("cold",))
            finally:
                broker.stop()
        finally:
            s3.stop()
            pg.stop()
    for row in rows:
        row["settings"] = f"{row['settings']}; S3 caches {args.cache_mb} MiB"
    return rows
